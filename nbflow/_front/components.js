// nbflow's front-end components, written once (no build step, no network): the notebook explorer
// (anywidget), `nbflow view` (a local server) and `nbflow report` (one HTML file) put this text in their page.
// Every text goes into the page as text (textContent), never as HTML; the only markup taken as it is is
// the graph's SVG, which nbflow lays out itself and which is cleaned again here (`cleanSvg`).
// `NBX_LOOK` (state colours and symbols, from nbflow._show.draw) is defined before this text.

function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

const NBX_COLORS = NBX_LOOK.colors;   // state -> [fill, border]
const NBX_SYMBOLS = NBX_LOOK.symbols; // state -> symbol (told apart without colour too)
// NBX_LOOK.segments: state -> a bar segment's background (colour, and a pattern where colour alone would not do)
const NBX_ORDER = ["succeeded", "failed", "paused", "cancelled", "running", "pending"];

function nbxState(status) {
  const s = String(status || "");
  return h("span", { class: `nbx-state nbx-s-${s.replace(/[^a-z]/g, "")}` }, `${NBX_SYMBOLS[s] || "•"} ${s}`);
}

function nbxNumber(v, digits = 3) {
  if (v === null || v === undefined || v === "") return "";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a !== 0 && (a < 0.001 || a >= 1e6)) return v.toExponential(2);
  return String(Number(v.toPrecision(digits)));
}

function nbxWhen(seconds) {
  if (!seconds) return "";
  const d = new Date(seconds * 1000);
  return d.toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

// Per-variant bars: one segment per state (pattern + colour), counts in words with their symbols.
function nbxBars(progress) {
  const box = h("div", { class: "nbx-bars" });
  for (const p of progress || []) {
    const bar = h("div", { class: "nbx-bar", role: "img" });
    const parts = [];
    for (const status of [...NBX_ORDER, ...Object.keys(p.counts).filter((s) => !NBX_ORDER.includes(s))]) {
      const n = p.counts[status];
      if (!n) continue;
      parts.push(`${NBX_SYMBOLS[status] || ""} ${n} ${status}`);
      bar.append(h("span", { class: `nbx-seg nbx-seg-${status.replace(/[^a-z]/g, "")}`, style: `flex:${n};background:${NBX_LOOK.segments[status] || "#ced4da"}`, title: `${n} ${status}` }));
    }
    bar.setAttribute("aria-label", `${p.label}: ${parts.join(", ")}`);
    box.append(h("div", { class: "nbx-bar-row" }, h("span", { class: "nbx-label" }, p.label), bar,
      h("span", { class: "nbx-count" }, parts.join(", "))));
  }
  return box;
}

// A table of rows. opts: {open(row), selected, key(row), openable(row) -> true | reason string, cell(col, row),
// marked(row) -> a reason to mark the row (it still opens: to say why), extra(row) -> a last <td> or null, keyAttr: the attribute holding key(row), default data-index}
function nbxTable(columns, rows, opts = {}) {
  const table = h("table", { class: "nbx-table" });
  table.append(h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col", title: c }, c)))));
  const body = h("tbody");
  for (const row of rows) {
    const key = opts.key ? opts.key(row) : row.__index;
    const can = opts.openable ? opts.openable(row) : true;
    const open = () => { if (can === true && opts.open) opts.open(row); };
    const mark = can !== true ? can : opts.marked ? opts.marked(row) : null; // a reason: marked before a click
    const tr = h("tr", {
      class: `nbx-row nbx-${String(row.status || "").replace(/[^a-z]/g, "")}` + (key === opts.selected ? " nbx-selected" : "")
        + (mark ? " nbx-noopen" : "") + (row.__worse ? " nbx-worse" : ""),
      [opts.keyAttr || "data-index"]: key, tabindex: opts.open ? "0" : null, title: mark || null,
      onclick: open, onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } },
    });
    for (const c of columns) {
      const value = row[c];
      const custom = opts.cell ? opts.cell(c, row) : undefined;
      let content;
      if (custom !== undefined) content = custom;
      else if (c === "status" || /^status_/.test(c) || c.endsWith(": status")) content = value ? nbxState(value) : "";
      else if (c === "change" || c.endsWith(": change")) content = value ? h("span", { class: `nbx-change nbx-c-${value}` }, nbxChange(value)) : "";
      else content = typeof value === "number" ? nbxNumber(value, 4) : String(value ?? "");
      const why = row[`${c}.explanation`];  // a scorer's explanation (nf.Score), on hover over its score
      tr.append(h("td", { class: `nbx-col-${c.replace(/[^a-z0-9_]/gi, "_")}`, title: why ? String(why) : typeof content === "string" && content.length > 40 ? content : null }, content));
    }
    if (opts.extra) { const td = opts.extra(row); if (td) tr.append(td); }
    if (mark) tr.firstChild && tr.firstChild.prepend(h("span", { class: "nbx-lock", "aria-label": "cannot be opened" }, "⊝ "));
    body.append(tr);
  }
  table.append(body);
  return h("div", { class: "nbx-scroll", tabindex: "0", role: "region", "aria-label": "rows" }, table);
}

const NBX_CHANGE_SYMBOLS = { newly_failing: "✗", regressed: "▼", both_failed: "✗✗", only_a: "◧", only_b: "◨", fixed: "✓", improved: "▲", unchanged: "=" };
function nbxChange(change) { return `${NBX_CHANGE_SYMBOLS[change] || ""} ${String(change).replace(/_/g, " ")}`; }

// nf.summarize's table: every column it gives; X_mean with X_ci_low/X_ci_high shows as "m [low, high]".
function nbxSummary(summary) {
  const cols = summary.columns || [];
  if (!cols.length) return h("div", { class: "nbx-note" }, "no summary");
  const skip = new Set();
  for (const c of cols) {
    const m = c.match(/^(.*)_ci_(low|high)$/);
    if (m && cols.includes(`${m[1]}_mean`)) skip.add(c);
  }
  const shown = cols.filter((c) => !skip.has(c));
  const table = h("table", { class: "nbx-table nbx-summary" });
  table.append(h("thead", {}, h("tr", {}, ...shown.map((c) => h("th", { scope: "col" }, c.endsWith("_mean") && skip.has(c.replace(/_mean$/, "_ci_low")) ? `${c} [95% CI]` : c)))));
  const body = h("tbody");
  for (const values of summary.rows) {
    const rec = Object.fromEntries(cols.map((c, i) => [c, values[i]]));
    body.append(h("tr", {}, ...shown.map((c) => {
      const base = c.replace(/_mean$/, "");
      let text = nbxNumber(rec[c]);
      if (c.endsWith("_mean") && skip.has(`${base}_ci_low`)) text += ` [${nbxNumber(rec[`${base}_ci_low`])}, ${nbxNumber(rec[`${base}_ci_high`])}]`;
      return h("td", {}, text);
    })));
  }
  table.append(body);
  return h("div", { class: "nbx-scroll nbx-summary-box", tabindex: "0", role: "region", "aria-label": "summary" }, table);
}

// Remove from an SVG anything that could run or fetch (it is nbflow's own Graphviz output; this is a second guard).
function nbxCleanSvg(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const svg = doc.documentElement;
  if (!svg || svg.nodeName.toLowerCase() !== "svg") return null;
  for (const bad of svg.querySelectorAll("script, foreignObject, image, use, iframe, style")) bad.remove();
  for (const el of [svg, ...svg.querySelectorAll("*")]) {
    for (const attr of [...el.attributes]) {
      const n = attr.name.toLowerCase();
      if (n.startsWith("on") || ((n === "href" || n === "xlink:href") && !attr.value.startsWith("#"))) el.removeAttribute(attr.name);
    }
  }
  return document.importNode(svg, true);
}

// The flow's picture coloured by each node's state (class, and the symbol in the node's last line).
function nbxGraph(svgText, states, onPick) {
  const svg = svgText ? nbxCleanSvg(svgText) : null;
  if (!svg) return null;
  svg.removeAttribute("width"); svg.removeAttribute("height");
  svg.setAttribute("class", "nbx-graph-svg"); svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "the flow's graph: " + Object.entries(states).map(([n, s]) => `${n} ${s}`).join(", "));
  for (const g of svg.querySelectorAll("g.nbflow-node")) {
    const name = g.id.replace(/^node-/, "");
    const st = states[name] || "pending";
    g.setAttribute("class", `node nbflow-node nbflow-${st}`);
    const texts = g.querySelectorAll("text");
    if (texts.length) texts[texts.length - 1].textContent = `${NBX_SYMBOLS[st] || ""} ${st}`;
    g.setAttribute("tabindex", "0");
    g.addEventListener("click", () => onPick && onPick(name));
    g.addEventListener("keydown", (e) => { if (e.key === "Enter") onPick && onPick(name); });
  }
  // a router's edge to a branch: taken (its node ran) solid, not taken (its node skipped) dashed and grey
  const branches = [...svg.querySelectorAll("g.nbflow-branch")];
  for (const g of branches) {
    const st = states[g.id.replace(/^branch__/, "")];
    g.classList.toggle("nbflow-not-taken", st === "skipped");
    g.classList.toggle("nbflow-taken", ["running", "paused", "succeeded", "failed", "cancelled"].includes(st));
  }
  const legend = branches.length ? h("div", { class: "nbx-legend" }, h("span", { class: "nbx-taken" }, "━━ branch taken"), "  ╌╌ branch not taken (skipped)") : null;
  return h("div", { class: "nbx-graph" }, svg, legend);
}

function nbxPre(text, cls = "") { return h("pre", { class: `nbx-pre ${cls}` }, text); }

// One row: values, question (paused), graph, and every node's output / error / traceback / attempts.
function nbxRowDetail(row) {
  const box = h("div", { class: "nbx-detail" });
  box.append(h("h1", { class: "nbx-row-title" }, `${row.name ? row.name + " · " : ""}row ${row.index} `, nbxState(row.status)));
  for (const q of row.questions || []) {
    box.append(h("div", { class: "nbx-question", role: "note" }, h("b", {}, "‖ waiting for an answer: "), q.prompt,
      q.options && q.options.length ? h("div", {}, "options: ", q.options.join(" · ")) : "",
      q.data ? nbxPre(q.data) : "",
      h("div", { class: "nbx-note" }, "answer it from Python (flow.answer) or the CLI (nbflow answer): this page only reads")));
  }
  const vals = Object.entries(row.values || {});
  box.append(h("details", { class: "nbx-values", open: true }, h("summary", {}, "values"),
    h("table", { class: "nbx-table nbx-kv" }, h("tbody", {}, ...vals.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, nbxPre(v))))))));
  if (!row.kept) {
    box.append(h("div", { class: "nbx-note" }, "this row's run record was not kept (keep='none', or a batch without a store): only its values are shown"));
    return box;
  }
  const states = Object.fromEntries((row.nodes || []).map((n) => [n.name, n.status]));
  const nodes = h("div", { class: "nbx-nodes" });
  const pick = (name) => {
    const d = nodes.querySelector(`[data-node="${CSS.escape(name)}"]`);
    if (d) { d.open = true; d.scrollIntoView({ block: "nearest" }); d.querySelector("summary").focus(); }
  };
  const graph = nbxGraph(row.graph, states, pick);
  if (graph) box.append(graph);
  const first = (row.nodes || []).find((n) => n.status === "failed" || n.status === "paused");
  for (const n of row.nodes || []) {
    const d = h("details", { class: `nbx-node nbx-${n.status}`, "data-node": n.name, open: n === first || null },
      h("summary", {}, nbxState(n.status), " ", h("b", {}, n.name), n.seconds != null ? ` ${nbxNumber(n.seconds)} s` : "",
        n.attempts && n.attempts.length > 1 ? ` ×${n.attempts.length} attempts` : ""));
    if (n.output !== null && n.output !== undefined) d.append(h("div", {}, "output"), nbxPre(n.output));
    if (n.error) d.append(h("div", { class: "nbx-err" }, n.error));
    if (n.traceback) d.append(h("details", { class: "nbx-tb", open: true }, h("summary", {}, "traceback"), nbxPre(n.traceback, "nbx-err-pre")));
    if (n.skip_reason) d.append(h("div", { class: "nbx-note" }, n.skip_reason));
    if (n.attempts && n.attempts.length) {
      d.append(h("table", { class: "nbx-table nbx-attempts" },
        h("thead", {}, h("tr", {}, h("th", {}, "attempt"), h("th", {}, "seconds"), h("th", {}, "error"), h("th", {}, "then waited"))),
        h("tbody", {}, ...n.attempts.map((a) => h("tr", {}, h("td", {}, String(a.number)), h("td", {}, nbxNumber(a.seconds)),
          h("td", {}, a.error || ""), h("td", {}, a.delay != null ? `${nbxNumber(a.delay)} s` : ""))))));
      for (const a of n.attempts) for (const x of a.extra || []) d.append(nbxPre(x));
    }
    for (const [k, v] of Object.entries(n.more || {})) d.append(h("details", { class: `nbx-more nbx-more-${k.replace(/[^a-z0-9_]/gi, "_")}` }, h("summary", {}, k), nbxPre(v)));
    const ins = Object.entries(n.inputs || {});
    if (ins.length) d.append(h("details", {}, h("summary", {}, "inputs"), h("table", { class: "nbx-table nbx-kv" },
      h("tbody", {}, ...ins.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, nbxPre(v))))))));
    nodes.append(d);
  }
  box.append(nodes);
  return box;
}
