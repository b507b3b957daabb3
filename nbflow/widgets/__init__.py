"""Notebook front ends: the only package that imports ipywidgets (lazily, inside its modules).

``RunView`` (``run_view.py``) is the live view of one run; ``style.py`` holds the shared look (state
colours from ``nbflow._show.draw.STATE_COLORS``, chips, badges) for every display, batch progress included.
"""

from nbflow.widgets.run_view import RunView as RunView

__all__ = ["RunView"]
