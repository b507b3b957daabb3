// The viewer's data source: the local server's JSON API (nbflow/_view/server.py), with the page's token.
const NBX_TOKEN = new URLSearchParams(location.search).get("token") || "";
async function nbxGet(path, params = {}) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const r = await fetch(`api/${path}?${q}`, { headers: { "X-Nbflow-Token": NBX_TOKEN }, cache: "no-store" });
  const body = await r.json().catch(() => ({ error: `${r.status} ${r.statusText}` }));
  if (!r.ok) {
    const err = new Error(body.error || `${r.status} ${r.statusText}`);
    err.waiting = Boolean(body.waiting);  // not written yet: the page keeps looking (app.js, nbxLive)
    throw err;
  }
  return body;
}
const NBX_API = {
  experiments: () => nbxGet("experiments"),
  experiment: (id, query) => nbxGet("experiment", { id, ...query }),
  compare: (a, b, variants) => nbxGet("compare", variants ? { a, va: variants[0], vb: variants[1] } : { a, b }),
  row: (id, index) => nbxGet("row", { id, index }),
  version: () => nbxGet("version"),
};
