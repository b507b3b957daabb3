"""What ``store=`` adds per batch row, against a hand-written asyncio batch writing SQLite itself.

Rows through a 3-node flow of trivial async nodes (so the store's cost is not hidden behind
waiting), measured two ways: CPU time of the process (every thread: on a shared machine, time spent
descheduled is not the store's cost) and wall time (what the user waits for, at the batch's
concurrency). Each side runs with and without persistence, interleaved, in the same process:

- nbflow: ``flow.abatch(rows, store=path)`` minus ``flow.abatch(rows)`` (WAL, a transaction per row).
- baseline: asyncio + a semaphore, each finished row written as JSON in its own transaction
  (WAL, synchronous=NORMAL: what one writes by hand to be crash-safe) minus the same without it.

    python benchmarks/store_overhead.py [--rows 5000] [--concurrency 100] [--repeat 5] [--keep none|all] [--no-gc]
                                        [--before REV]

``--before REV`` also runs nbflow at an older commit of this repository side by side in the same process
(imported as ``nbflow_before``, as ``batch_ab.py`` does), interleaved round by round with the rest.

``--keep`` is passed to both nbflow batches (with and without the store), so ``--keep all`` is what writing
every run record costs; without it each side has its default (``"all"`` with a store, ``"failed"``
without), which also counts keeping every run in memory. "min of each" is each side's least
disturbed figure (min of the repeats) and "paired" the median over rounds of the difference within each
round (its two batches ran back to back): both steadier than the medians when the machine is shared.

Goal: nbflow adds <= 10 µs per row.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import pathlib
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any

import nbflow as nf


def make_flow(nf: Any = nf) -> Any:
    flow = nf.Flow("store_bench")

    @flow.node
    async def prepare(x: int) -> int:
        return x + 1

    @flow.node
    async def call(prepare: int) -> int:
        await asyncio.sleep(0)
        return prepare * 2

    @flow.node
    async def score(call: int) -> int:
        return call - 1

    return flow


async def baseline(rows: list[dict[str, int]], concurrency: int, path: str | None) -> list[int]:
    db = None
    if path is not None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE rows (i INTEGER PRIMARY KEY, data TEXT)")

    async def call(p: int) -> int:
        await asyncio.sleep(0)
        return p * 2

    sem = asyncio.Semaphore(concurrency)

    async def one(row: dict[str, int]) -> int:
        async with sem:
            p = row["x"] + 1
            c = await call(p)
            s = c - 1
            if db is not None:
                db.execute("BEGIN IMMEDIATE")
                db.execute(
                    "INSERT INTO rows VALUES (?, ?)", (row["x"], json.dumps({"x": row["x"], "prepare": p, "score": s}))
                )
                db.execute("COMMIT")
            return s

    try:
        return await asyncio.gather(*(one(r) for r in rows))
    finally:
        if db is not None:
            db.close()


async def measure(
    n: int, conc: int, repeat: int, keep: str | None = None, no_gc: bool = False, before: Any = None
) -> dict[str, Any]:
    flows = {"nb": make_flow()}
    if before is not None:
        flows["nb_before"] = make_flow(before)
    for flow in flows.values():
        _ = flow.graph
    rows = [{"x": i} for i in range(n)]
    t: dict[str, list[float]] = {"base": [], "base_store": [], "nb": [], "nb_store": []}
    if before is not None:
        t.update({"nb_before": [], "nb_before_store": []})
    wall: dict[str, list[float]] = {k: [] for k in t}
    loop_cpu: dict[str, list[float]] = {k: [] for k in t}  # the loop's thread alone (thread_time)
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(repeat):
            for label in t:
                path = os.path.join(tmp, f"{label}-{k}.db") if label.endswith("store") else None
                gc.collect()
                if no_gc:  # the store's own work, without the collections its allocations trigger
                    gc.disable()
                w0 = time.perf_counter()
                t0 = time.process_time()  # CPU time: the machine is shared; waiting is not cost
                l0 = time.thread_time()
                if label.startswith("base"):
                    await baseline(rows, conc, path)
                else:
                    flow = flows[label.removesuffix("_store")]
                    frame = await flow.abatch(rows, concurrency=conc, progress=False, store=path, keep=keep)
                    assert (frame["status"] == "succeeded").all()
                t[label].append(time.process_time() - t0)
                loop_cpu[label].append(time.thread_time() - l0)
                wall[label].append(time.perf_counter() - w0)
                gc.enable()
    m = {k: statistics.median(v) for k, v in t.items()}
    w = {k: statistics.median(v) for k, v in wall.items()}
    lo = {k: min(v) for k, v in t.items()}  # least disturbed by other processes on a shared machine

    def paired(side: str, of: dict[str, list[float]] = t) -> float:
        """The median over rounds of (with store - without) in the same round, µs a row: each round's two
        batches ran back to back, so a slow minute weighs on both (steadier than a difference of minimums)."""
        return statistics.median(a - b for a, b in zip(of[f"{side}_store"], of[side], strict=True)) / n * 1e6

    base_added = (m["base_store"] - m["base"]) / n * 1e6
    nb_added = (m["nb_store"] - m["nb"]) / n * 1e6
    base_wall = (w["base_store"] - w["base"]) / n * 1e6
    nb_wall = (w["nb_store"] - w["nb"]) / n * 1e6
    extra = {}
    if before is not None:
        extra = {
            "before_added_us": (m["nb_before_store"] - m["nb_before"]) / n * 1e6,
            "before_added_min_us": (lo["nb_before_store"] - lo["nb_before"]) / n * 1e6,
            "before_added_wall_us": (w["nb_before_store"] - w["nb_before"]) / n * 1e6,
            "before_added_paired_us": paired("nb_before"),
            "before_added_loop_paired_us": paired("nb_before", loop_cpu),
            "before_added_wall_paired_us": paired("nb_before", wall),
        }
    return {
        **extra,
        "rows": n,
        "concurrency": conc,
        "baseline_added_us": base_added,
        "nbflow_added_us": nb_added,
        "ratio": nb_added / base_added if base_added > 0 else float("nan"),
        "baseline_added_min_us": (lo["base_store"] - lo["base"]) / n * 1e6,
        "nbflow_added_min_us": (lo["nb_store"] - lo["nb"]) / n * 1e6,
        "baseline_added_wall_us": base_wall,
        "baseline_added_paired_us": paired("base"),
        "nbflow_added_paired_us": paired("nb"),
        "nbflow_added_wall_us": nb_wall,
        "baseline_added_loop_paired_us": paired("base", loop_cpu),
        "nbflow_added_loop_paired_us": paired("nb", loop_cpu),
        "baseline_added_wall_paired_us": paired("base", wall),
        "nbflow_added_wall_paired_us": paired("nb", wall),
        "medians_s": m,
        "wall_medians_s": w,
        "load": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--keep",
        default=None,
        help="keep= for nbflow (default: the batch default, 'all' with a store: every row's run record is "
        "written with it; 'none': the row alone, as the baseline writes)",
    )
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="garbage collector off while timing (both sides): the work itself, without the collections "
        "it triggers, which make the figures swing with the heap's history",
    )
    parser.add_argument("--before", help="a git revision of this repository to run side by side (batch_ab.py)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = None
        if args.before:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from batch_ab import import_before

            before = import_before(args.before, pathlib.Path(tmp))
        r = asyncio.run(measure(args.rows, args.concurrency, args.repeat, args.keep, args.no_gc, before))
    print(
        f"store= cost per row: {args.rows} rows, concurrency {args.concurrency}, median of {args.repeat}, "
        f"keep={args.keep or 'default (all)'}" + (", GC off while timing" if args.no_gc else "")
    )
    print("                                       CPU (median)   wall (median)  CPU (min of each)  CPU (paired)")
    print(
        f"  hand-written (a transaction per row): +{r['baseline_added_us']:.1f} µs/row  "
        f"+{r['baseline_added_wall_us']:.1f} µs/row  +{r['baseline_added_min_us']:.1f} µs/row  "
        f"+{r['baseline_added_paired_us']:.1f} µs/row"
    )
    print(
        f"  nbflow store=:                        +{r['nbflow_added_us']:.1f} µs/row  "
        f"+{r['nbflow_added_wall_us']:.1f} µs/row  +{r['nbflow_added_min_us']:.1f} µs/row  "
        f"+{r['nbflow_added_paired_us']:.1f} µs/row  (goal <= 10)"
    )
    if args.before:
        print(
            f"  nbflow at {args.before}:{' ' * max(1, 27 - len(args.before))}+{r['before_added_us']:.1f} µs/row  "
            f"+{r['before_added_wall_us']:.1f} µs/row  +{r['before_added_min_us']:.1f} µs/row  "
            f"+{r['before_added_paired_us']:.1f} µs/row"
        )
    print(f"  nbflow / hand-written (CPU):          {r['ratio']:.2f}x")
    print("  paired, the loop's thread alone (CPU) and wall time (what the batch takes longer):")
    print(
        f"    hand-written: loop +{r['baseline_added_loop_paired_us']:.1f} µs/row, "
        f"wall +{r['baseline_added_wall_paired_us']:.1f} µs/row"
    )
    print(
        f"    nbflow:       loop +{r['nbflow_added_loop_paired_us']:.1f} µs/row, "
        f"wall +{r['nbflow_added_wall_paired_us']:.1f} µs/row"
    )
    if args.before:
        print(
            f"    at {args.before}: loop +{r['before_added_loop_paired_us']:.1f} µs/row, "
            f"wall +{r['before_added_wall_paired_us']:.1f} µs/row"
        )
    print("  load average: " + " ".join(f"{x:.2f}" for x in r["load"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)


if __name__ == "__main__":
    main()
