"""Batch throughput: rows through a 3-node flow whose middle node awaits a 20 ms sleep.

Two shapes: every node async, and ``prepare``/``score`` as plain ``def`` functions (as users
write them; nbflow decides per node whether to run them inline or in a worker thread). Compares
``flow.abatch`` with a hand-written asyncio + semaphore baseline (the same functions, the sync
ones called directly) in the same process:

    efficiency = ideal / actual,   ideal = ceil(rows / concurrency) × 20 ms

and reports peak memory (tracemalloc) of ``flow.abatch`` at a few row counts.

    python benchmarks/batch_throughput.py [--repeat 3] [--shape async|sync|both] [--no-memory] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import statistics
import time
import tracemalloc
from typing import Any

import nbflow as nf

SLEEP = 0.020
CASES = {
    "async": [(2_000, 100), (10_000, 256)],
    "sync": [(1_000, 50), (2_500, 250), (10_000, 250)],
}
MEMORY_ROWS = [1_000, 5_000, 10_000, 20_000]


def make_flow(shape: str = "async") -> nf.Flow:
    if shape == "sync":
        return make_sync_flow()
    flow = nf.Flow("bench")

    @flow.node
    async def prepare(x: int) -> int:
        return x + 1

    @flow.node
    async def call(prepare: int) -> int:
        await asyncio.sleep(SLEEP)
        return prepare * 2

    @flow.node
    async def score(call: int) -> int:
        return call - 1

    return flow


def make_sync_flow(nbflow: Any = nf) -> nf.Flow:
    """``nbflow``: the package to build it with (``batch_ab.py`` passes an older tree's)."""
    flow = nbflow.Flow("bench_sync")

    @flow.node
    def prepare(x: int) -> int:
        return x + 1

    @flow.node
    async def call(prepare: int) -> int:
        await asyncio.sleep(SLEEP)
        return prepare * 2

    @flow.node
    def score(call: int) -> int:
        return call - 1

    return flow


# --- the hand-written baseline ---------------------------------------------------------------------


async def baseline(rows: list[dict[str, int]], concurrency: int) -> list[int]:
    """What one writes by hand: a semaphore, one task per row, three awaited steps."""

    async def prepare(x: int) -> int:
        return x + 1

    async def call(p: int) -> int:
        await asyncio.sleep(SLEEP)
        return p * 2

    async def score(c: int) -> int:
        return c - 1

    sem = asyncio.Semaphore(concurrency)

    async def one(row: dict[str, int]) -> int:
        async with sem:
            return await score(await call(await prepare(row["x"])))

    return await asyncio.gather(*(one(r) for r in rows))


async def baseline_sync(rows: list[dict[str, int]], concurrency: int) -> list[int]:
    """The same by hand with ``prepare``/``score`` as plain functions, called directly on the loop."""

    def prepare(x: int) -> int:
        return x + 1

    async def call(p: int) -> int:
        await asyncio.sleep(SLEEP)
        return p * 2

    def score(c: int) -> int:
        return c - 1

    sem = asyncio.Semaphore(concurrency)

    async def one(row: dict[str, int]) -> int:
        async with sem:
            return score(await call(prepare(row["x"])))

    return await asyncio.gather(*(one(r) for r in rows))


async def nbflow_batch(flow: nf.Flow, rows: list[dict[str, int]], concurrency: int) -> Any:
    return await flow.abatch(rows, concurrency=concurrency, progress=False)


async def timed(coro: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = await coro
    return time.perf_counter() - t0, out


async def throughput(repeat: int, shape: str = "async") -> list[dict[str, Any]]:
    flow = make_flow(shape)
    base_fn = baseline_sync if shape == "sync" else baseline
    _ = flow.graph  # compile outside the timing, as in a notebook that already ran the flow
    results = []
    for rows_n, conc in CASES[shape]:
        rows = [{"x": i} for i in range(rows_n)]
        ideal = math.ceil(rows_n / conc) * SLEEP
        base_t, nb_t, base_cpu, nb_cpu = [], [], [], []
        for _ in range(repeat):  # interleaved, so machine noise hits both alike
            gc.collect()
            c0 = time.process_time()
            t, out = await timed(base_fn(rows, conc))
            base_cpu.append(time.process_time() - c0)
            assert out[-1] == (rows_n - 1 + 1) * 2 - 1
            base_t.append(t)
            gc.collect()
            c0 = time.process_time()
            t, frame = await timed(nbflow_batch(flow, rows, conc))
            nb_cpu.append(time.process_time() - c0)
            assert (frame["status"] == "succeeded").all() and frame["score"].iloc[-1] == out[-1]
            nb_t.append(t)
        b, n = statistics.median(base_t), statistics.median(nb_t)
        results.append(
            {
                "shape": shape,
                "rows": rows_n,
                "concurrency": conc,
                "ideal_s": ideal,
                "baseline_s": b,
                "nbflow_s": n,
                "baseline_eff": ideal / b,
                "nbflow_eff": ideal / n,
                "ratio": (ideal / n) / (ideal / b),
                "cpu_ratio": statistics.median(nb_cpu) / max(statistics.median(base_cpu), 1e-9),
            }
        )
    return results


async def memory() -> list[dict[str, Any]]:
    flow = make_flow()
    _ = flow.graph
    out = []
    for rows_n in MEMORY_ROWS:
        rows = [{"x": i} for i in range(rows_n)]
        gc.collect()
        tracemalloc.start()
        frame = await nbflow_batch(flow, rows, 256)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(frame) == rows_n
        del frame
        out.append({"rows": rows_n, "peak_mib": peak / 2**20, "bytes_per_row": peak / rows_n})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", choices=["async", "sync", "both"], default="both")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory figures")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    shapes = ["async", "sync"] if args.shape == "both" else [args.shape]
    tp = [r for shape in shapes for r in asyncio.run(throughput(args.repeat, shape))]
    mem = [] if args.no_memory else asyncio.run(memory())
    print(f"batch throughput: 3-node flow, middle node sleeps {SLEEP * 1000:.0f} ms; median of {args.repeat}")
    print("(sync: prepare and score are plain def functions; cpu = process CPU time, nbflow / baseline)")
    print(
        f"{'shape':>6} {'rows':>7} {'conc':>5} {'ideal s':>8} {'base s':>8} {'nbflow s':>9} {'base eff':>9} "
        f"{'nbflow eff':>11} {'nb/base':>8} {'cpu':>6}"
    )
    for r in tp:
        print(
            f"{r['shape']:>6} {r['rows']:>7} {r['concurrency']:>5} {r['ideal_s']:>8.3f} {r['baseline_s']:>8.3f} "
            f"{r['nbflow_s']:>9.3f} {r['baseline_eff']:>9.3f} {r['nbflow_eff']:>11.3f} {r['ratio']:>8.3f} "
            f"{r['cpu_ratio']:>6.2f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"throughput": tp, "memory": mem}, f, indent=2)
    if not mem:
        return
    print()
    print("peak memory of flow.abatch (tracemalloc, concurrency=256)")
    print(f"{'rows':>7} {'peak MiB':>9} {'bytes/row':>10}")
    for m in mem:
        print(f"{m['rows']:>7} {m['peak_mib']:>9.2f} {m['bytes_per_row']:>10.0f}")


if __name__ == "__main__":
    main()
