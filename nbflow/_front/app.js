// The pages of `nbflow view` and `nbflow report`, built from components.js. `NBX_API` is the data source:
// the viewer's server (paged queries, see nbflow/_view/server.py) or a report's inline data (report.js).
// Routes (in the URL's #): #/ experiments · #/e/<id> one experiment · #/c/<a>/<b> compare two experiments ·
// #/v/<id>/<variant a>/<variant b> compare two variants · #/r/<id>/<row> one row.

const NBX_APP = document.getElementById("nbx-app");
const NBX_POLL = 1500;  // ms between two looks at the server's version (api/version) while a page is shown
let nbxTimer = null;
let nbxShown = 0;  // the page shown (counted): what a page left since loads or looks at draws nothing
let nbxDrawing = false;  // the page is being replaced (Chromium fires `change` on a focused field it removes)

function nbxRoute() {
  const parts = (location.hash.replace(/^#\/?/, "") || "").split("/").map(decodeURIComponent);
  return parts[0] ? parts : [""];
}
function nbxGo(...parts) { location.hash = "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/"); }
function nbxLink(text, parts, cls = "") {
  return h("a", { href: "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/"), class: cls }, text);
}
function nbxNav(...crumbs) {
  return h("nav", { class: "nbx-nav", "aria-label": "breadcrumb" }, nbxLink("experiments", [""]), ...crumbs.flatMap((c) => [" › ", c]));
}
function nbxMessage(err) { return String(err && err.message ? err.message : err); }
// What is not written yet (err.waiting: the viewer's server says so) is a status the page keeps checking; any
// other error is an alert.
function nbxFail(err) {
  document.title = "nbflow";
  nbxRender(nbxNav(), err && err.waiting
    ? h("div", { class: "nbx-note nbx-waiting", role: "status" }, `⧗ ${nbxMessage(err)}: this page shows it once the batch writes it`)
    : h("div", { class: "nbx-err", role: "alert" }, nbxMessage(err)));
}

// An element's address in the page, to find it again once the page is drawn anew: its tag, the classes that are
// not a state, the attributes that tell it from its siblings, and its place among the elements matching those.
const NBX_STATE_CLASS = /^nbx-(s-|c-|seg-)|^nbx-(succeeded|failed|paused|cancelled|running|pending|skipped|selected|noopen|worse|has-failed)$/;
function nbxAddress(el) {
  let sel = el.tagName.toLowerCase();
  for (const c of el.classList) if (!NBX_STATE_CLASS.test(c)) sel += "." + CSS.escape(c);
  for (const a of ["data-index", "data-id", "data-node", "href", "aria-label", "type"]) {
    if (el.hasAttribute(a)) sel += `[${a}="${CSS.escape(el.getAttribute(a))}"]`;
  }
  return [sel, [...NBX_APP.querySelectorAll(sel)].indexOf(el)];
}
// Draw the page anew keeping what the reader was at: the focused control (and the text being typed in it, not
// yet applied) and where each scrolled table was.
function nbxRender(...kids) {
  const was = document.activeElement;
  const focus = was && was !== NBX_APP && NBX_APP.contains(was) ? nbxAddress(was) : null;
  const typing = focus && was.tagName === "INPUT" && ["search", "text", "number"].includes(was.type)
    ? [was.value, was.selectionStart, was.selectionEnd] : null;
  const scrolled = [...NBX_APP.querySelectorAll(".nbx-scroll")].map((el) => [el.scrollTop, el.scrollLeft]);
  nbxDrawing = true;
  try { NBX_APP.replaceChildren(...kids); } finally { nbxDrawing = false; }
  NBX_APP.querySelectorAll(".nbx-scroll").forEach((el, i) => { if (scrolled[i]) [el.scrollTop, el.scrollLeft] = scrolled[i]; });
  if (!focus) return;
  const found = NBX_APP.querySelectorAll(focus[0]);
  const el = found[Math.max(0, focus[1])];
  if (!el) return;
  if (typing && el.value !== typing[0]) el.value = typing[0];
  el.focus({ preventScroll: true });
  if (typing && typing[1] !== null) try { el.setSelectionRange(typing[1], typing[2]); } catch (e) { /* (a number field) */ }
}

// A page is {load(), draw(data), follow}: shown once loaded, and while the viewer's store is written (its
// version changes) loaded again and drawn again when what it shows changed. A page showing an error or a
// "not written yet" keeps looking too: it shows the experiment, the row, the list once a batch writes them.
async function nbxShow() {
  if (nbxTimer) { clearTimeout(nbxTimer); nbxTimer = null; }
  const shown = ++nbxShown;
  const [page, ...args] = nbxRoute();
  let view;
  if (page === "e") view = nbxExperiment(args[0]);
  else if (page === "c") view = nbxCompare(args[0], args[1]);
  else if (page === "v") view = nbxCompare(args[0], null, [args[1], args[2]]);
  else if (page === "r") view = nbxRow(args[0], Number(args[1]));
  else view = nbxExperiments();
  await nbxLive(shown, view);
}

async function nbxLive(shown, view) {
  const current = () => shown === nbxShown;
  const look = async () => { try { return JSON.stringify(await NBX_API.version()); } catch (e) { return null; } };
  let drawn = null;  // what the page shows (its data's or its error's text): drawn again only when it changes
  let failed = false;
  let asked = 0;  // loads asked for: only the latest one draws (a reader's change may overtake a refresh)
  view.refresh = async () => {
    const mine = ++asked;
    let data, err = null;
    try { data = await view.load(); } catch (e) { err = e; }
    if (!current() || mine !== asked) return;
    try {
      const text = err ? `error ${Boolean(err.waiting)} ${nbxMessage(err)}` : JSON.stringify(data);
      failed = Boolean(err);
      if (text === drawn) return;
      drawn = text;
      if (err) nbxFail(err); else view.draw(data);
    } catch (e) { drawn = null; failed = true; nbxFail(e); }
  };
  const watch = Boolean(NBX_API.version);
  let version = watch ? await look() : null;  // read before the data: a write in between is not missed
  await view.refresh();
  if (!watch) return;
  const tick = async () => {
    nbxTimer = null;
    if (!current()) return;
    if (failed || view.follow) {
      const v = await look();
      if (!current()) return;
      if (v !== null && v !== version) { version = v; await view.refresh(); }
    }
    if (current()) nbxTimer = setTimeout(tick, NBX_POLL);
  };
  if (current()) nbxTimer = setTimeout(tick, NBX_POLL);
}

// --- the experiments list ----------------------------------------------------------------------------
const NBX_LIST = { sort: "started", desc: true, filter: "", picked: [] };
function nbxExperiments() {
  let data = null;
  const cols = ["name", "flow", "store", "started", "rows", "succeeded", "failed", "paused", "cost", "scores", "notes"];
  const draw = () => {
    document.title = "nbflow — experiments";
    const f = NBX_LIST.filter.toLowerCase();
    let list = data.experiments.filter((e) => !f || cols.some((c) => String(e[c] ?? "").toLowerCase().includes(f)));
    list = list.slice().sort((a, b) => {
      const x = a[NBX_LIST.sort], y = b[NBX_LIST.sort];
      const r = typeof x === "number" && typeof y === "number" ? x - y : String(x ?? "").localeCompare(String(y ?? ""));
      return NBX_LIST.desc ? -r : r;
    });
    const table = h("table", { class: "nbx-table nbx-experiments" });
    table.append(h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "compare"), ...cols.map((c) => h("th", { scope: "col", "aria-sort": NBX_LIST.sort === c ? (NBX_LIST.desc ? "descending" : "ascending") : null },
      h("button", { class: "nbx-sort", onclick: () => { NBX_LIST.desc = NBX_LIST.sort === c ? !NBX_LIST.desc : false; NBX_LIST.sort = c; draw(); } },
        c + (NBX_LIST.sort === c ? (NBX_LIST.desc ? " ▼" : " ▲") : "")))))));
    const body = h("tbody");
    for (const e of list) {
      const picked = NBX_LIST.picked.includes(e.id);
      body.append(h("tr", { class: "nbx-row" + (e.failed ? " nbx-has-failed" : ""), "data-id": e.id },
        h("td", {}, h("input", { type: "checkbox", "aria-label": `pick ${e.name} to compare`, checked: picked || null, onchange: (ev) => {
          NBX_LIST.picked = ev.target.checked ? [...NBX_LIST.picked, e.id].slice(-2) : NBX_LIST.picked.filter((x) => x !== e.id); draw();
        } })),
        h("td", {}, nbxLink(e.name, ["e", e.id], "nbx-open"), e.running ? h("span", { class: "nbx-state nbx-s-running" }, " ▶ running") : ""),
        h("td", {}, e.flow), h("td", {}, e.store), h("td", {}, nbxWhen(e.started)), h("td", {}, nbxNumber(e.rows)),
        h("td", {}, e.succeeded ? nbxState("succeeded") : "", " ", nbxNumber(e.succeeded)),
        h("td", {}, e.failed ? nbxState("failed") : "", " ", nbxNumber(e.failed)),
        h("td", {}, e.paused ? nbxState("paused") : "", " ", nbxNumber(e.paused)),
        h("td", {}, e.cost == null ? "" : nbxNumber(e.cost)), h("td", {}, e.scores), h("td", {}, e.notes)));
    }
    table.append(body);
    // the older experiment is the baseline: "newer vs older"
    const started = (id) => (data.experiments.find((e) => e.id === id) || {}).started || 0;
    const [a, b] = NBX_LIST.picked.slice().sort((x, y) => started(x) - started(y));
    // stores not written yet, or none holding an experiment yet: said (the list shows them once written)
    const waiting = (data.waiting || []).map((why) => h("div", { class: "nbx-note nbx-waiting", role: "status" }, `⧗ ${why}: this list shows its experiments once a batch writes them`));
    if (!waiting.length && !data.experiments.length) waiting.push(h("div", { class: "nbx-note nbx-waiting", role: "status" }, "⧗ no experiment yet: this list shows each one once a batch records it"));
    nbxRender(
      h("h1", {}, "Experiments"),
      h("div", { class: "nbx-controls" },
        h("label", {}, "filter ", h("input", { type: "search", class: "nbx-filter", value: NBX_LIST.filter, oninput: (ev) => { NBX_LIST.filter = ev.target.value; draw(); } })),
        h("button", { class: "nbx-btn nbx-compare-go", disabled: !(a && b) || null, onclick: () => nbxGo("c", a, b) },
          a && b ? "compare the two picked" : "pick two experiments to compare"),
        h("span", { class: "nbx-note" }, `${list.length} of ${data.experiments.length} experiments · ${data.stores.join(", ")}`)),
      ...waiting,
      h("div", { class: "nbx-scroll" }, table));
  };
  return { follow: true, load: () => NBX_API.experiments(), draw: (loaded) => { data = loaded; draw(); } };
}

// --- one experiment ----------------------------------------------------------------------------------
function nbxExperiment(id) {
  const query = Object.fromEntries(new URLSearchParams(sessionStorage.getItem(`nbx-q-${id}`) || ""));
  let exp = null;
  const picked = {};  // the variants picked to compare (kept when the page is drawn anew)
  const view = { follow: true, load: () => NBX_API.experiment(id, query), draw: (loaded) => { exp = loaded; draw(); } };
  const controls = () => {
    const q = exp.page.query;
    const set = (change) => { if (nbxDrawing) return; Object.assign(query, change, { page: change.page ?? 0 }); sessionStorage.setItem(`nbx-q-${id}`, new URLSearchParams(query).toString()); view.refresh(); };
    const select = (name, options, value, label) => h("label", {}, label + " ", h("select", { class: `nbx-${name}`, onchange: (e) => set({ [name]: e.target.value }) },
      ...options.map(([v, text]) => h("option", { value: v, selected: String(v) === String(value || "") || null }, text))));
    const statuses = ["succeeded", "failed", "paused", "cancelled"];
    const number = (name, label) => h("label", {}, label + " ", h("input", { class: `nbx-${name}`, type: "number", step: "any", size: 6, value: q[name] || "", onchange: (e) => set({ [name]: e.target.value }) }));
    const page = exp.page;
    return h("div", { class: "nbx-controls" },
      select("status", [["", "all"], ...statuses.map((s) => [s, `${NBX_SYMBOLS[s]} ${s}`])], q.status, "status"),
      exp.variants.length ? select("variant", [["", "all"], ...exp.variants.map((v) => [v, v])], q.variant, "variant") : "",
      select("score", [["", "(score)"], ...exp.scores.map((s) => [s, s])], q.score, "score"), number("score_min", "≥"), number("score_max", "≤"),
      h("label", {}, "search ", h("input", { type: "search", class: "nbx-search", value: q.search || "", onchange: (e) => set({ search: e.target.value }) })),
      select("sort", [["", "row order"], ...page.columns.flatMap((c) => [[`${c} desc`, `${c} ↓`], [`${c} asc`, `${c} ↑`]])], q.sort, "sort"),
      h("button", { class: "nbx-btn nbx-prev", "aria-label": "previous page", disabled: page.page <= 0 || null, onclick: () => set({ page: page.page - 1 }) }, "‹"),
      h("span", { class: "nbx-range" }, page.total ? `${page.page * page.limit + 1}–${page.page * page.limit + page.rows.length} of ${nbxNumber(page.total)}` : "no rows match"),
      h("button", { class: "nbx-btn nbx-next", "aria-label": "next page", disabled: page.page >= page.pages - 1 || null, onclick: () => set({ page: page.page + 1 }) }, "›"));
  };
  const draw = () => {
    document.title = `nbflow — ${exp.name}`;
    const finished = exp.progress.reduce((n, p) => n + Object.entries(p.counts).filter(([s]) => s !== "pending" && s !== "running").reduce((m, [, c]) => m + c, 0), 0);
    const variantCompare = exp.variants.length >= 2 && exp.grid.length === 1 ? h("div", { class: "nbx-controls" }, "compare variants ",
      h("select", { class: "nbx-va", "aria-label": "baseline variant", onchange: (e) => { picked.va = e.target.value; } },
        ...exp.variants.map((v, i) => h("option", { value: v, selected: (picked.va ? v === picked.va : i === 0) || null }, v))), " → ",
      h("select", { class: "nbx-vb", "aria-label": "variant to compare", onchange: (e) => { picked.vb = e.target.value; } },
        ...exp.variants.map((v, i) => h("option", { value: v, selected: (picked.vb ? v === picked.vb : i === 1) || null }, v))),
      h("button", { class: "nbx-btn nbx-variant-go", onclick: () => nbxGo("v", id, document.querySelector(".nbx-va").value, document.querySelector(".nbx-vb").value) }, "compare")) : "";
    nbxRender(
      nbxNav(h("span", {}, exp.name)),
      h("h1", {}, exp.name, " ", exp.running ? h("span", { class: "nbx-state nbx-s-running" }, `▶ running: ${nbxNumber(finished)} of ${nbxNumber(exp.total)} rows finished`) : ""),
      h("div", { class: "nbx-note" }, `flow ${exp.flow}${exp.store ? " · " + exp.store : ""}${exp.started ? " · started " + nbxWhen(exp.started) : ""}${exp.stopped ? " · stopped: " + exp.stopped : ""}`),
      exp.notes ? h("p", { class: "nbx-notes" }, exp.notes) : "",
      nbxBars(exp.progress),
      h("h2", {}, "Summary per variant"), nbxSummary(exp.summary), exp.summary_note ? h("div", { class: "nbx-note" }, exp.summary_note) : "",
      variantCompare,
      h("h2", {}, "Rows"), controls(),
      exp.page.capped ? h("div", { class: "nbx-note nbx-capped" }, `this report holds the first ${nbxNumber(exp.page.rows.length)} of ${nbxNumber(exp.total)} rows (nbflow view shows them all)`) : "",
      nbxTable(exp.page.columns, exp.page.rows, {
        open: (row) => nbxGo("r", id, row.__index),
        openable: (row) => row.__run === false ? "this row never started: nothing to open"
          : row.__detail === false ? "this file holds no details of this row (past the report's limit)" : true,
        marked: (row) => row.__kept === false ? "its run record was not kept: only its values open" : null,
      }));
  };
  return view;
}

// --- a comparison ------------------------------------------------------------------------------------
// (Loaded once: a comparison reads both experiments whole, too much to read again at each write of a batch.)
function nbxCompare(a, b, variants) {
  return { follow: false, load: () => NBX_API.compare(a, b, variants), draw: (cmp) => nbxComparison(a, b, variants, cmp) };
}
function nbxComparison(a, b, variants, cmp) {
  const [la, lb] = cmp.labels;
  document.title = `nbflow — ${lb} vs ${la}`;
  const counts = Object.entries(cmp.counts).filter(([, n]) => n).map(([c, n]) => h("span", { class: `nbx-change nbx-c-${c}` }, `${nbxChange(c)}: ${n}`));
  nbxRender(
    nbxNav(h("span", {}, `${lb} vs ${la}`)),
    h("h1", {}, `${lb} vs ${la}`),
    h("p", { class: "nbx-verdict", role: "status" }, cmp.verdict || cmp.summary),
    cmp.verdict ? h("p", { class: "nbx-note" }, cmp.summary) : "",
    h("div", { class: "nbx-controls" }, ...counts.flatMap((c) => [c, " "])),
    cmp.stats && cmp.stats.columns && cmp.stats.columns.length ? h("div", { class: "nbx-stats" }, h("h2", {}, "Paired statistics"), nbxSummary(cmp.stats)) : "",
    h("h2", {}, "Cases, regressions first"),
    cmp.total > cmp.rows.length ? h("div", { class: "nbx-note" }, `the first ${cmp.rows.length} of ${cmp.total} cases`) : "",
    nbxTable(cmp.columns, cmp.rows.map((r) => ({ ...r, __worse: ["newly_failing", "regressed"].includes(r.change) })), {
      key: (r) => `${r.__a}/${r.__b}`,
      open: (row) => row.__b != null ? nbxGo("r", variants ? a : b, row.__b) : nbxGo("r", a, row.__a),
      openable: (row) => row.__a == null && row.__b == null ? "no row on either side" : true,
    }));
}

// --- one row -----------------------------------------------------------------------------------------
// (Followed: a paused row answered meanwhile, or a row not finished yet, shows as it is written.)
function nbxRow(id, index) {
  return { follow: true, load: () => NBX_API.row(id, index), draw: (row) => {
    document.title = `nbflow — ${row.name} row ${index}`;
    nbxRender(nbxNav(nbxLink(row.name, ["e", id]), h("span", {}, `row ${index}`)), nbxRowDetail(row));
  } };
}

window.addEventListener("hashchange", nbxShow);
if (!location.hash && typeof NBX_DATA !== "undefined" && NBX_DATA.start) location.hash = NBX_DATA.start;
else nbxShow();
