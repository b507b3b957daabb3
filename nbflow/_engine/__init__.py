"""nbflow._engine: see CONTRIBUTING.md for the layers."""
