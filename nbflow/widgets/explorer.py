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

__all__ = ["ExplorerTable", "ExplorerView"]

_ESM = r"""
function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v; else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(kid ?? ""));
  return el;
}
const COLORS = { succeeded: "#2f9e44", failed: "#e03131", paused: "#f08c00", cancelled: "#868e96", pending: "#adb5bd" };

function render({ model, el }) {
  el.classList.add("nbflow-explorer");
  const send = (msg) => model.send(msg);
  const query = {};
  const ask = (change) => { Object.assign(query, change); send({ type: "query", ...query }); };

  function draw() {
    el.replaceChildren();
    const progress = model.get("progress");
    const bars = h("div", { class: "nbx-bars" });
    for (const p of progress) {
      const bar = h("div", { class: "nbx-bar", title: JSON.stringify(p.counts) });
      for (const [status, n] of Object.entries(p.counts)) {
        if (!n) continue;
        bar.append(h("span", { class: "nbx-seg", style: `flex:${n};background:${COLORS[status] || "#ced4da"}` }));
      }
      const text = Object.entries(p.counts).filter(([, n]) => n).map(([s, n]) => `${n} ${s}`).join(", ");
      bars.append(h("div", { class: "nbx-bar-row" }, h("span", { class: "nbx-label" }, p.label), bar, h("span", { class: "nbx-count" }, text)));
    }
    el.append(bars);

    const controls = h("div", { class: "nbx-controls" });
    const select = (name, options, value) => {
      const s = h("select", { class: `nbx-${name}`, onchange: (e) => ask({ [name]: e.target.value, page: 0 }) });
      for (const [v, label] of options) {
        const o = h("option", { value: v }, label); if (v === value) o.selected = true; s.append(o);
      }
      return s;
    };
    const st = model.get("statuses"), vs = model.get("variants"), q = model.get("query");
    controls.append(
      "status ", select("status", [["", "all"], ...st.map((s) => [s, s])], q.status || ""),
      vs.length ? " variant " : "", vs.length ? select("variant", [["", "all"], ...vs.map((v) => [v, v])], q.variant || "") : "",
      " sort ", select("sort", model.get("sorts").map((s) => [s, s || "row order"]), q.sort || ""),
      h("button", { class: "nbx-mode", onclick: () => ask({ mode: q.mode === "compare" ? "rows" : "compare", page: 0 }) },
        q.mode === "compare" ? "rows" : "compare variants"),
      q.mode === "compare" ? h("button", { class: "nbx-regressions", onclick: () => ask({ regressions: !q.regressions, page: 0 }) },
        q.regressions ? "all cases" : "regressions only") : "",
      h("button", { class: "nbx-prev", onclick: () => ask({ page: Math.max(0, (q.page || 0) - 1) }) }, "‹"),
      h("span", { class: "nbx-range" }, model.get("range_text")),
      h("button", { class: "nbx-next", onclick: () => ask({ page: (q.page || 0) + 1 }) }, "›"),
    );
    el.append(controls);

    const cols = model.get("columns");
    const table = h("table", { class: "nbx-table" });
    table.append(h("thead", {}, h("tr", {}, ...cols.map((c) => h("th", {}, c)))));
    const body = h("tbody");
    for (const row of model.get("rows")) {
      const tr = h("tr", { class: `nbx-row nbx-${row.status || ""}` + (row.__pos === model.get("selected") ? " nbx-selected" : ""),
        "data-pos": row.__pos, onclick: () => send({ type: "open", pos: row.__pos }) });
      for (const c of cols) {
        const td = h("td", { class: `nbx-col-${c.replace(/[^a-z0-9_]/gi, "_")}` }, String(row[c] ?? ""));
        if (c === "status") td.style.color = COLORS[row.status] || "";
        if (row[`${c}.explanation`]) td.title = row[`${c}.explanation`];  // a scorer's why, on hover
        if (c.endsWith(": change") && (row[c] === "regressed" || row[c] === "newly_failing")) td.style.color = COLORS.failed;
        tr.append(td);
      }
      if (row.__options && row.__options.length) {
        const td = h("td", { class: "nbx-answer" });
        for (const opt of row.__options) {
          td.append(h("button", { class: "nbx-answer-btn", onclick: (e) => { e.stopPropagation(); send({ type: "answer", pos: row.__pos, answer: opt }); } }, opt));
        }
        tr.append(td);
      }
      body.append(tr);
    }
    table.append(body);
    el.append(h("div", { class: "nbx-scroll" }, table));
    const note = model.get("note");
    if (note) el.append(h("div", { class: "nbx-note" }, note));
  }
  for (const name of ["rows", "columns", "progress", "range_text", "selected", "note", "query"]) model.on(`change:${name}`, draw);
  draw();
}
export default { render };
"""

_CSS = """
.nbflow-explorer { font-family: var(--jp-ui-font-family, sans-serif); font-size: 12px; color: var(--jp-ui-font-color1, #222); }
.nbx-bar-row { display: flex; align-items: center; gap: 8px; margin: 2px 0; }
.nbx-label { min-width: 90px; font-weight: 600; }
.nbx-bar { display: flex; width: 260px; height: 10px; border-radius: 3px; overflow: hidden; background: var(--jp-layout-color2, #eee); }
.nbx-count { color: var(--jp-ui-font-color2, #666); white-space: nowrap; }
.nbx-controls { display: flex; align-items: center; gap: 6px; margin: 6px 0; flex-wrap: wrap; }
.nbx-scroll { max-height: 460px; overflow: auto; border: 1px solid var(--jp-border-color2, #ddd); }
.nbx-table { border-collapse: collapse; width: 100%; }
.nbx-table th { position: sticky; top: 0; background: var(--jp-layout-color2, #f3f3f3); text-align: left; padding: 3px 6px; }
.nbx-table td { padding: 3px 6px; border-top: 1px solid var(--jp-border-color2, #eee); max-width: 320px;
  overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.nbx-row { cursor: pointer; }
.nbx-row:hover { background: var(--jp-layout-color2, #f5f5f5); }
.nbx-selected { outline: 2px solid var(--jp-brand-color1, #1971c2); }
.nbx-note { color: var(--jp-ui-font-color2, #666); margin-top: 4px; }
"""


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
    ) -> None:
        self.table = ExplorerTable(**static)
        self.detail = widgets.Output(layout=widgets.Layout(width="50%", min_width="360px"))
        self.table.layout.width = "50%"  # (its own Layout: a new one would leave that one's comm open)
        super().__init__([self.table, self.detail])
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
