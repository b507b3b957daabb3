"""`nbflow view` on a big store: the first page of a 100,000-row experiment, and the size of a 1,000-row report.

A real batch (a 2-node flow, 3 variants, ``store=``, every run's record kept) writes ``--rows`` rows. Then, in the
same process and interleaved round by round:

- **paged** (what the viewer does): the experiment page through the server's HTTP API (``/api/experiment``:
  summary, per-variant progress, the first 50 rows; paged SQL queries), and the same page filtered to failures
  and sorted by score;
- **baseline** (hand-written, what a viewer without paging would do): the whole experiment read into a frame
  (``nf.load_batch(db, name, unpickle=False)``) and its first 50 rows taken.

- **list of a running batch**: the experiments list (``/api/experiments``) while the big batch is still being written
  (its end not recorded: the rows are counted by SQL, ``GROUP BY status``), against the hand-written baseline of
  counting its rows in Python (``BatchStore.stored_rows(unpickle=False)``, what the list did before).

Then ``nbflow report`` of the first 1,000 rows' experiment (its own 1,000-row batch) and the file's size.
Wall time, min and median of the rounds.

    python benchmarks/viewer_pages.py [--rows 100000] [--rounds 5]

Goals (issue 32): the first page of a 100,000-row experiment < 1 s; the list of a running 100,000-row batch < 1 s;
a report of 1,000 rows < 5 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nbflow as nf
from nbflow._store.batch_store import BatchStore
from nbflow._view.report import report_store
from nbflow._view.server import Viewer


def make_flow() -> nf.Flow:
    flow = nf.Flow("bench_view")

    @flow.node
    def answer(question: str, prompt: str) -> str:
        if question.endswith("7"):
            raise ValueError(f"refused: {question}")
        return f"{prompt}: {question} " + "words " * 10

    @flow.node
    def score(answer: str) -> float:
        return (len(answer) % 10) / 10

    return flow


def build(path: str, rows: int, name: str) -> float:
    flow = make_flow()
    cases = [{"question": f"q{i}"} for i in range(rows // 3)]
    t0 = time.perf_counter()
    flow.batch(cases, grid={"prompt": ["a", "b", "c"]}, store=path, experiment=name, progress=False, concurrency=64)
    return time.perf_counter() - t0


def mark_running(path: str, name: str, running: bool) -> str:
    """Forget the batch's recorded end (its counts and finish time), as while it is still being written; or, with
    ``running=False``, put it back (kept aside under ``_bench_end``)."""
    import sqlite3

    found = ""
    con = sqlite3.connect(path)
    with con:
        for batch_id, meta in con.execute("SELECT batch_id, meta FROM batches").fetchall():
            data = json.loads(meta)
            if data.get("experiment") != name:
                continue
            found = batch_id
            if running and "_bench_end" not in data:
                data["_bench_end"] = {k: data.pop(k) for k in ("counts", "finished_at") if k in data}
            elif not running:
                data.update(data.pop("_bench_end", {}))
            con.execute("UPDATE batches SET meta = ? WHERE batch_id = ?", (json.dumps(data), batch_id))
    con.close()
    return found


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "runs.db")
        took = build(db, args.rows, "big")
        build(db, 1_000, "small")
        print(f"store: {args.rows:,} rows written in {took:.1f} s ({os.path.getsize(db) / 1e6:.0f} MB)")
        viewer = Viewer([db]).start()
        api = f"http://127.0.0.1:{viewer.port}/api"
        token = f"token={viewer.token}"
        eid = next(e["id"] for e in get(f"{api}/experiments?{token}")["experiments"] if e["name"] == "big")
        paged, filtered, baseline, listed, counted = [], [], [], [], []
        try:
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                page = get(f"{api}/experiment?id={eid}&{token}")
                paged.append(time.perf_counter() - t0)
                assert len(page["page"]["rows"]) == 50 and page["page"]["total"] >= args.rows - 3
                t0 = time.perf_counter()
                bad = get(f"{api}/experiment?id={eid}&status=failed&sort=score%20desc&{token}")
                filtered.append(time.perf_counter() - t0)
                assert bad["page"]["rows"] and all(r["status"] == "failed" for r in bad["page"]["rows"])
                t0 = time.perf_counter()
                frame = nf.load_batch(db, "big", unpickle=False)
                first = frame.head(50).to_dict("records")
                baseline.append(time.perf_counter() - t0)
                assert len(first) == 50
                batch_id = mark_running(db, "big", True)  # the list, while the big batch is "still running"
                t0 = time.perf_counter()
                big = next(e for e in get(f"{api}/experiments?{token}")["experiments"] if e["name"] == "big")
                listed.append(time.perf_counter() - t0)
                assert big["running"] and big["succeeded"] + big["failed"] >= args.rows - 3
                t0 = time.perf_counter()
                with BatchStore(db, read_only=True) as store:
                    rows = store.stored_rows(batch_id, unpickle=False)
                    n_ok = sum(r.status == "succeeded" for r in rows)
                counted.append(time.perf_counter() - t0)
                assert n_ok == big["succeeded"]
                mark_running(db, "big", False)
        finally:
            viewer.stop()
        out = os.path.join(tmp, "report.html")
        t0 = time.perf_counter()
        report_store([db], "small", out)
        report_took = time.perf_counter() - t0
        size = os.path.getsize(out)

    def fmt(xs: list[float]) -> str:
        return f"min {min(xs) * 1000:7.1f} ms, median {statistics.median(xs) * 1000:7.1f} ms"

    print(f"first page, paged (HTTP API)        : {fmt(paged)}")
    print(f"failures sorted by score, paged     : {fmt(filtered)}")
    print(f"baseline: whole experiment loaded   : {fmt(baseline)}")
    print(f"paged / baseline (median)           : {statistics.median(paged) / statistics.median(baseline):.3f}")
    print(f"list, running batch (SQL counts)    : {fmt(listed)}")
    print(f"baseline: its rows counted in Python: {fmt(counted)}")
    print(f"list / baseline (median)            : {statistics.median(listed) / statistics.median(counted):.3f}")
    print(f"report of 1,000 rows                : {size / 1e6:.2f} MB, written in {report_took:.2f} s")
    print(
        f"goals: first page < 1 s: {'met' if statistics.median(paged) < 1 else 'NOT met'}; "
        f"running list < 1 s: {'met' if statistics.median(listed) < 1 else 'NOT met'}; "
        f"report < 5 MB: {'met' if size < 5e6 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
