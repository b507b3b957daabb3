"""Before/after of the sync-node batch in ONE process: the hand-written baseline, nbflow at an older
commit and nbflow as checked out, interleaved round by round.

On a shared machine, separate runs of ``batch_throughput.py`` swing by ±30% in CPU per row with the
load; here every round runs the three back to back (the two nbflow trees in alternating order), so
the load hits them alike. The older tree is taken with ``git archive`` into a temporary folder and
renamed ``nbflow_before`` (its absolute imports rewritten), so both import side by side.

    python benchmarks/batch_ab.py --before 59fa20d [--rows 2500] [--concurrency 250] [--rounds 10]

Prints process CPU time per row (median; also as a multiple of the baseline's, median of the
per-round ratios) and the wall-clock efficiency ratio to the baseline (``batch_throughput.py``'s).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import pathlib
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import batch_throughput as bt  # noqa: E402

_REWRITES = [
    (re.compile(r"\bnbflow\.(_|otel|cli|testing|widgets)"), r"nbflow_before.\1"),
    (re.compile(r"^(\s*)import nbflow$", re.M), r"\1import nbflow_before as nbflow"),
    (re.compile(r"\bfrom nbflow import\b"), "from nbflow_before import"),
]


def checkout(rev: str, into: pathlib.Path) -> None:
    """nbflow at ``rev`` as the package ``nbflow_before`` under ``into``."""
    data = subprocess.run(
        ["git", "archive", "--format=tar", rev, "nbflow"], cwd=HERE.parent, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    pkg = into / "nbflow_before"
    (into / "nbflow").rename(pkg)
    for path in pkg.rglob("*.py"):
        text = path.read_text()
        for pattern, repl in _REWRITES:
            text = pattern.sub(repl, text)
        path.write_text(text)


def import_before(rev: str, into: pathlib.Path) -> Any:
    """nbflow at ``rev``, imported as ``nbflow_before`` (``checkout`` into ``into``, which goes on ``sys.path``)."""
    checkout(rev, into)
    sys.path.insert(0, str(into))
    import nbflow_before  # type: ignore[import-not-found]

    return nbflow_before


def _current_modules() -> set[str]:
    return {m for m in sys.modules if m == "nbflow" or m.startswith("nbflow.")}


def make(nf: Any) -> Any:
    flow = bt.make_sync_flow(nf)
    _ = flow.graph
    return flow


async def compare(before: Any, after: Any, rows_n: int, conc: int, rounds: int) -> dict[str, dict[str, float]]:
    rows = [{"x": i} for i in range(rows_n)]
    loaded = _current_modules()
    flows = {"before": make(before)}
    # Learn the sync nodes' placement, import pandas: outside the timing. The older tree's first batch
    # must not load a module of the current one (an import the rewrite missed).
    await flows["before"].abatch(rows[:500], concurrency=conc, progress=False)
    if _current_modules() - loaded:
        raise SystemExit(f"the older tree imported {sorted(_current_modules() - loaded)[:3]}; extend _REWRITES")
    flows["after"] = make(after)
    await flows["after"].abatch(rows[:500], concurrency=conc, progress=False)
    cpu: dict[str, list[float]] = {"baseline": [], "before": [], "after": []}
    wall: dict[str, list[float]] = {k: [] for k in cpu}
    for r in range(rounds):
        for name in ("baseline", "before", "after") if r % 2 == 0 else ("baseline", "after", "before"):
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            if name == "baseline":
                await bt.baseline_sync(rows, conc)
            else:
                frame = await flows[name].abatch(rows, concurrency=conc, progress=False)
                assert (frame["status"] == "succeeded").all()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - t0)
    base_wall = statistics.median(wall["baseline"])
    return {
        name: {
            "cpu_us_per_row": statistics.median(cpu[name]) / rows_n * 1e6,
            "cpu_x_baseline": statistics.median(c / b for c, b in zip(cpu[name], cpu["baseline"], strict=True)),
            "ratio": base_wall / statistics.median(wall[name]),
        }
        for name in cpu
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a git revision of this repository")
    parser.add_argument("--rows", type=int, default=2_500)
    parser.add_argument("--concurrency", type=int, default=250)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        nbflow_before = import_before(args.before, pathlib.Path(tmp))
        import nbflow

        out = asyncio.run(compare(nbflow_before, nbflow, args.rows, args.concurrency, args.rounds))
    print(
        f"sync-node batch, {args.rows} rows at {args.concurrency} in flight, {args.rounds} rounds interleaved "
        f"(before = {args.before})"
    )
    print(f"{'':>9} {'cpu us/row':>11} {'cpu x base':>11} {'nb/base':>8}")
    for name, r in out.items():
        print(f"{name:>9} {r['cpu_us_per_row']:>11.1f} {r['cpu_x_baseline']:>11.2f} {r['ratio']:>8.3f}")


if __name__ == "__main__":
    main()
