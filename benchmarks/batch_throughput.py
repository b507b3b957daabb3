"""Batch throughput: rows through a 3-node flow whose middle node awaits a 20 ms sleep.

Compares ``flow.abatch`` with a hand-written asyncio + semaphore baseline in the same process:

    efficiency = ideal / actual,   ideal = ceil(rows / concurrency) × 20 ms

and reports peak memory (tracemalloc) of ``flow.abatch`` at a few row counts.

    python benchmarks/batch_throughput.py [--repeat 3] [--json out.json]
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
CASES = [(2_000, 100), (10_000, 256)]
MEMORY_ROWS = [1_000, 5_000, 10_000, 20_000]


def make_flow() -> nf.Flow:
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


async def nbflow_batch(flow: nf.Flow, rows: list[dict[str, int]], concurrency: int) -> Any:
    return await flow.abatch(rows, concurrency=concurrency, progress=False)


async def timed(coro: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = await coro
    return time.perf_counter() - t0, out


async def throughput(repeat: int) -> list[dict[str, Any]]:
    flow = make_flow()
    _ = flow.graph  # compile outside the timing, as in a notebook that already ran the flow
    results = []
    for rows_n, conc in CASES:
        rows = [{"x": i} for i in range(rows_n)]
        ideal = math.ceil(rows_n / conc) * SLEEP
        base_t, nb_t = [], []
        for _ in range(repeat):  # interleaved, so machine noise hits both alike
            gc.collect()
            t, out = await timed(baseline(rows, conc))
            assert out[-1] == (rows_n - 1 + 1) * 2 - 1
            base_t.append(t)
            gc.collect()
            t, frame = await timed(nbflow_batch(flow, rows, conc))
            assert (frame["status"] == "succeeded").all() and frame["score"].iloc[-1] == out[-1]
            nb_t.append(t)
        b, n = statistics.median(base_t), statistics.median(nb_t)
        results.append(
            {
                "rows": rows_n,
                "concurrency": conc,
                "ideal_s": ideal,
                "baseline_s": b,
                "nbflow_s": n,
                "baseline_eff": ideal / b,
                "nbflow_eff": ideal / n,
                "ratio": (ideal / n) / (ideal / b),
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
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    tp = asyncio.run(throughput(args.repeat))
    mem = asyncio.run(memory())
    print(f"batch throughput: 3-node flow, middle node sleeps {SLEEP * 1000:.0f} ms; median of {args.repeat}")
    print(
        f"{'rows':>7} {'conc':>5} {'ideal s':>8} {'base s':>8} {'nbflow s':>9} {'base eff':>9} {'nbflow eff':>11} {'nb/base':>8}"
    )
    for r in tp:
        print(
            f"{r['rows']:>7} {r['concurrency']:>5} {r['ideal_s']:>8.3f} {r['baseline_s']:>8.3f} {r['nbflow_s']:>9.3f} "
            f"{r['baseline_eff']:>9.3f} {r['nbflow_eff']:>11.3f} {r['ratio']:>8.3f}"
        )
    print()
    print("peak memory of flow.abatch (tracemalloc, concurrency=256)")
    print(f"{'rows':>7} {'peak MiB':>9} {'bytes/row':>10}")
    for m in mem:
        print(f"{m['rows']:>7} {m['peak_mib']:>9.2f} {m['bytes_per_row']:>10.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"throughput": tp, "memory": mem}, f, indent=2)


if __name__ == "__main__":
    main()
