// The pages of `nbflow view` and `nbflow report`, built from components.js. `NBX_API` is the data source:
// the viewer's server (paged queries, see nbflow/_view/server.py) or a report's inline data (report.js).
// Routes (in the URL's #): #/ experiments · #/e/<id> one experiment · #/c/<a>/<b> compare two experiments ·
// #/v/<id>/<variant a>/<variant b> compare two variants · #/r/<id>/<row> one row.

const NBX_APP = document.getElementById("nbx-app");
let nbxTimer = null;

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
function nbxFail(err) {
  NBX_APP.replaceChildren(nbxNav(), h("div", { class: "nbx-err", role: "alert" }, String(err && err.message ? err.message : err)));
}

async function nbxShow() {
  if (nbxTimer) { clearInterval(nbxTimer); nbxTimer = null; }
  const [page, ...args] = nbxRoute();
  try {
    if (page === "e") await nbxExperiment(args[0]);
    else if (page === "c") await nbxCompare(args[0], args[1]);
    else if (page === "v") await nbxCompare(args[0], null, [args[1], args[2]]);
    else if (page === "r") await nbxRow(args[0], Number(args[1]));
    else await nbxExperiments();
  } catch (err) { nbxFail(err); }
}

// While a store is being written, pages re-read it (the server says when it changed).
function nbxWatch(redraw) {
  if (!NBX_API.version) return;
  let last = null;
  nbxTimer = setInterval(async () => {
    try {
      const v = JSON.stringify(await NBX_API.version());
      if (last !== null && v !== last) await redraw();
      last = v;
    } catch (e) { /* the server stopped: leave the page as it is */ }
  }, 1500);
}

// --- the experiments list ----------------------------------------------------------------------------
const NBX_LIST = { sort: "started", desc: true, filter: "", picked: [] };
async function nbxExperiments() {
  const data = await NBX_API.experiments();
  document.title = "nbflow — experiments";
  const cols = ["name", "flow", "store", "started", "rows", "succeeded", "failed", "paused", "cost", "scores", "notes"];
  const draw = () => {
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
    NBX_APP.replaceChildren(
      h("h1", {}, "Experiments"),
      h("div", { class: "nbx-controls" },
        h("label", {}, "filter ", h("input", { type: "search", class: "nbx-filter", value: NBX_LIST.filter, oninput: (ev) => { NBX_LIST.filter = ev.target.value; draw(); document.querySelector(".nbx-filter").focus(); } })),
        h("button", { class: "nbx-btn nbx-compare-go", disabled: !(a && b) || null, onclick: () => nbxGo("c", a, b) },
          a && b ? "compare the two picked" : "pick two experiments to compare"),
        h("span", { class: "nbx-note" }, `${list.length} of ${data.experiments.length} experiments · ${data.stores.join(", ")}`)),
      h("div", { class: "nbx-scroll" }, table));
  };
  draw();
  nbxWatch(async () => { Object.assign(data, await NBX_API.experiments()); draw(); });
}

// --- one experiment ----------------------------------------------------------------------------------
async function nbxExperiment(id) {
  const query = Object.fromEntries(new URLSearchParams(sessionStorage.getItem(`nbx-q-${id}`) || ""));
  let exp = await NBX_API.experiment(id, query);
  document.title = `nbflow — ${exp.name}`;
  const controls = () => {
    const q = exp.page.query;
    const set = (change) => { Object.assign(query, change, { page: change.page ?? 0 }); sessionStorage.setItem(`nbx-q-${id}`, new URLSearchParams(query).toString()); reload(); };
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
    const finished = exp.progress.reduce((n, p) => n + Object.entries(p.counts).filter(([s]) => s !== "pending" && s !== "running").reduce((m, [, c]) => m + c, 0), 0);
    const variantCompare = exp.variants.length >= 2 && exp.grid.length === 1 ? h("div", { class: "nbx-controls" }, "compare variants ",
      h("select", { class: "nbx-va", "aria-label": "baseline variant" }, ...exp.variants.map((v, i) => h("option", { value: v, selected: i === 0 || null }, v))), " → ",
      h("select", { class: "nbx-vb", "aria-label": "variant to compare" }, ...exp.variants.map((v, i) => h("option", { value: v, selected: i === 1 || null }, v))),
      h("button", { class: "nbx-btn nbx-variant-go", onclick: () => nbxGo("v", id, document.querySelector(".nbx-va").value, document.querySelector(".nbx-vb").value) }, "compare")) : "";
    NBX_APP.replaceChildren(
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
  const reload = async () => { exp = await NBX_API.experiment(id, query); draw(); };
  draw();
  nbxWatch(reload);
}

// --- a comparison ------------------------------------------------------------------------------------
async function nbxCompare(a, b, variants) {
  const cmp = await NBX_API.compare(a, b, variants);
  const [la, lb] = cmp.labels;
  document.title = `nbflow — ${lb} vs ${la}`;
  const counts = Object.entries(cmp.counts).filter(([, n]) => n).map(([c, n]) => h("span", { class: `nbx-change nbx-c-${c}` }, `${nbxChange(c)}: ${n}`));
  NBX_APP.replaceChildren(
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
async function nbxRow(id, index) {
  const row = await NBX_API.row(id, index);
  document.title = `nbflow — ${row.name} row ${index}`;
  NBX_APP.replaceChildren(nbxNav(nbxLink(row.name, ["e", id]), h("span", {}, `row ${index}`)), nbxRowDetail(row));
}

window.addEventListener("hashchange", nbxShow);
if (!location.hash && typeof NBX_DATA !== "undefined" && NBX_DATA.start) location.hash = NBX_DATA.start;
else nbxShow();
