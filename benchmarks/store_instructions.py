"""What ``store=`` adds per batch row, in CPU instructions counted by valgrind: a figure the machine's load cannot move.

On the shared 2-core machine this project is measured on, CPU time per row moves by ±25% from run to run (also
at a load of 1), more than most changes to the store's path save (1-5 µs a row of ~40-80). Counting instructions
(valgrind's callgrind) gives the same number for the same code whatever else runs, so a before/after of a few
percent can be read from one run of each.

Each figure comes from fresh processes under callgrind, counting only the measured batch (it runs inside
``eval``, and callgrind collects while ``builtin_eval`` runs: ``--toggle-collect``): imports and warm-up batches are
left out. Per tree and per ``keep=``, one batch of ``store_overhead.py``'s 3-node flow with ``store=`` and one
without; the difference / rows is what the store adds per row, in instructions. ``--before REV`` also counts nbflow
at an older commit (its ``nbflow`` folder taken with ``git archive``, imported as ``nbflow`` first on the path: not
renamed, as ``batch_ab.py``'s copy is, since a kept run's record pickles names that would then be longer), so the
ratio is taken between two counts of the same kind.

Not fully exact: how many rows finish in one loop turn (and so share a transaction) depends on timing, which
valgrind slows ~50x alike for every tree; a second count of the same tree differs by well under 1% (measured:
``docs/benchmarks.md``, "Session 15: the store in instructions"). Each process takes ~2.5 minutes (valgrind
runs the imports too); two run at a time.

    python benchmarks/store_instructions.py [--before REV] [--rows 2000] [--keep none all] [--floors] [--parts]

``--floors`` also counts ``store_floor.py``'s floors for the same rows (SQLite alone writing them, the hand-written
minimal store doing a row's duties): issue 35's goal (``store=`` adds <= 2x SQLite alone) in instructions.
``--parts`` counts parts of a row's path alone (its lineage, its encoding, its inserts and commits); the rest of
what ``store=`` adds is printed beside them.

Needs ``valgrind`` (``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent


def _setup(tree: str, rows: int) -> tuple[Any, Any, str, list[dict[str, int]]]:
    """In a child process: nbflow imported from ``tree`` (checked), ``store_overhead.py``'s flow, a temporary
    folder and the batch's inputs."""
    sys.path[:0] = [tree, str(HERE)]
    from store_overhead import make_flow

    import nbflow

    where = pathlib.Path(nbflow.__file__).resolve().parent.parent
    if where != pathlib.Path(tree).resolve():
        raise SystemExit(f"imported nbflow from {where}, not from {tree}")
    return nbflow, make_flow(nbflow), tempfile.mkdtemp(), [{"x": i} for i in range(rows)]


def child(tree: str, keep: str, rows: int, store: bool) -> None:
    """In the process valgrind runs: warm up, then the measured batch inside ``eval`` (what callgrind counts)."""
    import asyncio

    _, flow, tmp, inputs = _setup(tree, rows)
    warm = inputs[:200]
    asyncio.run(flow.abatch(warm, concurrency=100, progress=False, store=os.path.join(tmp, "w.db"), keep=keep))
    asyncio.run(flow.abatch(warm, concurrency=100, progress=False, keep=keep))
    path = os.path.join(tmp, "a.db") if store else None
    measured = {"asyncio": asyncio, "flow": flow, "inputs": inputs, "path": path, "keep": keep}
    frame = eval("asyncio.run(flow.abatch(inputs, concurrency=100, progress=False, store=path, keep=keep))", measured)
    assert (frame["status"] == "succeeded").all(), "every row succeeded"


def child_floor(tree: str, keep: str, rows: int, kind: str) -> None:
    """In the process valgrind runs: ``store_floor.py``'s floors for the rows a real batch stored, counted alone
    (inside ``eval``): ``kind`` "sqlite" writes the stored values again with nbflow's statements (SQLite alone),
    "minimal" is its hand-written store doing a row's duties (JSON, content key, data versions, a minimal lineage)."""
    import asyncio

    _, flow, tmp, inputs = _setup(tree, rows)
    from store_floor import minimal_inputs, minimal_store, rewrite, stored

    source = os.path.join(tmp, "source.db")
    asyncio.run(flow.abatch(inputs, concurrency=100, progress=False, store=source, keep=keep))
    content = stored(source)
    given = minimal_inputs(flow, inputs, content[0]) if kind == "minimal" else None
    for path in ("w1.db", "w2.db"):  # warm-up, as the batches' own
        if kind == "minimal":
            minimal_store(os.path.join(tmp, path), given[:200], keep, 100)  # type: ignore[index]
        else:
            rewrite(os.path.join(tmp, path), content[0][:200], content[1][:200], 100)
    measured = {"rewrite": rewrite, "minimal_store": minimal_store, "content": content, "given": given}
    measured |= {"path": os.path.join(tmp, "a.db"), "keep": keep}
    if kind == "minimal":
        eval("minimal_store(path, given, keep, 100)", measured)
    else:
        eval("rewrite(path, content[0], content[1], 100)", measured)


_PARTS = ("lineage", "encode", "write")


def child_part(tree: str, keep: str, rows: int, part: str) -> None:
    """In the process valgrind runs: one part of what ``store=`` does for a row, alone, on the rows and runs of a
    real batch (``--parts``): "lineage" makes each row's lineage (``row_lineage``), "encode" each row's prepared
    values (``BatchStore.plain_row``: its JSON, its secret checks), "write" the prepared rows' inserts and
    commits in groups of 100 (``BatchStore.write_rows``)."""
    import asyncio
    import json

    _, flow, tmp, inputs = _setup(tree, rows)
    from store_floor import stored

    from nbflow._engine.lineage import row_lineage
    from nbflow._store.batch_store import BatchStore

    source = os.path.join(tmp, "source.db")
    frame = asyncio.run(flow.abatch(inputs, concurrency=100, progress=False, store=source, keep="none"))
    # (store_floor's rows: rowid, batch_id, case_key, row_index, run_id, status, finished_at, fingerprint, data, lineage)
    data = [(b, i, r, st, json.loads(d), k, f, lin) for _, b, k, i, r, st, _, f, d, lin in stored(source)[0]]
    store = BatchStore(os.path.join(tmp, "a.db"))
    store.begin_batch(data[0][0], "store_bench", rows, list(data[0][4]))
    measured: dict[str, object] = {"store": store, "data": data, "row_lineage": row_lineage}
    if part == "lineage":
        measured["runs"] = asyncio.run(flow.abatch(inputs, concurrency=100, progress=False, keep="all")).nbflow.runs()
        snippet = "[row_lineage(run) for run in runs]"
    elif part == "encode":
        snippet = "[store.plain_row(b, i, r, st, d, k, f, None, lin) for b, i, r, st, d, k, f, lin in data]"
    else:
        measured["prepared"] = [store.plain_row(b, i, r, st, d, k, f, None, lin) for b, i, r, st, d, k, f, lin in data]
        snippet = "[store.write_rows(prepared[k : k + 100]) for k in range(0, len(prepared), 100)]"
    eval(snippet, measured)
    assert len(frame) == rows
    store.close()


def count(tree: str, keep: str, rows: int, store: bool | str) -> int:
    """Instructions the measured batch ran (callgrind's "Collected") with nbflow from ``tree``; ``store`` a string:
    instead one of ``child_floor``'s floors."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        "--collect-atstart=no",
        "--toggle-collect=builtin_eval",
        sys.executable,
        __file__,
        "--child",
        tree,
        keep,
        str(rows),
        store if isinstance(store, str) else "store" if store else "none",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run failed ({' '.join(cmd[-4:])}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        tree, keep, rows, store = sys.argv[2:6]
        if store in ("sqlite", "minimal"):
            child_floor(tree, keep, int(rows), store)
        elif store in _PARTS:
            child_part(tree, keep, int(rows), store)
        else:
            child(tree, keep, int(rows), store == "store")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="also count nbflow at this git revision")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--keep", nargs="+", default=["none", "all"], choices=["none", "all", "failed"])
    parser.add_argument(
        "--floors",
        action="store_true",
        help="also count store_floor.py's floors (SQLite alone, the minimal store) for the same rows: issue 35's goal",
    )
    parser.add_argument(
        "--parts",
        action="store_true",
        help="also count parts of a row's store= path alone (its lineage, its encoding, its inserts and commits)",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit(
            "store_instructions.py counts instructions with valgrind: install it (apt-get install valgrind)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"nbflow": str(HERE.parent)}
        if args.before:
            archive = subprocess.run(
                ["git", "archive", "--format=tar", args.before, "nbflow"],
                cwd=HERE.parent,
                check=True,
                capture_output=True,
            ).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(tmp, filter="data")
            trees[f"at {args.before}"] = tmp
        kinds: tuple[bool | str, ...] = (False, True)
        if args.floors:
            kinds += ("sqlite", "minimal")
        if args.parts:
            kinds += _PARTS
        jobs = {
            (label, keep, store): (path, keep, args.rows, store)
            for label, path in trees.items()
            for keep in args.keep
            for store in kinds
            if label == "nbflow" or not isinstance(store, str)
        }
        with concurrent.futures.ThreadPoolExecutor(2) as pool:  # (2 cores: one valgrind each)
            counts = dict(zip(jobs, pool.map(lambda a: count(*a), jobs.values()), strict=True))
    print(f"store= per row in instructions (valgrind callgrind): {args.rows} rows, the batch alone")
    added: dict[tuple[str, str], float] = {}
    for label in trees:
        for keep in args.keep:
            with_store, without = counts[(label, keep, True)], counts[(label, keep, False)]
            added[(label, keep)] = (with_store - without) / args.rows
            print(
                f"  {label:18s} keep={keep!r:7s} batch {without / args.rows / 1e3:7.1f} k/row without a store, "
                f"{with_store / args.rows / 1e3:7.1f} k/row with one: store= adds {added[(label, keep)] / 1e3:6.1f} k/row"
            )
    if args.floors:
        for keep in args.keep:
            nb = added[("nbflow", keep)]
            sqlite, minimal = (
                counts[("nbflow", keep, "sqlite")] / args.rows,
                counts[("nbflow", keep, "minimal")] / args.rows,
            )
            print(
                f"  keep={keep!r}: SQLite alone {sqlite / 1e3:6.1f} k/row, the minimal store {minimal / 1e3:6.1f} k/row "
                f"({minimal / sqlite:.2f}x SQLite): store= adds {nb / sqlite:.2f}x SQLite alone (goal <= 2x), "
                f"{nb / minimal:.2f}x the minimal store"
            )
    if args.parts:
        for keep in args.keep:
            parts = {part: counts[("nbflow", keep, part)] / args.rows for part in _PARTS}
            rest = added[("nbflow", keep)] - sum(parts.values())
            print(
                f"  keep={keep!r}, parts alone: "
                + ", ".join(f"{part} {n / 1e3:.1f} k" for part, n in parts.items())
                + f"; the rest of what store= adds (keys, the commit's wait, the kept runs, the experiment) "
                f"{rest / 1e3:.1f} k a row"
            )
    if args.before:
        for keep in args.keep:
            ratio = added[("nbflow", keep)] / added[(f"at {args.before}", keep)]
            print(f"  keep={keep!r}: store= adds {ratio:.3f}x the instructions it added at {args.before}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
