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
        from IPython.display import display

        from nbflow.widgets import RunView
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
        from nbflow.widgets import RunView
    except ImportError:
        return None
    bundle: dict[str, Any] = RunView(run, handle=handle)._repr_mimebundle_(include=include, exclude=exclude)
    return bundle


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
