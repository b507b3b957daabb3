"""Where runs meet the notebook display. Imports the widgets lazily, and only inside a kernel.

* ``auto_show(run, handle, show)`` — called by ``flow.run``/``arun``/``start`` when a run is created:
  in a kernel (and ``show`` / ``nbflow.config.show`` allow it) it displays the live RunView; outside
  a kernel it prints a compact text progress only when ``show=True`` was passed explicitly.
* ``rich_bundle(run, handle)`` — what displaying a Run or RunHandle shows in a kernel: the widget
  (or, right after the live view of that run was shown in the same cell, just its one-line repr,
  so ``flow.run(...)`` as a cell's last line does not draw it twice).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from .config import config
from .runner import in_kernel

if TYPE_CHECKING:
    from .run import Run
    from .runner import RunHandle

__all__ = ["auto_show", "rich_bundle"]

# run -> the execution count of the cell that showed its live view
_shown: weakref.WeakKeyDictionary[Run, int] = weakref.WeakKeyDictionary()


def _execution_count() -> int:
    from IPython import get_ipython

    ip = get_ipython()
    return int(getattr(ip, "execution_count", 0) or 0)


def auto_show(run: Run, handle: RunHandle | None = None, show: bool | None = None) -> None:
    """Display the live view of a new run when asked to (see the module docstring)."""
    if show is False or (show is None and not config.show):
        return
    if run.graph is None:
        return
    if not in_kernel():
        if show:
            from .run_progress import RunTextProgress

            run.subscribe(RunTextProgress(run))
        return
    try:
        from IPython.display import display

        from .widgets import RunView
    except ImportError:  # ipywidgets not installed: the run's own repr (SVG) is shown when displayed
        return
    display(RunView(run, handle=handle))
    _shown[run] = _execution_count()


def rich_bundle(run: Run, handle: RunHandle | None, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
    """The widget's mime bundle when in a kernel with ipywidgets, else None (caller shows SVG/text)."""
    if not in_kernel() or not config.widgets or run.graph is None:
        return None
    if _shown.get(run) == _execution_count():
        return {"text/plain": repr(run)}
    try:
        from .widgets import RunView
    except ImportError:
        return None
    bundle: dict[str, Any] = RunView(run, handle=handle)._repr_mimebundle_(include=include, exclude=exclude)
    return bundle
