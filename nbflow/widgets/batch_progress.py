"""The batch progress bar for notebooks: an ipywidgets bar plus one line of text.

Created by ``flow.batch`` in a kernel; it reads ``nbflow._record.batch_progress.BatchProgress`` at most 4 times a
second (the batch never waits for it). Its ``text/plain`` fallback is the same line a terminal shows.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from nbflow._record.batch_progress import BatchProgress

__all__ = ["BatchProgressWidget"]

_STYLES = {"running": "info", "succeeded": "success", "failed": "warning", "stopped": "danger"}


class BatchProgressWidget:
    """A progress bar (done / total) and a label (failed, in flight, rate, ETA)."""

    def __init__(self, state: BatchProgress | None = None, *, display: bool = True) -> None:
        self.bar = widgets.IntProgress(value=0, min=0, max=1, bar_style=_STYLES["running"])
        self.label = widgets.HTML(value="starting...")
        self.box = widgets.HBox([self.bar, self.label])
        self._text = "starting..."
        self._displayed = False
        if state is not None:
            self.update(state)
        if display:
            from IPython.display import display as show

            show(self)
            self._displayed = True

    def update(self, state: BatchProgress) -> None:
        with self.box.hold_sync():
            self.bar.max = max(state.total, 1)
            self.bar.value = state.done
            self._text = state.text()
            self.label.value = _html(self._text)

    def close(self, state: BatchProgress) -> None:
        self.update(state)
        if state.stopped:
            self.bar.bar_style = _STYLES["stopped"]
        elif state.failed:
            self.bar.bar_style = _STYLES["failed"]
        else:
            self.bar.bar_style = _STYLES["succeeded"]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        bundle = self.box._repr_mimebundle_(include=include, exclude=exclude)
        if isinstance(bundle, dict):
            bundle["text/plain"] = f"<batch progress: {self._text}>"
        return bundle


def _html(text: str) -> str:
    import html

    return f'<code style="white-space: nowrap">{html.escape(text)}</code>'
