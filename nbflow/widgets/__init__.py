"""Notebook front ends: the only package that imports ipywidgets (lazily, inside its modules)."""
