"""nbflow._show: see CONTRIBUTING.md for the layers."""
