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

from nbflow._core.config import config
from nbflow._core.errors import BatchError
from nbflow._core.present import set_presenter
from nbflow._engine.kernel import in_kernel
from nbflow._record.batch_progress import BatchProgress, ProgressRenderer
from nbflow._show.draw import mimebundle
from nbflow._show.text import TEXT_DELAY, TextProgress

if TYPE_CHECKING:
    from nbflow._engine.kernel import RunHandle
    from nbflow._record.run import Run
import sys

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
            from nbflow._show.text import RunTextProgress

            run.subscribe(RunTextProgress(run))
        return
    try:
        from nbflow.widgets import RunView
    except ImportError:  # ipywidgets/anywidget not installed: the run's own repr (SVG) is shown when displayed
        return
    _close_earlier_views()
    view = RunView(run, handle=handle)
    view.show()  # the live widget, with the static snapshot a saved notebook shows
    _remember(view)
    _shown[run] = _execution_count()


def rich_bundle(run: Run, handle: RunHandle | None, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
    """The widget's mime bundle when in a kernel with ipywidgets, else None (caller shows SVG/text)."""
    if not in_kernel() or not config.widgets or run.graph is None:
        return None
    if _shown.get(run) == _execution_count():
        return {"text/plain": repr(run)}
    try:
        from nbflow.widgets import RunView
    except ImportError:
        return None
    _close_earlier_views()
    view = RunView(run, handle=handle)
    _remember(view)
    # the view's bundle; its static snapshot goes out first, as an output of its own (RunView._show_snapshot)
    bundle: dict[str, Any] = view._repr_mimebundle_(include=include, exclude=exclude)
    return bundle


# The views shown by each cell (by the front end's cell id): re-running a cell replaces its outputs, so
# the views its previous run showed are closed (their comms and state freed in the kernel).
_cell_views: dict[str, list[Any]] = {}


_current: dict[str, str] = {}  # cell id -> the msg_id of the execution whose views are current


def _close_earlier_views() -> None:
    """Close the views a cell showed in its previous execution (they are no longer on screen)."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else None
    except Exception:
        parent = None
    if not parent:
        return
    cell = parent.get("metadata", {}).get("cellId")
    msg_id = parent.get("header", {}).get("msg_id")
    if not cell or not msg_id:
        return
    if _current.get(cell) != msg_id:
        _current[cell] = msg_id
        for view in _cell_views.pop(cell, []):
            view.close()


def _remember(view: Any) -> None:
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else None
    except Exception:
        parent = None
    cell = (parent or {}).get("metadata", {}).get("cellId")
    if cell:
        _cell_views.setdefault(cell, []).append(view)


def present(run: Run, handle: RunHandle | None, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """What displaying a Run or RunHandle shows: the live widget in a kernel, else the coloured graph."""
    bundle = rich_bundle(run, handle, include, exclude)
    return bundle if bundle is not None else mimebundle(run.graph, run, text=run.summary())


set_presenter(present)


def make_renderer(progress: Any, kernel: bool, state: BatchProgress | None = None) -> ProgressRenderer | None:
    """The renderer for the ``progress=`` option (see the module docstring)."""
    if progress is False:
        return None
    if progress is None or progress is True:
        if kernel:
            from nbflow.widgets.batch_progress import BatchProgressWidget

            return BatchProgressWidget(state)
        stream = sys.stderr
        tty = bool(getattr(stream, "isatty", lambda: False)())
        if progress is None and not tty:
            return None
        return TextProgress(stream, delay=TEXT_DELAY if progress is None else 0.0)
    if callable(getattr(progress, "update", None)) and callable(getattr(progress, "close", None)):
        return progress

    raise BatchError(
        f"progress= must be None (auto), True, False or an object with update(state) and close(state), got {progress!r}"
    )


def _warm_up() -> None:
    """In a kernel, import the run view with nbflow, not inside the cell of the first run.

    The first ``flow.run`` then paints sooner, and a kernel interrupt in that cell reaches the run (it is
    cancelled and recorded) instead of landing in a widget library's import.
    """
    if not (in_kernel() and config.show and config.widgets):
        return
    try:
        import nbflow.widgets  # noqa: F401
    except ImportError:  # ipywidgets/anywidget not installed: runs show their SVG
        pass


_warm_up()
