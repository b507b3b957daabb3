"""The notebook UI: the only package that imports ipywidgets / IPython.display.

``RunView`` is the live view of one run; ``style`` holds the shared look (state colours, chips)
that other displays (batch progress) reuse.
"""

from .run_view import RunView as RunView

__all__ = ["RunView"]
