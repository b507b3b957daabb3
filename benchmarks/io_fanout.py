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
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import nbflow as nf

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # batch_ab: ``--before``

THREADS = 40  # nbflow's worker threads are capped by anyio's default thread limiter: the baseline's pool


def _sink_source(n: int, is_async: bool) -> Callable[..., Any]:
    """The sink, with one parameter per branch (a flow wires parameters by name)."""
    names = [f"m{i}" for i in range(n)]
    ns: dict[str, Any] = {}
    kw = "async " if is_async else ""
    exec(f"{kw}def sink({', '.join(names)}):\n    return {' + '.join(names)}", ns)
    sink: Callable[..., Any] = ns["sink"]
    return sink


def async_flow(n: int, wait: float, validate: bool = True, lib: Any = None) -> nf.Flow:
    nf = lib
    if nf is None:  # (here: fanout_memory.py's baseline process imports this module without nbflow)
        import nbflow as nf

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


def sync_flow(n: int, wait: float, lib: Any = None) -> nf.Flow:
    nf = lib
    if nf is None:
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


async def _floor(n: int, mid: Callable[[int], Awaitable[int]]) -> int:
    """What a DAG engine cannot do without for a fan-out of ``n`` branches of ``mid``: a task per branch that
    keeps the branch's state record (status, start and end times, output) and counts down what its dependent
    waits for, the sink started when the count reaches 0 (no gather: the engine knows its dependents)."""
    loop = asyncio.get_running_loop()
    perf = time.perf_counter
    status = [0] * n  # 0 pending, 1 running, 2 succeeded
    started = [0.0] * n
    finished = [0.0] * n
    output: list[Any] = [None] * n
    left = [n]
    done = loop.create_future()

    async def branch(i: int, x: int) -> None:
        status[i] = 1
        started[i] = perf()
        try:
            out = await mid(x)
        except BaseException:
            status[i] = 3
            raise
        finished[i] = perf()
        output[i] = out
        status[i] = 2
        left[0] -= 1
        if not left[0]:
            done.set_result(None)

    s = 0  # the source
    tasks = [loop.create_task(branch(i, s)) for i in range(n)]  # (kept: cancelling the run cancels them)
    await done
    del tasks
    return sum(output)


async def floor_async(n: int, wait: float) -> int:
    async def mid(x: int) -> int:
        await asyncio.sleep(wait)
        return x + 1

    return await _floor(n, mid)


def floor_sync(pool: concurrent.futures.Executor) -> Callable[[int, float], Awaitable[int]]:
    async def run(n: int, wait: float) -> int:
        def mid(x: int) -> int:
            time.sleep(wait)
            return x + 1

        loop = asyncio.get_running_loop()

        def call(x: int) -> Awaitable[int]:
            return loop.run_in_executor(pool, mid, x)

        return await _floor(n, call)

    return run


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


async def measure(
    ns: list[int], wait: float, repeat: int, shapes: list[str], before: Any = None
) -> list[dict[str, Any]]:
    import nbflow as nf

    pool = concurrent.futures.ThreadPoolExecutor(THREADS)
    rows = []
    libs = {"nbflow": nf} if before is None else {"nbflow": nf, "before": before}
    for shape in shapes:
        for n in ns:
            make = async_flow if shape == "async" else sync_flow
            runs: dict[str, Callable[[], Awaitable[None]]] = {}
            for label, what in (
                ("baseline", baseline_async if shape == "async" else baseline_sync(pool)),
                ("floor", floor_async if shape == "async" else floor_sync(pool)),
            ):

                async def hand_run(what: Any = what, n: int = n) -> None:
                    assert await what(n, wait) == n

                runs[label] = hand_run
            for label, lib in libs.items():
                flow = make(n, wait, lib=lib)
                flow.graph  # compile outside the timing  # noqa: B018

                async def nbflow_run(flow: nf.Flow = flow, n: int = n, lib: Any = lib) -> None:
                    run = await flow.arun()
                    assert run.status is lib.RunStatus.SUCCEEDED, run
                    assert run["sink"] == n, run["sink"]

                runs[label] = nbflow_run
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
            row: dict[str, Any] = {"shape": shape, "n": n, "ideal_ms": ideal * 1e3}
            for label, values in samples.items():
                row[label] = statistics.median(values)
                row[f"{label}_best"] = max(values)
                # Each round's own ratio, then their median: rounds share the machine's load.
                row[f"{label}_ratio"] = statistics.median(
                    v / b for v, b in zip(values, samples["baseline"], strict=True)
                )
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
    parser.add_argument("--before", help="also measure nbflow at this git revision, in the same rounds")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        before = None
        if args.before:
            from batch_ab import import_before  # (its checkout of a revision as ``nbflow_before``)

            before = import_before(args.before, pathlib.Path(tmp))
        rows = asyncio.run(measure(args.n, args.wait, args.repeat, args.shapes, before))
    print(f"load average {os.getloadavg()[0]:.2f}; efficiency = ideal / measured wall time, median of {args.repeat}")
    labels = ["floor", "nbflow"] + (["before"] if args.before else [])
    for r in rows:
        parts = "  ".join(
            f"{label} {r[label]:.3f} (best {r[label + '_best']:.3f}, /baseline {r[label + '_ratio']:.3f})"
            for label in labels
        )
        print(
            f"{r['shape']:>5} N={r['n']:<5} ideal {r['ideal_ms']:6.1f} ms  baseline {r['baseline']:.3f} "
            f"(best {r['baseline_best']:.3f})  {parts}"
        )
    summary = ", ".join(f"{r['shape']} N={r['n']} {r['ratio']:.2f}x" for r in rows)
    print(f"summary: nbflow efficiency / hand-written gather efficiency: {summary}")
    floor = ", ".join(f"{r['shape']} N={r['n']} {r['floor'] / r['baseline']:.2f}x" for r in rows)
    print(f"floor (a task and a state record per branch, by hand) / gather: {floor}")
    if args.before:
        ab = ", ".join(f"{r['shape']} N={r['n']} {r['nbflow'] / r['before']:.2f}x" for r in rows)
        print(f"nbflow / before ({args.before}): {ab}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
