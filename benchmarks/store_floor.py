"""The floor under ``store=``'s cost per row: SQLite alone writing the exact rows a batch stores.

A real batch of ``store_overhead.py``'s 3-node flow is stored twice (``keep="none"``: the rows; the default
``keep="all"``: the rows and every run's record). Their stored values are then read back and written again,
as they are, into fresh files with nbflow's own schema and statements (``BatchStore``'s tables, ``_ROW_SQL``,
``_COMPACT_RUN_SQL``), in groups of ``--group`` rows (one transaction each, WAL, synchronous=NORMAL, as the
group commit writes them): no encoding, no keys, no Python of nbflow's between the statements. That is what
the bytes and the inserts cost by themselves, whatever code prepares them (a row includes its lineage,
the JSON ``run.lineage()`` reads after a restart: a kept run's is its row's). Also timed alone: hashing the values a row's lineage names
(the data versions: SHA-256 of each input's and output's pickle), a floor of its own. Beside it, in the same process
and interleaved round by round, what ``store=`` adds per row to the same batch (paired, as
``store_overhead.py`` measures it). CPU time of the process, the collector off while timing, min and median
of the rounds.

A second floor does what the store must do for a row, by hand, with no nbflow code (``minimal_store``): the row's
JSON (orjson), its content key (SHA-256 of its inputs' JSON), the data versions its lineage names (SHA-256 of each
input's and output's pickle, the same rule) and a minimal lineage text of them, with ``keep="all"`` also a pickle
of the run's record (its inputs, node names, outputs and times), then the same inserts in groups.

The ratios are also taken round by round ("paired": each round's nbflow batch and floors ran within seconds of each
other, so a slow minute of the shared machine weighs on both): min and median of the per-round ratios are steadier
than a ratio of medians when the load moves.

    python benchmarks/store_floor.py [--rows 5000] [--rounds 7] [--group 100]

Goal (issue 35): ``store=`` adds <= 2x SQLite's floor per row (printed as ratios, min and median of the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from store_overhead import make_flow

from nbflow._store.batch_store import _ROW_SQL, BatchStore
from nbflow._store.checkpoint import _COMPACT_RUN_SQL, ensure_schema


def stored(path: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows (in ``_ROW_SQL``'s order) and compact run records (``_COMPACT_RUN_SQL``'s: with their lineage) a
    batch wrote."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT rowid, batch_id, case_key, row_index, run_id, status, finished_at, fingerprint, data, lineage "
            "FROM batch_rows ORDER BY rowid"
        ).fetchall()
        has_runs = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'checkpoint_runs'").fetchone()
        runs = (
            db.execute(
                "SELECT run_id, flow, status, updated_at, record, lineage FROM checkpoint_runs ORDER BY rowid"
            ).fetchall()
            if has_runs
            else []
        )
    finally:
        db.close()
    return rows, runs


def rewrite(path: str, rows: list[tuple[Any, ...]], runs: list[tuple[Any, ...]], group: int) -> float:
    """Write ``rows`` (and ``runs``) into a fresh store at ``path`` in groups; CPU seconds spent."""
    BatchStore(path).close()  # nbflow's schema, as a batch's first write finds it
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    if runs:
        ensure_schema(db, path)
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        for k in range(0, len(rows), group):
            db.execute("BEGIN IMMEDIATE")
            db.executemany(_ROW_SQL, rows[k : k + group])
            if runs:
                db.executemany(_COMPACT_RUN_SQL, runs[k : k + group])
            db.execute("COMMIT")
        db.close()  # (its checkpoint of the WAL into the file, as a batch's store does when it closes)
        return time.process_time() - t0
    finally:
        gc.enable()


def lineage_cost(flow: Any, inputs: list[dict[str, int]]) -> float:
    """CPU seconds per row of making each row's lineage as it is stored (``row_lineage``: every node's data
    versions and inputs, as JSON), which every stored row holds, also one whose run is kept: part of the cost
    that no SQLite write avoids."""
    from nbflow._engine.lineage import row_lineage

    frame = asyncio.run(flow.abatch(inputs, concurrency=100, progress=False, keep="all"))
    runs = frame.nbflow.runs()
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        for run in runs:
            row_lineage(run)
        return (time.process_time() - t0) / len(runs)
    finally:
        gc.enable()


def hashing_cost(flow: Any, inputs: list[dict[str, int]]) -> float:
    """CPU seconds per row of hashing, by the data versions' own rule (SHA-256 of the protocol-5 pickle), every
    value a row's lineage names: each input and each node's output. No store avoids it (a lineage names its data
    by content); nbflow's cache of small scalars' versions is not used here, so it is what a row costs at most."""
    import hashlib
    import pickle

    frame = asyncio.run(flow.abatch(inputs, concurrency=100, progress=False, keep="all"))
    values = [[*run.inputs.values(), *run.outputs.values()] for run in frame.nbflow.runs()]
    sha, dumps = hashlib.sha256, pickle.dumps
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        for row in values:
            for v in row:
                "v:" + sha(dumps(v, protocol=5)).hexdigest()
        return (time.process_time() - t0) / len(values)
    finally:
        gc.enable()


def minimal_inputs(flow: Any, inputs: list[dict[str, int]], rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Per row what a minimal store is given: (the row's values as a dict, the run's inputs, the values its lineage
    names, run id, status, the run's node names, outputs and start/finish times)."""
    import json

    frame = asyncio.run(flow.abatch(inputs, concurrency=100, progress=False, keep="all"))
    out = []
    for run, row in zip(frame.nbflow.runs(), rows, strict=True):
        c = run._c
        out.append(
            (
                json.loads(row[8]),
                dict(run.inputs),
                [*run.inputs.values(), *c.output],
                run.run_id,
                "succeeded",
                tuple(c.names),
                list(c.output),
                list(c.started),
                list(c.finished),
            )
        )
    return out


def minimal_store(path: str, given: list[tuple[Any, ...]], keep: str, group: int) -> float:
    """A hand-written store doing a row's duties (see the module's docstring) into nbflow's schema; CPU seconds."""
    import hashlib
    import pickle

    import orjson

    BatchStore(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    runs_too = keep == "all"
    if runs_too:
        ensure_schema(db, path)
    sha, dumps, odumps, now = hashlib.sha256, pickle.dumps, orjson.dumps, time.time
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        rowid = 0
        for k in range(0, len(given), group):
            rows, runs = [], []
            for data, inputs, values, run_id, status, names, outputs, started, finished in given[k : k + group]:
                rowid += 1
                key = sha(odumps(inputs)).hexdigest()[:32]
                text = odumps(data).decode()
                lineage = odumps(["v:" + sha(dumps(v, protocol=5)).hexdigest() for v in values]).decode()
                if runs_too:
                    record = dumps((inputs, names, outputs, started, finished), protocol=5)
                    runs.append((run_id, "store_bench", status, now(), record, lineage))
                    lineage = None
                rows.append((rowid, "b", key, rowid - 1, run_id, status, now(), "f", text, lineage))
            db.execute("BEGIN IMMEDIATE")
            db.executemany(_ROW_SQL, rows)
            if runs:
                db.executemany(_COMPACT_RUN_SQL, runs)
            db.execute("COMMIT")
        db.close()
        return time.process_time() - t0
    finally:
        gc.enable()


async def added(flow: Any, rows: list[dict[str, int]], path: str, keep: str | None) -> float:
    """CPU seconds ``store=`` added to one batch: with the store minus without, back to back."""
    spent = []
    for store in (None, path):
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            await flow.abatch(rows, concurrency=100, progress=False, store=store, keep=keep)
            spent.append(time.process_time() - t0)
        finally:
            gc.enable()
    return spent[1] - spent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--group", type=int, default=100, help="rows per transaction in the rewrite")
    args = parser.parse_args()
    n = args.rows
    flow = make_flow()
    inputs = [{"x": i} for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        kinds = {"none": "keep='none' (the rows)", "all": "the default, keep='all' (rows + run records)"}
        content = {}
        for keep in kinds:
            path = os.path.join(tmp, f"source-{keep}.db")
            asyncio.run(flow.abatch(inputs, concurrency=100, progress=False, store=path, keep=keep))
            content[keep] = stored(path)
            assert len(content[keep][0]) == n, "every row stored"
            assert (len(content[keep][1]) == n) == (keep == "all"), "a record per row with keep='all' only"
        given = minimal_inputs(flow, inputs, content["none"][0])
        floor: dict[str, list[float]] = {k: [] for k in kinds}
        minimal: dict[str, list[float]] = {k: [] for k in kinds}
        nb: dict[str, list[float]] = {k: [] for k in kinds}
        lineage: list[float] = []
        hashing: list[float] = []
        for r in range(args.rounds):
            lineage.append(lineage_cost(flow, inputs))
            hashing.append(hashing_cost(flow, inputs))
            for keep in kinds:
                rows, runs = content[keep]
                floor[keep].append(rewrite(os.path.join(tmp, f"floor-{keep}-{r}.db"), rows, runs, args.group) / n)
                minimal[keep].append(
                    minimal_store(os.path.join(tmp, f"min-{keep}-{r}.db"), given, keep, args.group) / n
                )
                nb[keep].append(asyncio.run(added(flow, inputs, os.path.join(tmp, f"nb-{keep}-{r}.db"), keep)) / n)
    print(
        f"store= floor: {n} rows, the stored values written again by SQLite alone in groups of {args.group}, "
        f"{args.rounds} rounds, collector off (µs of CPU per row, min / median)"
    )
    print(f"  {'':46s} {'SQLite alone':>16s} {'minimal store':>16s} {'nbflow store= adds':>20s}")
    for keep, label in kinds.items():
        f, m, a = floor[keep], minimal[keep], nb[keep]
        print(
            f"  {label:46s} {min(f) * 1e6:6.1f} / {statistics.median(f) * 1e6:5.1f}"
            f"   {min(m) * 1e6:6.1f} / {statistics.median(m) * 1e6:5.1f}"
            f"   {min(a) * 1e6:8.1f} / {statistics.median(a) * 1e6:5.1f}"
        )
    rows, runs = content["all"]
    size_rows = statistics.mean(sum(len(str(v)) for v in row[1:]) for row in rows)
    size_runs = statistics.mean(len(run[4]) for run in runs)
    print(f"  bytes a row: {size_rows:.0f} (the row's values and lineage), {size_runs:.0f} (its compact run record)")
    size_lineage = statistics.mean(len(row[9] or "") + len(run[5] or "") for row, run in zip(rows, runs, strict=True))
    print(f"  bytes a kept row's lineage: {size_lineage:.0f} (JSON, the row's and its run record's)")
    for keep in kinds:
        f, a = floor[keep], nb[keep]
        lo, med = min(a) / min(f), statistics.median(a) / statistics.median(f)
        print(f"  keep={keep!r}: store= adds {lo:.2f}x (min) / {med:.2f}x (median) SQLite's floor (goal <= 2x)")
        for name, under in (("SQLite's floor", f), ("the minimal store", minimal[keep])):
            per_round = [x / y for x, y in zip(a, under, strict=True)]
            print(
                f"      paired, round by round: {min(per_round):.2f}x (min) / {statistics.median(per_round):.2f}x "
                f"(median) {name}"
            )
    f, a, lin = floor["all"], nb["all"], statistics.median(lineage)
    print(
        f"  making each row's stored lineage (nbflow/_engine/lineage.py, hashing included) costs "
        f"{min(lineage) * 1e6:.1f} / {lin * 1e6:.1f} µs a row (min / median); keep='all' without it: "
        f"{(statistics.median(a) - lin) / statistics.median(f):.2f}x the floor (median)"
    )
    h = statistics.median(hashing)
    print(
        f"  hashing the values a row's lineage names (its inputs and outputs, SHA-256 of their pickles) costs "
        f"{min(hashing) * 1e6:.1f} / {h * 1e6:.1f} µs a row (min / median): the floor with it (median) is "
        + ", ".join(
            f"keep={keep!r} {(statistics.median(floor[keep]) + h) * 1e6:.1f} µs, store= adds "
            f"{statistics.median(nb[keep]) / (statistics.median(floor[keep]) + h):.2f}x it"
            for keep in kinds
        )
    )
    print("  load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
