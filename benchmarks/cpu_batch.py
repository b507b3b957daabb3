"""CPU-bound batches: ``flow.batch`` vs a plain for-loop over the same function, in the same process.

Two nodes a data scientist writes:

- ``pure``: pure-Python arithmetic (holds the GIL): threads cannot help, worker processes can.
- ``blas``: numpy matrix products (BLAS releases the GIL and starts its own threads): 16 rows in
  flight × BLAS threads oversubscribe the cores unless the thread budget caps them.

For each: the loop's time, ``flow.batch`` with the default thread executor, and with
``executor="process"`` (the pool is warmed first: a notebook pays the start of the workers once).
speedup = loop time / batch time; the goal for the process executor is >= 0.8 × cores.

    python benchmarks/cpu_batch.py [--rows 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import nbflow as nf
from nbflow._engine.executors import cores


def pure(seed: int, n: int = 2_500_000) -> int:
    acc = seed
    for i in range(n):
        acc = (acc * 31 + i) % 1_000_003
    return acc


def blas(seed: int, size: int = 700, reps: int = 6) -> float:
    import numpy as np

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((size, size))
    for _ in range(reps):
        a = a @ a
        a /= np.abs(a).max()
    return float(a.sum())


def flow_of(func: Any, executor: str | None) -> nf.Flow:
    flow = nf.Flow(f"cpu_{func.__name__}_{executor or 'thread'}")
    flow.add(func, name="work", executor=executor)
    return flow


def timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(func: Any, rows: int) -> dict[str, float]:
    seeds = list(range(rows))
    loop_s = timed(lambda: [func(s) for s in seeds])
    out = {"loop_s": loop_s}
    for executor in (None, "process"):
        flow = flow_of(func, executor)
        flow.batch([{"seed": 0}], progress=False)  # warm: worker processes started, imports paid
        df: Any = None

        def go(flow: nf.Flow = flow) -> None:
            nonlocal df
            df = flow.batch([{"seed": s} for s in seeds], progress=False)

        batch_s = timed(go)
        assert (df["status"] == "succeeded").all(), df
        key = executor or "thread"
        out[f"{key}_s"] = batch_s
        out[f"{key}_speedup"] = loop_s / batch_s
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    n = cores()
    print(f"{n} cores, {args.rows} rows, batch concurrency 16 (the default); goal: process speedup >= {0.8 * n:.1f}")
    results = {}
    for func in (pure, blas):
        r = results[func.__name__] = measure(func, args.rows)
        print(
            f"{func.__name__:>5}: loop {r['loop_s']:.2f}s | batch, threads {r['thread_s']:.2f}s "
            f"({r['thread_speedup']:.2f}x) | batch, processes {r['process_s']:.2f}s ({r['process_speedup']:.2f}x)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": n, "rows": args.rows, "pid": os.getpid(), **results}, f, indent=2)


if __name__ == "__main__":
    main()
