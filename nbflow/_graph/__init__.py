"""nbflow._graph: see CONTRIBUTING.md for the layers."""
