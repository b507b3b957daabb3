"""nbflow._core: see CONTRIBUTING.md for the layers."""
