"""Per-node engine overhead: nbflow against a hand-written asyncio DAG, in the same process.

Shapes: a 1,000-node chain and a 1,000-wide fan-out/fan-in. Nodes are trivial async functions
(``x + 1``), so what is measured is the cost of scheduling, validation, records and events.
The baseline is what one would write by hand: one task per node awaiting its upstream tasks.

    python benchmarks/engine_overhead.py [--nodes 1000] [--repeat 7] [--clock wall|cpu] [--json out.json]

Reports the median µs per node and nbflow/baseline ratios (validation on, the default; and off). The
three are sampled in interleaved rounds, and each ratio is the median of the rounds' own ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nbflow as nf

# --- the hand-written baseline ------------------------------------------------------------------


async def _inc(x: int) -> int:
    return x + 1


async def baseline_chain(n: int) -> int:
    async def step(up: asyncio.Task[int] | None) -> int:
        return await _inc(await up if up is not None else 0)

    prev: asyncio.Task[int] | None = None
    tasks = []
    for _ in range(n):
        prev = asyncio.ensure_future(step(prev))
        tasks.append(prev)
    await asyncio.gather(*tasks)
    assert prev is not None
    return prev.result()


async def baseline_fan(n: int) -> int:
    async def src() -> int:
        return 0

    async def mid(up: asyncio.Task[int]) -> int:
        return await _inc(await up)

    async def sink(ups: list[asyncio.Task[int]]) -> int:
        return sum([await u for u in ups])

    s = asyncio.ensure_future(src())
    mids = [asyncio.ensure_future(mid(s)) for _ in range(n - 2)]
    return await asyncio.ensure_future(sink(mids))


# --- the same shapes in nbflow ------------------------------------------------------------------


def chain_flow(n: int, validate: bool) -> nf.Flow:
    flow = nf.Flow("chain", validate=validate)

    async def first() -> int:
        return 0

    flow.add(first, name="n0")
    for i in range(1, n):

        async def step(x: int) -> int:
            return x + 1

        flow.add(step, name=f"n{i}", inputs={"x": f"n{i - 1}"})
    return flow


def fan_flow(n: int, validate: bool) -> nf.Flow:
    flow = nf.Flow("fan", validate=validate)

    async def src() -> int:
        return 0

    flow.add(src, name="src")
    names = []
    for i in range(n - 2):

        async def mid(src: int) -> int:
            return src + 1

        flow.add(mid, name=f"m{i}")
        names.append(f"m{i}")

    # The sink takes every branch: build a function with one parameter per branch.
    ns: dict[str, Any] = {}
    exec(f"async def sink({', '.join(f'{m}: int' for m in names)}) -> int:\n    return {' + '.join(names)}", ns)
    flow.add(ns["sink"], name="sink")
    return flow


CLOCK = time.perf_counter  # --clock cpu: time.process_time (a shared machine: time descheduled is not cost)


async def _sample(fn: Callable[[], Awaitable[Any]]) -> float:
    t0 = CLOCK()
    await fn()
    return CLOCK() - t0


async def measure(n: int, repeat: int) -> dict[str, dict[str, float]]:
    """Rounds of (baseline, nbflow, nbflow without validation), interleaved: on a shared machine the
    load changes between rounds, and a round's three samples see the same load. Each figure is the
    median over the rounds; each ratio is the median of the rounds' own ratios."""
    results: dict[str, dict[str, float]] = {}
    for shape, base, make in (("chain", baseline_chain, chain_flow), ("fan-out/fan-in", baseline_fan, fan_flow)):
        runs: dict[str, Callable[[], Awaitable[Any]]] = {"baseline_us": lambda b=base: b(n)}  # type: ignore[misc]
        for label, validate in (("nbflow_us", True), ("nbflow_novalidate_us", False)):
            flow = make(n, validate)
            flow.graph  # compile outside the timing; runs reuse it  # noqa: B018

            async def go(flow: nf.Flow = flow) -> None:
                run = await flow.arun()
                assert run.status is nf.RunStatus.SUCCEEDED, run

            runs[label] = go
        for fn in runs.values():
            await fn()  # warm-up: caches, compiled graph, adapters
        samples: dict[str, list[float]] = {label: [] for label in runs}
        for _ in range(repeat):
            for label, fn in runs.items():
                # One untimed run first: whatever runs right after another shape finds the CPU caches
                # full of that one's objects (measured: ~20% slower); each sample is a warm run.
                await fn()
                samples[label].append(await _sample(fn) / n * 1e6)
        row = {label: statistics.median(xs) for label, xs in samples.items()}
        base_s = samples["baseline_us"]
        row["ratio"] = statistics.median(a / b for a, b in zip(samples["nbflow_us"], base_s, strict=True))
        row["ratio_novalidate"] = statistics.median(
            a / b for a, b in zip(samples["nbflow_novalidate_us"], base_s, strict=True)
        )
        results[shape] = row
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: process CPU time, steadier on a loaded machine (every sample is one whole run either way)",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    results = asyncio.run(measure(args.nodes, args.repeat))
    print(
        f"engine overhead, {args.nodes} nodes, median of {args.repeat} interleaved rounds (µs per node, {args.clock} clock)"
    )
    print(f"{'shape':<16}{'baseline':>10}{'nbflow':>10}{'ratio':>8}{'no-valid.':>11}{'ratio':>8}")
    for shape, r in results.items():
        print(
            f"{shape:<16}{r['baseline_us']:>10.2f}{r['nbflow_us']:>10.2f}{r['ratio']:>7.2f}x"
            f"{r['nbflow_novalidate_us']:>11.2f}{r['ratio_novalidate']:>7.2f}x"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
