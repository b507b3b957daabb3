"""The batch progress bar for notebooks: an ipywidgets bar plus one line of text.

Created by ``flow.batch`` in a kernel; it reads ``nbflow._record.batch_progress.BatchProgress`` at most 4 times a
second (the batch never waits for it). Its ``text/plain`` fallback is the same line a terminal shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from nbflow._record.batch_progress import BatchProgress

__all__ = ["BatchProgressWidget", "overall_bar", "variant_bars"]

_BAR = "display:flex;width:{w}px;height:{h}px;border-radius:3px;overflow:hidden;background:#f1f3f5;border:1px solid #868e96"


class BatchProgressWidget:
    """A progress bar (done / total) and a label (failed, in flight, rate, ETA)."""

    def __init__(self, state: BatchProgress | None = None, *, display: bool = True) -> None:
        # one segment per state, sized by its rows (3 failed of 30 is a tenth of the bar, with its pattern)
        self.bar = widgets.HTML(value=_segments({"pending": 1}, 300, 14))
        self.label = widgets.HTML(value="starting...")
        self.box = widgets.VBox([widgets.HBox([self.bar, self.label])])
        self.variants: widgets.HTML | None = None  # one bar per grid combination (show_variants)
        self.explorer: Any = None  # the results explorer, shown in place when the batch ends
        self._counts: Callable[[], list[dict[str, Any]]] | None = None
        self._explore: Callable[[], Any] | None = None
        self._text = "starting..."
        self._displayed = False
        self._handle: Any = None
        self._snapshots: list[Any] = []  # the static snapshots shown (one per display), filled when the batch ends
        self._final = False
        if state is not None:
            self.update(state)
        if display:
            from IPython.display import display as show

            # With a display id: close() updates the output, so a saved notebook's text is the final line.
            self._handle = show(self, display_id=True)
            self._displayed = True

    def show_variants(self, counts: Callable[[], list[dict[str, Any]]], explore: Callable[[], Any] | None) -> None:
        """Also draw one bar per grid combination, counts by status, from ``counts()`` at every update;
        when the batch ends, ``explore()`` (the results explorer, with the same bars) takes their place."""
        self._counts, self._explore = counts, explore
        self.variants = widgets.HTML(value=variant_bars(counts()))
        self.box.children = (*self.box.children, self.variants)

    def update(self, state: BatchProgress) -> None:
        with self.box.hold_sync():
            self.bar.value = overall_bar(state)
            self._text = state.text()
            self.label.value = _html(self._text)
        if self._counts is not None and self.variants is not None:
            self.variants.value = variant_bars(self._counts())

    def close(self, state: BatchProgress) -> None:
        self.update(state)
        if self._explore is not None and self.explorer is None:
            self.explorer = self._explore()
            # the explorer draws the same per-variant bars above its table: it takes their place
            self.box.children = (*(c for c in self.box.children if c is not self.variants), self.explorer)
        self._final = True
        for snapshot in self._snapshots:
            try:
                snapshot.update(self._snapshot_bundle(), raw=True)
            except Exception:  # no front end any more
                pass
        if self._handle is not None:
            try:
                self._handle.update(self)
            except Exception:  # no front end any more: the live bar already shows the end
                pass

    def snapshot_html(self) -> str:
        """The batch's end as static HTML (its line, and the explorer's snapshot or the per-variant bars): what a
        saved notebook, nbconvert and GitHub show beside the widget. Empty while the batch runs (the live bar
        shows it then); the live explorer hides it, and a rule hides it beside a live bar (trusted notebooks)."""
        if not self._final:
            return '<div class="nbflow-batch-snap-pending"></div>'
        from nbflow.widgets.run_view import _hide_dead_widget

        explorer = self.explorer  # (its own snapshot, by its method: the explorer module imports this one)
        ident = getattr(explorer, "snapshot_id", None) or _snapshot_id(self)
        body = explorer.snapshot_html(hide_widget=False) if explorer is not None else ""
        if not body and self._counts is not None:
            body = variant_bars(self._counts(), "nbflow-variants-snap")
        # beside a live bar (the kernel still has the widget), the snapshot is not needed
        live = (
            f"<style>.jp-OutputArea-child:has(.nbflow-snap-{ident}):has(+ .jp-OutputArea-child .widget-hbox) "
            f"{{ display: none; }}</style>"
        )
        return (
            f'<div class="nbflow-snap nbflow-snap-{ident} nbflow-batch-snap" style="font-family:sans-serif;'
            f'font-size:13px">{_hide_dead_widget(ident)}{live}'
            f'<div style="display:flex;align-items:center;gap:8px">{self.bar.value}{_html(self._text)}</div>{body}</div>'
        )

    def _snapshot_bundle(self) -> dict[str, Any]:
        return {"text/html": self.snapshot_html(), "text/plain": "<batch snapshot>"}

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        from IPython.display import display

        if not self._snapshots and not self._final:  # the first display (not the update when the batch ends)
            handle = display(self._snapshot_bundle(), raw=True, display_id=True)
            if handle is not None:
                self._snapshots.append(handle)
        bundle = self.box._repr_mimebundle_(include=include, exclude=exclude)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = f"<batch progress: {self._text}>"
        return bundle


def _html(text: str) -> str:
    import html

    return f'<code style="white-space: nowrap">{html.escape(text)}</code>'


def overall_bar(state: BatchProgress) -> str:
    """The whole batch as one bar: succeeded, failed, paused, from the store, running and pending rows, each a
    segment as wide as its share (a few failed rows are a thin patterned slice, never a bar of their colour)."""
    counts = {
        "succeeded": state.succeeded,
        "failed": state.failed,
        "paused": state.paused,
        "from store": state.resumed,
        "running": state.in_flight if state.finished_at is None else 0,
    }
    counts["pending"] = max(state.total - state.done - counts["running"], 0)
    return _segments(counts, 300, 14, css_class="nbflow-overall")


def _segments(counts: dict[str, int], width: int, height: int, css_class: str = "") -> str:
    """A bar of one segment per state with rows (``nbflow._show.draw.SEGMENTS``: colour and pattern), its counts
    in words with their symbols as its accessible name and tooltip."""
    import html

    from nbflow._show.draw import SEGMENTS
    from nbflow.widgets.style import SYMBOLS

    counts = {k: n for k, n in counts.items() if n}
    total = sum(counts.values()) or 1
    segments = "".join(
        f'<span class="nbflow-seg nbflow-seg-{esc.replace(" ", "-")}" title="{n} {esc}" '
        f'style="width:{100 * n / total:.3f}%;background:{SEGMENTS.get(status, "#ced4da")}"></span>'
        for status, n in counts.items()
        for esc in (html.escape(status),)
    )
    words = html.escape(", ".join(f"{SYMBOLS.get(s, '')} {n} {s}".strip() for s, n in counts.items()))
    return (
        f'<span class="nbflow-segbar {css_class}" role="img" aria-label="{words}" title="{words}" '
        f'style="{_BAR.format(w=width, h=height)}">{segments}</span>'
    )


def variant_bars(groups: list[dict[str, Any]], css_class: str = "nbflow-variants") -> str:
    """One row per variant: its label, a bar of segments sized by row counts per status, the counts.

    A few failed rows are a thin patterned slice of their variant's bar, never a red bar.
    """
    import html

    from nbflow.widgets.style import SYMBOLS

    rows = []
    for group in groups:
        counts = {k: n for k, n in group["counts"].items() if n}
        text = ", ".join(f"{SYMBOLS.get(s, '')} {n} {s}".strip() for s, n in counts.items())
        rows.append(
            '<div class="nbflow-variant" style="display:flex;align-items:center;gap:8px;margin:1px 0">'
            f'<span style="min-width:90px;font-weight:600">{html.escape(str(group["label"]))}</span>'
            f"{_segments(counts, 260, 10)}"
            f'<code style="white-space:nowrap">{html.escape(text)}</code></div>'
        )
    return f'<div class="{css_class}">' + "".join(rows) + "</div>"


def _snapshot_id(widget: BatchProgressWidget) -> str:
    found = getattr(widget, "_snap_id", None)
    if found is None:
        import secrets

        found = widget._snap_id = secrets.token_hex(6)  # type: ignore[attr-defined]
    return str(found)
