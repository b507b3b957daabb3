"""Building and compiling a flow of N nodes, and reporting a cycle, against hand-written baselines.

- build: ``flow.add`` of an N-node chain of plain functions. Baseline: the hand-written asyncio
  DAG built the same way (one function and one task per node, each waiting on its upstream task;
  the tasks run after the timing).
- compile: ``flow.graph`` (wiring, cycle check, topological order, validators). Baseline: the
  same dependencies put in order by the standard library (``graphlib.TopologicalSorter``).
- cycle: an N-node chain whose first node depends on its last: the time until ``CycleError``
  (with the path) is raised. Baseline: ``graphlib``'s own ``CycleError``. Goal: < 0.2 s at 30,000.

    python benchmarks/build_compile.py [--sizes 1000 10000 100000] [--cycle 10000 30000 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import graphlib
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import nbflow as nf


def build_flow(n: int, cyclic: bool = False) -> nf.Flow:
    flow = nf.Flow("chain")

    def first(x: int) -> int:
        return x

    flow.add(first, name="n0", inputs={"x": f"n{n - 1}"} if cyclic else None)
    for i in range(1, n):

        def step(x: int) -> int:
            return x + 1

        flow.add(step, name=f"n{i}", inputs={"x": f"n{i - 1}"})
    return flow


async def baseline_build(n: int) -> list[asyncio.Task[int]]:
    """The hand-written DAG: a function and a task per node, each awaiting its upstream's task."""

    async def first() -> int:
        return 0

    prev: asyncio.Task[int] = asyncio.ensure_future(first())
    tasks = [prev]
    for _ in range(1, n):

        async def step(up: asyncio.Task[int]) -> int:
            return await up + 1

        prev = asyncio.ensure_future(step(prev))
        tasks.append(prev)
    return tasks


def deps_of(n: int, cyclic: bool = False) -> dict[str, tuple[str, ...]]:
    deps = {f"n{i}": (f"n{i - 1}",) for i in range(1, n)}
    deps["n0"] = (f"n{n - 1}",) if cyclic else ()
    return deps


def _median(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure_build(n: int, repeat: int) -> dict[str, float]:
    loop = asyncio.new_event_loop()
    base, nb = [], []
    try:
        for _ in range(repeat):  # interleaved: machine noise hits both alike
            gc.collect()
            t0 = time.perf_counter()
            tasks = loop.run_until_complete(baseline_build(n))
            base.append(time.perf_counter() - t0)
            loop.run_until_complete(asyncio.gather(*tasks))
            gc.collect()
            t0 = time.perf_counter()
            build_flow(n)
            nb.append(time.perf_counter() - t0)
    finally:
        loop.close()
    b, m = statistics.median(base), statistics.median(nb)
    return {"nodes": n, "baseline_us": b / n * 1e6, "nbflow_us": m / n * 1e6, "ratio": m / b}


def measure_compile(n: int, repeat: int) -> dict[str, float]:
    deps = deps_of(n)
    flows = [build_flow(n) for _ in range(repeat)]
    base, nb = [], []
    for flow in flows:
        gc.collect()
        t0 = time.perf_counter()
        order = list(graphlib.TopologicalSorter(deps).static_order())
        base.append(time.perf_counter() - t0)
        assert len(order) == n
        gc.collect()
        t0 = time.perf_counter()
        flow.graph  # noqa: B018
        nb.append(time.perf_counter() - t0)
    b, m = statistics.median(base), statistics.median(nb)
    return {"nodes": n, "baseline_us": b / n * 1e6, "nbflow_us": m / n * 1e6, "ratio": m / b}


def measure_cycle(n: int, repeat: int) -> dict[str, float]:
    deps = deps_of(n, cyclic=True)
    flows = [build_flow(n, cyclic=True) for _ in range(repeat)]
    base, nb = [], []
    for flow in flows:
        gc.collect()
        t0 = time.perf_counter()
        try:
            list(graphlib.TopologicalSorter(deps).static_order())
        except graphlib.CycleError:
            pass
        base.append(time.perf_counter() - t0)
        gc.collect()
        t0 = time.perf_counter()
        try:
            flow.graph  # noqa: B018
        except nf.CycleError as exc:
            assert len(exc.cycle) == n + 1
        else:
            raise AssertionError("no CycleError")
        nb.append(time.perf_counter() - t0)
    b, m = statistics.median(base), statistics.median(nb)
    return {"nodes": n, "baseline_s": b, "nbflow_s": m, "ratio": m / b}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--cycle", type=int, nargs="+", default=[30_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    build_flow(50).graph  # noqa: B018  (imports and caches outside the timing)
    out: dict[str, Any] = {"build": [], "compile": [], "cycle": []}
    print(f"build and compile, median of {args.repeat} (µs per node)")
    print(f"{'what':<8} {'nodes':>7} {'baseline':>9} {'nbflow':>9} {'ratio':>7}")
    for n in args.sizes:
        rep = args.repeat if n <= 10_000 else max(1, args.repeat // 2)
        for what, fn in (("build", measure_build), ("compile", measure_compile)):
            r = fn(n, rep)
            out[what].append(r)
            print(f"{what:<8} {n:>7} {r['baseline_us']:>9.2f} {r['nbflow_us']:>9.2f} {r['ratio']:>6.2f}x")
    out["cycle"] = []
    for n in args.cycle:
        c = measure_cycle(n, args.repeat)
        out["cycle"].append(c)
        print(
            f"cycle    {n:>7} graphlib {c['baseline_s'] * 1e3:.1f} ms, nbflow {c['nbflow_s'] * 1e3:.1f} ms "
            f"({c['ratio']:.2f}x, {c['nbflow_s'] / n * 1e6:.2f} µs per node; goal < 200 ms at 30,000)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
