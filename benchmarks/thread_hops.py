"""One thread hop (a sync node's call in a worker thread): nbflow's daemon pool against anyio's.

    python benchmarks/thread_hops.py [--calls 2000] [--rounds 5]

Both in the same process and loop, rounds alternating; reports microseconds per hop (median round),
one after another and 5,000 at once, and the ratio nbflow / anyio (below 1: nbflow is faster).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import anyio
import anyio.to_thread

from nbflow._engine.threads import run_in_thread


def f() -> int:
    return 1


async def _anyio() -> int:
    return await anyio.to_thread.run_sync(f, abandon_on_cancel=True)


async def _nbflow() -> int:
    return await run_in_thread(f)


async def main(calls: int, rounds: int) -> None:
    hops = {"anyio": _anyio, "nbflow": _nbflow}
    serial: dict[str, list[float]] = {k: [] for k in hops}
    burst: dict[str, list[float]] = {k: [] for k in hops}
    for _ in range(rounds):
        for name, hop in hops.items():
            t = time.perf_counter()
            for _ in range(calls):
                await hop()
            serial[name].append((time.perf_counter() - t) / calls * 1e6)
            t = time.perf_counter()
            await asyncio.gather(*[hop() for _ in range(5000)])
            burst[name].append((time.perf_counter() - t) / 5000 * 1e6)
    for label, table in (("one after another", serial), ("5,000 at once", burst)):
        a, n = statistics.median(table["anyio"]), statistics.median(table["nbflow"])
        print(f"{label:18s} anyio {a:7.1f} us/hop   nbflow {n:7.1f} us/hop   ratio {n / a:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.calls, args.rounds)
