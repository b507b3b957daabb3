"""What the engine costs a batch row, against nbflow's own batch with the engine taken out.

The sync-node batch of ``batch_throughput.py`` (1,000 rows at 50 in flight, ``prepare`` and ``score`` plain
``def`` functions, ``call`` awaiting a 20 ms sleep) three ways, interleaved in one process:

- ``baseline``: the hand-written asyncio batch (a semaphore, the three steps called directly);
- ``nbflow``: ``flow.abatch`` as it is;
- ``no engine``: ``flow.abatch`` with each row's run done by a hand-written body instead of the engine: the
  three functions called directly, the run's outputs and statuses written at the end. Everything else of the
  batch is kept (its worker pool, a ``Run`` per row, the result columns, progress, the frame), so the gap
  between ``nbflow`` and ``no engine`` is what running the row's nodes through the engine costs: the per-node
  record (status, inputs, start and end times), type checks, isolation, learning whether a sync node is quick.

    python benchmarks/row_floor.py [--rows 1000] [--concurrency 50] [--rounds 9]

Prints the median wall time (efficiency ratio to the baseline, > 1: faster than it) and the main thread's CPU
per row. Session 8: ``no engine`` reaches 1.002-1.012x where ``nbflow`` is at 0.979-0.984x (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import batch_throughput as bt

from nbflow._core.states import NodeStatus, RunStatus
from nbflow._flow.flow import Flow

_ENGINE = Flow._row_executor
_DONE, _RUN_DONE = NodeStatus.SUCCEEDED, RunStatus.SUCCEEDED


def _no_engine(self: Flow, graph: Any) -> Any:
    """A row executor running the benchmark flow's three nodes by hand (what a row costs without the engine)."""
    prepare, call, score = (graph.nodes[n].spec.func for n in ("prepare", "call", "score"))

    async def row(plan: Any, run: Any, inputs: dict[str, Any]) -> Any:
        run.started_at = time.time()
        a = prepare(inputs["x"])
        b = await call(a)
        c = score(b)
        cols = run._c
        cols.output[:] = [a, b, c]
        cols.status[:] = [_DONE, _DONE, _DONE]
        run.status = _RUN_DONE
        run.finished_at = time.time()
        return run

    return row


async def measure(n: int, concurrency: int, rounds: int) -> dict[str, dict[str, float]]:
    flow = bt.make_sync_flow()
    rows = [{"x": i} for i in range(n)]
    wall: dict[str, list[float]] = {"baseline": [], "nbflow": [], "no engine": []}
    cpu: dict[str, list[float]] = {k: [] for k in wall}

    async def one(label: str) -> None:
        w0, c0 = time.perf_counter(), time.thread_time()
        if label == "baseline":
            await bt.baseline_sync(rows, concurrency)
        else:
            Flow._row_executor = _ENGINE if label == "nbflow" else _no_engine  # type: ignore[method-assign]
            try:
                frame = await flow.abatch(rows, concurrency=concurrency, progress=False)
            finally:
                Flow._row_executor = _ENGINE  # type: ignore[method-assign]
            assert (frame["status"] == "succeeded").all() and frame["score"].tolist() == [2 * x + 1 for x in range(n)]
        wall[label].append(time.perf_counter() - w0)
        cpu[label].append(time.thread_time() - c0)

    for label in wall:  # warm-up
        await one(label)
    for label in wall:
        wall[label].clear()
        cpu[label].clear()
    order = list(wall)
    rnd = random.Random(1)
    for _ in range(rounds):
        rnd.shuffle(order)
        for label in order:
            await one(label)
    base = statistics.median(wall["baseline"])
    return {
        label: {
            "wall_ms": statistics.median(wall[label]) * 1e3,
            "ratio": base / statistics.median(wall[label]),
            "cpu_us_per_row": statistics.median(cpu[label]) / n * 1e6,
        }
        for label in wall
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    result = asyncio.run(measure(args.rows, args.concurrency, args.rounds))
    print(
        f"sync-node batch, {args.rows} rows at {args.concurrency} in flight, 20 ms model call; "
        f"median of {args.rounds} interleaved rounds; load {os.getloadavg()[0]:.2f}"
    )
    print("               wall      vs baseline   main-thread CPU per row")
    for label, r in result.items():
        print(f"  {label:10s} {r['wall_ms']:7.1f} ms   {r['ratio']:.3f}x       {r['cpu_us_per_row']:6.1f} µs")


if __name__ == "__main__":
    main()
