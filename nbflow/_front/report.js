// A report's data source: everything is in the page (NBX_DATA); rows are filtered, sorted and paged here.
const NBX_DATA = JSON.parse(document.getElementById("nbx-data").textContent);

function nbxReportRows(exp, query) {
  const q = query || {};
  let rows = exp.page.rows;
  if (q.status) rows = rows.filter((r) => r.status === q.status);
  if (q.variant) rows = rows.filter((r) => r.__variant === q.variant);
  if (q.score) {
    const lo = q.score_min === undefined || q.score_min === "" ? null : Number(q.score_min);
    const hi = q.score_max === undefined || q.score_max === "" ? null : Number(q.score_max);
    rows = rows.filter((r) => { const v = Number(r[q.score]); return r[q.score] !== "" && (lo === null || v >= lo) && (hi === null || v <= hi); });
  }
  if (q.search) {
    const s = String(q.search).toLowerCase();
    rows = rows.filter((r) => exp.page.columns.some((c) => String(r[c] ?? "").toLowerCase().includes(s)));
  }
  if (q.sort) {
    const [col, dir] = [q.sort.slice(0, q.sort.lastIndexOf(" ")), q.sort.slice(q.sort.lastIndexOf(" ") + 1)];
    rows = rows.slice().sort((a, b) => {
      const x = a[col], y = b[col];
      if (x === "" || x == null) return 1; if (y === "" || y == null) return -1;
      const r = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return dir === "desc" ? -r : r;
    });
  }
  const limit = exp.page.limit, pages = Math.max(1, Math.ceil(rows.length / limit));
  const page = Math.min(Math.max(0, Number(q.page) || 0), pages - 1);
  return { ...exp.page, rows: rows.slice(page * limit, (page + 1) * limit), total: rows.length, page, pages,
    query: { status: q.status || "", variant: q.variant || "", score: q.score || "", score_min: q.score_min || "",
      score_max: q.score_max || "", search: q.search || "", sort: q.sort || "" } };
}

const NBX_API = {
  async experiments() { return NBX_DATA.experiments; },
  async experiment(id, query) {
    const exp = NBX_DATA.experiment[id];
    if (!exp) throw new Error(`this report does not hold experiment ${id}`);
    return { ...exp, page: nbxReportRows(exp, query) };
  },
  async compare(a, b, variants) {
    const key = variants ? `v/${a}/${variants[0]}/${variants[1]}` : `c/${a}/${b}`;
    const found = NBX_DATA.compare[key];
    if (!found) throw new Error("this report holds no such comparison (nbflow report --vs OTHER makes one; nbflow view compares any two)");
    return found;
  },
  async row(id, index) {
    const rows = NBX_DATA.rows[id] || {};
    const found = rows[index];
    if (found) return { ...found, graph: rows.graph || null };  // one picture per experiment, coloured per row
    if (!found) throw new Error(`this report holds no details of row ${index} (it keeps ${NBX_DATA.row_limit} rows' details; nbflow view shows every row)`);
    return found;
  },
  version: null,
};
