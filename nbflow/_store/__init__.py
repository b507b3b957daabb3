"""nbflow._store: see CONTRIBUTING.md for the layers."""
