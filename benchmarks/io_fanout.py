"""I/O fan-out: how close a flow of N concurrent waits comes to the ideal wall time, against ``asyncio.gather``.

The DAG: a source, N nodes that each wait ``--wait`` seconds (20 ms: a model call's shape) and a sink
taking all N. Two shapes, reported apart:

- ``async``: each node is ``async def`` and ``await asyncio.sleep(wait)``; the hand-written baseline is
  the same DAG as ``asyncio.gather`` of coroutines. Ideal wall time: one wait.
- ``sync``: each node is a plain ``def`` calling ``time.sleep(wait)``, which nbflow runs in its worker
  threads; the baseline is ``asyncio.gather`` of ``loop.run_in_executor`` on a pool of as many threads as
  nbflow's cap (anyio's default limiter, 40). Ideal: one wait per wave of 40.

Efficiency = ideal wall time / measured wall time (1.0: the nodes cost nothing). nbflow and the baseline
are sampled in interleaved rounds in the same process, after warm-up runs (a sync node without
``thread=`` learns it is slow on its first calls); each figure is the median of the rounds.

    python benchmarks/io_fanout.py [--n 50 500] [--wait 0.02] [--repeat 41] [--shapes async sync] [--json out.json]

Prints one line per (shape, N) and a summary line of nbflow's efficiency / the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import math
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import nbflow as nf

THREADS = 40  # nbflow's worker threads are capped by anyio's default thread limiter: the baseline's pool


def _sink_source(n: int, is_async: bool) -> Callable[..., Any]:
    """The sink, with one parameter per branch (a flow wires parameters by name)."""
    names = [f"m{i}" for i in range(n)]
    ns: dict[str, Any] = {}
    kw = "async " if is_async else ""
    exec(f"{kw}def sink({', '.join(names)}):\n    return {' + '.join(names)}", ns)
    sink: Callable[..., Any] = ns["sink"]
    return sink


def async_flow(n: int, wait: float, validate: bool = True) -> nf.Flow:
    import nbflow as nf  # (here: fanout_memory.py's baseline process imports this module without nbflow)

    flow = nf.Flow(f"io_async_{n}", validate=validate)

    async def src() -> int:
        return 0

    flow.add(src, name="src")
    for i in range(n):

        async def mid(src: int) -> int:
            await asyncio.sleep(wait)
            return src + 1

        flow.add(mid, name=f"m{i}")
    flow.add(_sink_source(n, True), name="sink")
    return flow


def sync_flow(n: int, wait: float) -> nf.Flow:
    import nbflow as nf

    flow = nf.Flow(f"io_sync_{n}")

    def src() -> int:
        return 0

    flow.add(src, name="src")
    for i in range(n):

        def mid(src: int) -> int:
            time.sleep(wait)
            return src + 1

        flow.add(mid, name=f"m{i}")
    flow.add(_sink_source(n, False), name="sink")
    return flow


async def baseline_async(n: int, wait: float) -> int:
    async def src() -> int:
        return 0

    async def mid(x: int) -> int:
        await asyncio.sleep(wait)
        return x + 1

    async def sink(*xs: int) -> int:
        return sum(xs)

    s = await src()
    outs = await asyncio.gather(*(mid(s) for _ in range(n)))
    return await sink(*outs)


def baseline_sync(pool: concurrent.futures.Executor) -> Callable[[int, float], Awaitable[int]]:
    async def run(n: int, wait: float) -> int:
        def src() -> int:
            return 0

        def mid(x: int) -> int:
            time.sleep(wait)
            return x + 1

        def sink(*xs: int) -> int:
            return sum(xs)

        loop = asyncio.get_running_loop()
        s = src()
        outs = await asyncio.gather(*(loop.run_in_executor(pool, mid, s) for _ in range(n)))
        return sink(*outs)

    return run


async def measure(ns: list[int], wait: float, repeat: int, shapes: list[str]) -> list[dict[str, Any]]:
    import nbflow as nf

    pool = concurrent.futures.ThreadPoolExecutor(THREADS)
    rows = []
    for shape in shapes:
        for n in ns:
            flow = (async_flow if shape == "async" else sync_flow)(n, wait)
            flow.graph  # compile outside the timing  # noqa: B018
            base = baseline_async if shape == "async" else baseline_sync(pool)

            async def nbflow_run(flow: nf.Flow = flow, n: int = n) -> None:
                run = await flow.arun()
                assert run.status is nf.RunStatus.SUCCEEDED, run
                assert run["sink"] == n, run["sink"]

            async def base_run(base: Any = base, n: int = n) -> None:
                assert await base(n, wait) == n

            runs: dict[str, Callable[[], Awaitable[None]]] = {"baseline": base_run, "nbflow": nbflow_run}
            for _ in range(3):  # warm-up: adapters, a sync node's learned placement, the worker threads
                for fn in runs.values():
                    await fn()
            ideal = wait * (1 if shape == "async" else math.ceil(n / THREADS))
            samples: dict[str, list[float]] = {label: [] for label in runs}
            for r in range(repeat):
                order = list(runs.items()) if r % 2 == 0 else list(runs.items())[::-1]
                for label, fn in order:
                    t0 = time.perf_counter()
                    await fn()
                    samples[label].append(ideal / (time.perf_counter() - t0))
            row: dict[str, Any] = {
                "shape": shape,
                "n": n,
                "ideal_ms": ideal * 1e3,
                "baseline": statistics.median(samples["baseline"]),
                "nbflow": statistics.median(samples["nbflow"]),
                "baseline_best": max(samples["baseline"]),
                "nbflow_best": max(samples["nbflow"]),
            }
            row["ratio"] = row["nbflow"] / row["baseline"]
            rows.append(row)
    pool.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[50, 500], help="fan-out widths")
    parser.add_argument("--wait", type=float, default=0.020, help="seconds each node waits")
    parser.add_argument("--repeat", type=int, default=41, help="interleaved rounds")
    parser.add_argument("--shapes", nargs="+", choices=["async", "sync"], default=["async", "sync"])
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    rows = asyncio.run(measure(args.n, args.wait, args.repeat, args.shapes))
    print(f"load average {os.getloadavg()[0]:.2f}; efficiency = ideal / measured wall time, median of {args.repeat}")
    for r in rows:
        print(
            f"{r['shape']:>5} N={r['n']:<5} ideal {r['ideal_ms']:6.1f} ms  baseline {r['baseline']:.3f} "
            f"(best {r['baseline_best']:.3f})  nbflow {r['nbflow']:.3f} (best {r['nbflow_best']:.3f})  "
            f"nbflow/baseline {r['ratio']:.3f}"
        )
    summary = ", ".join(f"{r['shape']} N={r['n']} {r['ratio']:.2f}x" for r in rows)
    print(f"summary: nbflow efficiency / hand-written gather efficiency: {summary}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
