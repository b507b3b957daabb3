"""nbflow._dsl: see CONTRIBUTING.md for the layers."""
