"""nbflow._record: see CONTRIBUTING.md for the layers."""
