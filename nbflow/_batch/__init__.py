"""nbflow._batch: see CONTRIBUTING.md for the layers."""
