"""``nbflow report`` / ``nf.report``: one experiment (or a comparison) as ONE self-contained HTML file.

No network and no server: the components (``nbflow/_front``), the data and the scripts are inline, and the
page's Content-Security-Policy allows no request at all. Sized for a PR or an email: the first
``REPORT_ROWS`` rows are in the file (the page says so when there are more) and the details (graph, node
outputs, errors, tracebacks, attempts) of the first ``REPORT_DETAILS`` of them, failed and paused rows
first; a report of 1,000 rows is under 5 MB (``benchmarks/viewer_pages.py`` measures it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import BatchError, StoreError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["REPORT_DETAILS", "REPORT_ROWS", "report", "report_store"]

REPORT_ROWS = 5_000
REPORT_DETAILS = 1_000


def _order(statuses: list[str]) -> list[int]:
    """Row positions whose details go in first: failed, then paused, then the others (in row order)."""
    rank = {"failed": 0, "paused": 1}
    return sorted(range(len(statuses)), key=lambda p: (rank.get(statuses[p], 2), p))


def _write(path: str | os.PathLike[str], title: str, data: dict[str, Any]) -> Path:
    from nbflow._front import asset, page

    out = Path(path)
    if out.suffix.lower() not in (".html", ".htm"):
        raise BatchError(f"report: write to a .html file, got {os.fspath(path)!r}")
    try:
        out.write_text(page(title, asset("report.js"), data), encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"report: cannot write {os.fspath(path)!r}: {exc}") from None
    return out


def _frame_pages(frame: pd.DataFrame, eid: str, details: Any) -> tuple[dict[str, Any], dict[int, Any]]:
    from nbflow._view.data import FrameSource

    source = FrameSource(frame)
    exp = source.experiment(REPORT_ROWS)
    exp["id"] = eid
    for row in exp["page"]["rows"]:
        row["__run"] = isinstance(frame["run_id"].iloc[row["__index"]], str)
    rows: dict[Any, Any] = {}
    statuses = frame["status"].astype(str).tolist()[:REPORT_ROWS]
    for p in _order(statuses)[:REPORT_DETAILS]:
        found = details(source, p)
        if found is not None:
            found["experiment"] = eid
            graph = found.pop("graph", None)  # the same picture for every row: once per experiment (report.js)
            if graph is not None:
                rows.setdefault("graph", graph)
            rows[p] = found
    for row in exp["page"]["rows"]:  # marked before a click: a row whose details (or run record) are not in the file
        found = rows.get(row["__index"])
        row["__detail"] = found is not None
        row["__kept"] = bool(found and found.get("kept"))
    return exp, rows


def _list_entry(exp: dict[str, Any]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for p in exp["progress"]:
        for s, n in p["counts"].items():
            counts[s] = counts.get(s, 0) + n
    return {
        "id": exp["id"],
        "store": exp["store"],
        "name": exp["name"],
        "flow": exp["flow"],
        "started": exp["started"],
        "finished": exp["finished"],
        "running": exp["running"],
        "rows": exp["total"],
        "succeeded": counts.get("succeeded", 0),
        "failed": counts.get("failed", 0),
        "paused": counts.get("paused", 0),
        "cost": None,
        "notes": exp["notes"],
        "scores": "",
        "stopped": exp["stopped"],
    }


def report(what: Any, path: str | os.PathLike[str], *, vs: Any = None) -> Path:
    """Write ``what`` (a batch frame: ``flow.batch``'s result or ``nf.load_batch``'s) as one HTML file at
    ``path``: its per-variant summary with intervals, its rows (filter, search, sort, open a row's graph and
    node details), and with ``vs=`` (another frame) the comparison of the two (``nf.compare``). Returns the path.
    No secret reaches the file (the frame's secret values are masked, as in ``nf.explore``)."""
    import pandas as pd

    if not isinstance(what, pd.DataFrame):
        raise BatchError(
            "nf.report(df, path) takes a batch frame (flow.batch's result or nf.load_batch(db, name)); "
            "for a store use `nbflow report RUNS.db EXPERIMENT -o report.html`"
        )
    from nbflow._view.data import compare_frames

    exp, rows = _frame_pages(what, "0", lambda source, p: source.row(p))
    data: dict[str, Any] = {
        "experiments": {"stores": [], "experiments": [_list_entry(exp)]},
        "experiment": {"0": exp},
        "rows": {"0": rows},
        "compare": {},
        "row_limit": REPORT_DETAILS,
    }
    start = "#/e/0"
    if vs is not None:
        other, other_rows = _frame_pages(vs, "1", lambda source, p: source.row(p))
        data["experiment"]["1"] = other
        data["rows"]["1"] = other_rows
        data["experiments"]["experiments"].append(_list_entry(other))
        data["compare"]["c/0/1"] = compare_frames(what, vs)  # (its values redacted, ``compare_frames``)
        start = "#/c/0/1"
    _add_variant_compares(data, "0", what)
    return _write(path, f"nbflow report — {exp['name']}", {**data, "start": start})


def _add_variant_compares(data: dict[str, Any], eid: str, frame: pd.DataFrame) -> None:
    """Every pair of variants (baseline first) of a one-key grid, compared: the report's 'compare variants'."""
    from nbflow._view.data import FrameSource, compare_frames

    grid = [k for k in frame.attrs.get("grid") or [] if k in frame.columns]
    exp = data["experiment"][eid]
    if len(grid) != 1 or len(exp["variants"]) < 2 or len(exp["variants"]) > 6:
        return
    redact = FrameSource(frame).redact
    names = list(exp["variants"])
    values = {redact(str(v)): v for v in frame[grid[0]].unique()}
    for a in names:
        for b in names:
            if a != b and a in values and b in values:
                try:
                    data["compare"][f"v/{eid}/{a}/{b}"] = compare_frames(frame, frame, (values[a], values[b], grid[0]))
                except BatchError:
                    pass  # (no score to compare on: the page says the report holds no such comparison)


def report_store(
    paths: list[str | os.PathLike[str]], experiment: str, path: str | os.PathLike[str], *, vs: str | None = None
) -> Path:
    """``nbflow report``: experiment ``experiment`` (and ``vs``) of the store(s), read-only, as one HTML file."""
    from nbflow._view.data import StoreSource, _load

    source = StoreSource(paths)
    try:
        eids = [_find_eid(source, experiment)] + ([_find_eid(source, vs)] if vs is not None else [])
        frames = []
        data: dict[str, Any] = {
            "experiments": {"stores": source.labels, "experiments": []},
            "experiment": {},
            "rows": {},
            "compare": {},
            "row_limit": REPORT_DETAILS,
        }
        listed = {e["id"]: e for e in source.experiments()["experiments"]}
        for eid in eids:
            store, batch_id, _ = source._find(eid)
            frame = _load(store, batch_id)
            frames.append(frame)
            exp, rows = _frame_pages(
                frame, eid, lambda _s, p, eid=eid, frame=frame: source.row(eid, int(frame.index[p]))
            )
            stored = source.experiment(eid)
            for key in ("store", "started", "finished", "running", "progress", "summary", "summary_note", "variants"):
                exp[key] = stored[key]
            data["experiment"][eid] = exp
            data["rows"][eid] = rows
            data["experiments"]["experiments"].append(listed[eid])
        start = _route("e", eids[0])
        if vs is not None:
            from nbflow._view.data import compare_frames

            data["compare"][f"c/{eids[0]}/{eids[1]}"] = compare_frames(frames[0], frames[1])
            start = _route("c", *eids)
        _add_variant_compares(data, eids[0], frames[0])
        name = data["experiment"][eids[0]]["name"]
        return _write(path, f"nbflow report — {name}" + (f" vs {vs}" if vs else ""), {**data, "start": start})
    finally:
        source.close()


def _route(*parts: str) -> str:
    """A page's address in the report (``#/e/<id>``), each part encoded as the page decodes it."""
    from urllib.parse import quote

    return "#/" + "/".join(quote(p, safe="") for p in parts)


def _find_eid(source: Any, name: str) -> str:
    """The id of experiment ``name`` (or batch id) in the stores; StoreError naming the ones there are."""
    listed = source.experiments()["experiments"]
    found = [e["id"] for e in listed if e["name"] == name or e["id"].partition(":")[2] == name]
    if len(found) == 1:
        return str(found[0])
    names = ", ".join(repr(e["name"]) for e in listed) or "(none)"
    if not found:
        raise StoreError(f"no experiment {name!r} in {', '.join(source.labels)}; experiments: {names}")
    raise StoreError(f"{len(found)} experiments are named {name!r} (in several stores): give one store")
