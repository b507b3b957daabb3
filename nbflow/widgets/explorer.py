"""The batch results explorer's front end: an anywidget (ES module, no build step) with a run view beside it.

It knows nothing of batches: ``nbflow._batch.explore`` gives it a ``query(request) -> page`` function and
an ``open(position) -> widget`` function. Every user action (filter, sort, page, a row click, compare, an
answer) travels as a *custom message* (``model.send`` -> ``on_msg``): ipywidgets' per-model update
throttle never holds those back, so every click is handled, also while a cell awaits
(docs/widgets.md). The kernel answers by setting state, which the browser renders.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets

from nbflow._front import asset, look_js

__all__ = ["ExplorerTable", "ExplorerView"]

_RENDER = r"""
function render({ model, el }) {
  el.classList.add("nbflow-explorer");
  const snap = model.get("snapshot_id");  // the static snapshot beside this view (saved notebooks): hidden while live
  if (snap && !document.getElementById("nbflow-hide-" + snap)) {
    const style = h("style", { id: "nbflow-hide-" + snap });
    style.textContent = `.nbflow-snap-${snap} { display: none !important; }`;
    document.head.append(style);
  }
  const send = (msg) => model.send(msg);
  const query = {};
  const ask = (change) => { Object.assign(query, change); send({ type: "query", ...query }); };

  function draw() {
    el.replaceChildren();
    el.append(nbxBars(model.get("progress")));
    const select = (name, options, value, label) => {
      const s = h("select", { class: `nbx-${name}`, "aria-label": label, onchange: (e) => ask({ [name]: e.target.value, page: 0 }) });
      for (const [v, text] of options) s.append(h("option", { value: v, selected: v === value || null }, text));
      return s;
    };
    const st = model.get("statuses"), vs = model.get("variants"), q = model.get("query");
    const compare = q.mode === "compare";
    el.append(h("div", { class: "nbx-controls" },
      "status ", select("status", [["", "all"], ...st.map((s) => [s, `${NBX_SYMBOLS[s] || ""} ${s}`])], q.status || "", "status"),
      vs.length ? " variant " : "", vs.length ? select("variant", [["", "all"], ...vs.map((v) => [v, v])], q.variant || "", "variant") : "",
      " sort ", select("sort", model.get("sorts").map((s) => [s, s || "row order"]), q.sort || "", "sort"),
      compare && vs.length > 1 ? " baseline " : "", compare && vs.length > 1 ? select("baseline", vs.map((v) => [v, v]), q.baseline || vs[0], "baseline variant") : "",
      h("button", { class: "nbx-mode", onclick: () => ask({ mode: compare ? "rows" : "compare", page: 0 }) }, compare ? "rows" : "compare variants"),
      compare ? h("button", { class: "nbx-regressions", onclick: () => ask({ regressions: !q.regressions, page: 0 }) },
        q.regressions ? "all cases" : "regressions only") : "",
      h("button", { class: "nbx-prev", "aria-label": "previous page", onclick: () => ask({ page: Math.max(0, (q.page || 0) - 1) }) }, "‹"),
      h("span", { class: "nbx-range" }, model.get("range_text")),
      h("button", { class: "nbx-next", "aria-label": "next page", onclick: () => ask({ page: (q.page || 0) + 1 }) }, "›")));
    const rows = model.get("rows");
    el.append(nbxTable(model.get("columns"), rows, {
      key: (row) => row.__pos, keyAttr: "data-pos", selected: model.get("selected"),
      open: (row) => send({ type: "open", pos: row.__pos }),
      marked: (row) => row.__blocked || null,  // a click still opens it: the detail says why it cannot
      extra: (row) => row.__options && row.__options.length ? h("td", { class: "nbx-answer" }, ...row.__options.map((opt) =>
        h("button", { class: "nbx-answer-btn", onclick: (e) => { e.stopPropagation(); send({ type: "answer", pos: row.__pos, answer: opt }); } }, opt))) : null,
    }));
    const note = model.get("note");
    if (note) el.append(h("div", { class: "nbx-note" }, note));
  }
  for (const name of ["rows", "columns", "progress", "range_text", "selected", "note", "query"]) model.on(`change:${name}`, draw);
  draw();
}
export default { render };
"""

# The explorer's own rules; the shared look is nbflow/_front/components.css.
_CSS_OWN = """
.nbflow-explorer { font-size: 12px; min-width: 0; }
.nbflow-explorer .nbx-scroll { max-height: 460px; }
"""

_ESM = look_js() + asset("components.js") + _RENDER
_CSS = asset("components.css") + _CSS_OWN


class ExplorerTable(anywidget.AnyWidget):
    """The table half of the explorer: bars, controls and one page of rows (state set by the kernel)."""

    _esm = _ESM
    _css = _CSS
    rows: traitlets.List[Any] = traitlets.List([]).tag(sync=True)
    columns: traitlets.List[Any] = traitlets.List([]).tag(sync=True)
    progress: traitlets.List[Any] = traitlets.List([]).tag(sync=True)
    statuses: traitlets.List[Any] = traitlets.List([]).tag(sync=True)
    variants: traitlets.List[Any] = traitlets.List([]).tag(sync=True)
    sorts: traitlets.List[Any] = traitlets.List([]).tag(sync=True)
    query = traitlets.Dict({}).tag(sync=True)
    range_text = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    snapshot_id = traitlets.Unicode("").tag(sync=True)


class ExplorerView(widgets.HBox):
    """The explorer: the table on the left, the selected row's run view on the right.

    ``query(request)`` returns the state for a query (``rows``, ``columns``, ``range_text``, ...);
    ``open(position)`` returns the widget to show for that row (its run view) or raises with the reason;
    ``answer(position, answer)`` answers a paused row.
    """

    def __init__(
        self,
        query: Callable[[dict[str, Any]], dict[str, Any]],
        open_row: Callable[[int], Any],
        answer: Callable[[int, Any], None],
        static: dict[str, Any],
        size: int = 0,
        snapshot: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        import secrets

        self._snapshot = snapshot
        self.snapshot_id = secrets.token_hex(6)
        self.table = ExplorerTable(**static, snapshot_id=self.snapshot_id)
        # Side by side when the output is wide enough for both (table >= 560 px, run view >= 480 px), else the run
        # view goes below a table of the full width (its compare columns stay in view; one column under ~1040 px).
        self.detail = widgets.Output(layout=widgets.Layout(flex="1 1 480px", min_width="0"))
        # (the table's own Layout, set in place: a new one would leave that one's comm open)
        self.table.layout.flex, self.table.layout.min_width, self.table.layout.max_width = "1 1 560px", "0", "100%"
        super().__init__([self.table, self.detail], layout=widgets.Layout(flex_flow="row wrap", width="100%"))
        self._query_fn, self._open, self._answer = query, open_row, answer
        self.size = size  # rows of the frame: a position outside range(size) is refused
        self.handled = 0  # custom messages handled (the browser test reads it through the page)
        self.table.on_msg(self._on_msg)
        self._apply({"page": 0})

    def _apply(self, request: dict[str, Any]) -> None:
        state = self._query_fn(request)
        with self.table.hold_sync():
            for k, v in state.items():
                setattr(self.table, k, v)

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A message from the browser: checked whole first; a malformed one changes nothing and the table's note
        says why. Nothing raised here reaches the cell (an answer the batch refuses is said in the note too)."""
        self.handled += 1
        try:
            why = self._refusal(content)
            if why is None:
                self._handle(content)
        except Exception as exc:  # AnswerError, BatchError of a valid-looking answer; or a bug: said in place
            why = f"{type(exc).__name__}: {exc}"
        if why:
            self.table.note = why[:300]

    def _refusal(self, content: Any) -> str | None:
        """Why ``content`` is not a message the explorer acts on, or None."""
        if not isinstance(content, dict):
            return f"refused a message that is not an object: {type(content).__name__}"
        kind = content.get("type")
        if kind == "query":
            return self._query_refusal(content)
        if kind in ("open", "answer"):
            pos = content.get("pos")
            if not isinstance(pos, int) or isinstance(pos, bool) or not 0 <= pos < self.size:
                return f"refused {kind}: pos {pos!r} is not a row position (0 to {self.size - 1})"
            if kind == "answer" and not isinstance(content.get("answer"), str | int | float | bool):
                return f"refused answer: {type(content.get('answer')).__name__} is not one of the options"
            return None
        return f"refused a message of unknown type {kind!r}"

    def _query_refusal(self, content: dict[str, Any]) -> str | None:
        choices = {
            "status": ["", *self.table.statuses],
            "variant": ["", *self.table.variants],
            "sort": list(self.table.sorts),
            "mode": ["rows", "compare"],
        }
        for key, value in content.items():
            if key == "type" or value is None:
                continue
            if key in choices:
                if value not in choices[key] if isinstance(value, str) else True:
                    return f"refused query: {key}={value!r} is not one of {choices[key]}"
            elif key == "page":
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    return f"refused query: page={value!r} is not a page number"
            elif key == "regressions":
                if not isinstance(value, bool):
                    return f"refused query: regressions={value!r} is not true or false"
            else:
                return f"refused query: unknown field {key!r}"
        return None

    def _handle(self, content: dict[str, Any]) -> None:
        kind = content["type"]
        if kind == "query":
            self._apply({k: v for k, v in content.items() if k != "type"})
        elif kind == "open":
            self.show(content["pos"])
        elif kind == "answer":
            pos = content["pos"]
            self._answer(pos, content["answer"])
            self._apply(dict(self.table.query))
            self.show(pos)

    def close(self) -> None:
        """Close the explorer with every widget it made (the table, the detail pane, their layouts)."""
        parts = [self.table, self.detail, self.table.layout, self.detail.layout, self.layout]
        super().close()
        for part in parts:
            part.close()

    def snapshot_html(self, hide_widget: bool = True) -> str:
        """The explorer as static HTML (bars, summary, the first rows with failures first): what a saved notebook,
        nbconvert and GitHub show. Inline styles only (sanitizers drop ``<style>``). ``hide_widget=False``: for a
        snapshot inside another (the batch display's), which hides the dead widget itself."""
        if self._snapshot is None:
            return ""
        return static_html(self._snapshot(), self.snapshot_id, hide_widget=hide_widget)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The static snapshot goes out first, as an output of its own (as the run view's), then the widget, whose
        text is one line (not ``ExplorerView(children=...)``)."""
        from IPython.display import display

        if self.comm is None:
            return {"text/plain": "<nbflow explorer (closed)>"}
        html = self.snapshot_html()
        if html:
            display({"text/html": html, "text/plain": "<nbflow explorer snapshot>"}, raw=True)
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = f"<nbflow explorer: {self.table.range_text}>"
        return bundle

    def show(self, pos: int) -> None:
        """Show row ``pos``'s run view beside the table."""
        from IPython.display import display

        self.table.selected = pos
        self.detail.clear_output()
        with self.detail:
            try:
                display(self._open(pos))
            except Exception as exc:  # a row whose run was not kept: say why, in place
                display(widgets.HTML(f"<div style='padding:6px'>{type(exc).__name__}: {_esc(str(exc))}</div>"))


def _esc(text: str) -> str:
    import html

    return html.escape(text)


_STATE_TEXT = {"succeeded": "#2b8a3e", "failed": "#c92a2a", "paused": "#6741d9", "cancelled": "#c2410c"}


def static_html(state: dict[str, Any], snapshot_id: str, *, hide_widget: bool = True) -> str:
    """The explorer's static snapshot from ``nbflow._batch.explore.snapshot_state``'s data (see ``snapshot_html``).

    ``hide_widget``: a rule (trusted notebooks) hiding the dead widget output right after it when the notebook is
    reopened without its kernel (the run view's, ``_hide_dead_widget``)."""
    from nbflow.widgets.batch_progress import variant_bars
    from nbflow.widgets.run_view import _hide_dead_widget
    from nbflow.widgets.style import SYMBOLS, esc

    cell = "padding:2px 6px;border-bottom:1px solid #dee2e6;text-align:left;vertical-align:top"
    parts = [variant_bars(state.get("progress") or [], "nbflow-variants-snap")]
    summary = state.get("summary") or []
    if summary:
        cols = list(summary[0])
        head = "".join(f'<th style="{cell}">{esc(c)}</th>' for c in cols)
        body = "".join(
            "<tr>" + "".join(f'<td style="{cell}">{esc(_short_number(r.get(c)))}</td>' for c in cols) + "</tr>"
            for r in summary
        )
        parts.append(
            f'<table style="border-collapse:collapse;font-size:12px;margin:6px 0"><tr>{head}</tr>{body}</table>'
        )
    columns = [str(c) for c in state.get("columns") or []]
    head = "".join(f'<th style="{cell}">{esc(c)}</th>' for c in columns)
    lines = []
    for row in state.get("rows") or []:
        tds = []
        for c in columns:
            value = row.get(c, "")
            text = "" if value is None else str(value)
            if c == "status":
                color = _STATE_TEXT.get(text, "#495057")
                tds.append(
                    f'<td style="{cell};color:{color};font-weight:600;white-space:nowrap">{esc(SYMBOLS.get(text, ""))} {esc(text)}</td>'
                )
            else:
                tds.append(
                    f'<td style="{cell};max-width:360px;overflow:hidden;text-overflow:ellipsis">{esc(text[:200])}</td>'
                )
        lines.append("<tr>" + "".join(tds) + "</tr>")
    total, shown = int(state.get("total") or 0), len(state.get("rows") or [])
    parts.append(f'<table style="border-collapse:collapse;font-size:12px">{f"<tr>{head}</tr>"}{"".join(lines)}</table>')
    problems = int(state.get("problems") or 0)
    note = f"{shown} of {total} rows" + (f", the {problems} failed or paused first" if problems else "")
    parts.append(
        f'<div style="color:#495057;font-size:12px;margin-top:4px">Static snapshot of the explorer: {esc(note)}. '
        "Every row: <code>nf.explore(df)</code> in a kernel, or <code>nf.report(df, 'report.html')</code>.</div>"
    )
    hide = _hide_dead_widget(snapshot_id) if hide_widget else ""
    return (
        f'<div class="nbflow-snap nbflow-snap-{esc(snapshot_id)} nbflow-explorer-snap" '
        f'style="font-family:sans-serif;font-size:13px">{hide}{"".join(parts)}</div>'
    )


def _short_number(value: Any) -> str:
    if isinstance(value, float):
        return "" if value != value else f"{value:.4g}"
    return "" if value is None else str(value)
