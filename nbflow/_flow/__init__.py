"""nbflow._flow: see CONTRIBUTING.md for the layers."""
