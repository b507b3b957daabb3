"""What resources cost: the per-node lookup, and nothing for flows without resources.

Same process, same run:
* a 1,000-node chain of trivial async nodes, without resources (the engine's fast path) and with
  every node taking one resource; the difference per node is the resource lookup in a run;
* the lookup alone, best of several blocks of calls: ``ready_kwargs`` (what the engine calls per
  node: the node's kwargs copied plus each resource read from the run's table) against a hand-written
  ``dict.copy()`` + one dict set; and ``provide`` (a run's first lookup: the instance already built
  on this loop) against awaiting a coroutine that returns a dict entry.

    python benchmarks/resources.py [--nodes 1000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import nbflow as nf
from nbflow._engine.resources import provide, ready_kwargs, resource_kwargs
from nbflow._record.run import Run


def chain(n: int, with_resource: bool) -> nf.Flow:
    flow = nf.Flow(f"chain_{with_resource}", validate=False)
    if with_resource:

        @flow.resource
        def llm() -> object:
            return object()

    for i in range(n):
        if with_resource:

            async def f(x: int, llm: object) -> int:
                return x + 1
        else:

            async def f(x: int) -> int:
                return x + 1

        flow.add(f, name=f"n{i}", inputs={"x": f"n{i - 1}" if i else "x0"})
    return flow


async def time_runs(flow: nf.Flow, repeat: int) -> float:
    await flow.arun(x0=0, show=False)  # warm: graph compiled, resource built
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run = await flow.arun(x0=0, show=False)
        times.append(time.perf_counter() - t0)
        assert run.status is nf.RunStatus.SUCCEEDED
    return statistics.median(times)


def _interleaved(fns: list, calls: int, repeat: int) -> list[float]:
    """Seconds per call of each ``fn(calls)``: the fastest of ``repeat`` blocks, the functions' blocks
    interleaved so that load on a shared machine hits all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            out = fn(calls)
            if asyncio.iscoroutine(out):
                raise TypeError("sync functions only")
            best[i] = min(best[i], (time.perf_counter() - t0) / calls)
    return best


async def _ainterleaved(fns: list, calls: int, repeat: int) -> list[float]:
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            await fn(calls)
            best[i] = min(best[i], (time.perf_counter() - t0) / calls)
    return best


async def lookup(flow: nf.Flow, calls: int, repeat: int) -> tuple[float, float, float, float]:
    bound = flow.graph.resources["llm"]
    inputs = {"x0": 0}
    await provide(bound, inputs)
    table = {"llm": object()}

    async def baseline(name: str) -> object:
        return table[name]

    async def many_baseline(n: int) -> None:
        for _ in range(n):
            await baseline("llm")

    async def many_provide(n: int) -> None:
        for _ in range(n):
            await provide(bound, inputs)

    base, ours = await _ainterleaved([many_baseline, many_provide], calls, repeat)
    used = (("llm", bound),)
    kwargs = {"x": 1}
    run = Run(flow.name, "bench", inputs, [])
    await resource_kwargs(kwargs, used, run)  # a run's first node resolves it; the others read the table
    assert ready_kwargs(kwargs, used, run) is not None

    def many_ready(n: int) -> None:
        for _ in range(n):
            ready_kwargs(kwargs, used, run)

    def many_copy(n: int) -> None:  # the hand-written baseline: the node's kwargs plus one entry
        for _ in range(n):
            d = kwargs.copy()
            d["llm"] = table["llm"]

    copy, fast = _interleaved([many_copy, many_ready], calls, repeat)
    return ours, base, fast, copy


async def main(nodes: int, repeat: int) -> None:
    plain = chain(nodes, False)
    used = chain(nodes, True)
    t_plain = await time_runs(plain, repeat)
    t_used = await time_runs(used, repeat)
    t_plain2 = await time_runs(plain, repeat)  # again: how much runs of the same flow vary
    ours, base, fast, copy = await lookup(used, 100_000, repeat)
    print(f"chain of {nodes} nodes, median of {repeat} runs")
    print(f"  no resources      : {t_plain / nodes * 1e6:6.2f} µs/node (again: {t_plain2 / nodes * 1e6:.2f})")
    print(f"  one resource/node : {t_used / nodes * 1e6:6.2f} µs/node")
    print(f"  difference        : {(t_used - t_plain) / nodes * 1e6:+6.2f} µs/node")
    print(f"lookups: best of {repeat} blocks of 100,000 calls")
    print(
        f"  provide (built)   : {ours * 1e6:.3f} µs; baseline await of a dict get: {base * 1e6:.3f} µs; ratio {ours / base:.2f}x"
    )
    print(
        f"  engine's per-node path (ready_kwargs: copy + lookup): {fast * 1e6:.3f} µs; baseline copy + dict set: "
        f"{copy * 1e6:.3f} µs; ratio {fast / copy:.2f}x; the lookup itself: {(fast - copy) * 1e6:.3f} µs"
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=7)
    a = p.parse_args()
    asyncio.run(main(a.nodes, a.repeat))
