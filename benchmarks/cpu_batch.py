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


def measure(func: Any, rows: int, rounds: int = 3) -> dict[str, float]:
    """Loop, thread batch and process batch timed in turn, ``rounds`` times (the machine is shared:
    interleaving keeps a burst of other work from landing on one side only); the best of each."""
    seeds = list(range(rows))
    flows = {executor or "thread": flow_of(func, executor) for executor in (None, "process")}
    for flow in flows.values():
        # Warm: one row per core, so every worker process is started and has imported what the node
        # imports (a notebook pays this once per kernel).
        flow.batch([{"seed": s} for s in range(cores())], progress=False)
    times: dict[str, list[float]] = {"loop": [], "thread": [], "process": []}
    for _ in range(rounds):
        times["loop"].append(timed(lambda: [func(s) for s in seeds]))
        for key, flow in flows.items():
            df: Any = None

            def go(flow: nf.Flow = flow) -> None:
                nonlocal df
                df = flow.batch([{"seed": s} for s in seeds], progress=False)

            times[key].append(timed(go))
            assert (df["status"] == "succeeded").all(), df
    out = {f"{k}_s": min(v) for k, v in times.items()}
    for key in ("thread", "process"):
        out[f"{key}_speedup"] = out["loop_s"] / out[f"{key}_s"]
        # per round (loop and batch measured back to back): the spread shows how much the load moved
        ratios = [lo / b for lo, b in zip(times["loop"], times[key], strict=True)]
        out[f"{key}_speedup_rounds"] = ratios  # type: ignore[assignment]
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
            f" | per round: processes {', '.join(f'{x:.2f}x' for x in r['process_speedup_rounds'])}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": n, "rows": args.rows, "pid": os.getpid(), **results}, f, indent=2)


if __name__ == "__main__":
    main()
