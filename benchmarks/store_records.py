"""What writing a batch's kept runs costs per run (``keep="all"`` with ``store=``), the SQLite write alone.

The runs of a real batch (``store_overhead.py``'s 3-node flow, kept in memory) are written the way a batch's
group commit writes them (``write_whole_runs``, groups of 100, one transaction each, WAL) into a fresh file;
CPU time per run, the collector off, min and median of the rounds. With ``--before REV`` the tree at REV
(imported as ``nbflow_before``, as ``batch_ab.py`` does) writes its own runs of the same flow, interleaved
round by round in the same process.

    python benchmarks/store_records.py [--runs 5000] [--rounds 7] [--before REV]
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any

import nbflow as nf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from store_overhead import make_flow

GROUP = 100


def kept_runs(lib: Any, n: int) -> list[Any]:
    frame = make_flow(lib).batch([{"x": i} for i in range(n)], concurrency=100, progress=False, keep="all")
    return [frame.nbflow.run(i) for i in range(n)]


def write(lib_name: str, runs: list[Any], folder: str) -> float:
    checkpoint = sys.modules[f"{lib_name}._store.checkpoint"]
    sqlite = sys.modules[f"{lib_name}._store.sqlite"]
    db = sqlite.open_db(os.path.join(folder, f"{lib_name}-{time.monotonic_ns()}.db"))
    with sqlite.Transaction(db):
        checkpoint.ensure_schema(db, "bench")
    cur = sqlite3.Cursor(db)
    t0 = time.process_time()
    for k in range(0, len(runs), GROUP):
        cur.execute("BEGIN IMMEDIATE")
        checkpoint.write_whole_runs(cur, runs[k : k + GROUP])
        cur.execute("COMMIT")
    spent = time.process_time() - t0
    db.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before", help="a git revision of this repository to run side by side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        libs: dict[str, Any] = {"nbflow": nf}
        if args.before:
            from batch_ab import import_before

            libs["nbflow_before"] = import_before(args.before, pathlib.Path(tmp))
        runs = {name: kept_runs(lib, args.runs) for name, lib in libs.items()}
        for name in libs:  # every module the write uses, loaded before timing
            __import__(f"{name}._store.checkpoint")
            __import__(f"{name}._store.sqlite")
        times: dict[str, list[float]] = {name: [] for name in libs}
        gc.disable()
        try:
            for _ in range(args.rounds):
                for name in libs:
                    times[name].append(write(name, runs[name], tmp))
        finally:
            gc.enable()
    print(f"writing {args.runs} kept runs in groups of {GROUP}: CPU µs per run (min / median of {args.rounds})")
    for name, spent in times.items():
        label = "this tree" if name == "nbflow" else f"at {args.before}"
        per = [s / args.runs * 1e6 for s in spent]
        print(f"  {label:12s} {min(per):6.2f} / {statistics.median(per):6.2f}")
    print("  load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
