"""Where a batch row's CPU costs wall-clock time: a hand-written model of nbflow's batch structure.

1,000 rows at 50 in flight, each awaiting a 20 ms sleep (the model call), as ``batch_throughput.py``.
The semaphore baseline (``asyncio.gather`` + ``asyncio.Semaphore``, no added work) against a worker
pool (50 tasks looping over the rows: nbflow's structure) with a fixed busy loop added per row, placed
three ways: right after the wake, split before and after the sleep, or deferred until the worker has
started its next row (``call_soon``). Interleaved rounds in one process; prints median milliseconds and
the ratio to the baseline (> 1: faster than it).

    python benchmarks/pool_model.py [--added 0 20 40] [--rounds 9]

Session 7: up to ~20 µs per row hides in asyncio's millisecond-rounded waits; beyond it a wave's CPU is
on the critical path almost one for one, and where it falls makes no difference (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

ROWS, CONCURRENCY, SLEEP = 1_000, 50, 0.020
_perf = time.perf_counter


def burn(us: float) -> None:
    end = _perf() + us * 1e-6
    while _perf() < end:
        pass


async def semaphore_baseline(_: float) -> None:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one() -> None:
        async with sem:
            await asyncio.sleep(SLEEP)

    await asyncio.gather(*(one() for _ in range(ROWS)))


async def pool(added: float, place: str) -> None:
    rows = iter(range(ROWS))
    loop = asyncio.get_running_loop()

    async def worker() -> None:
        for _ in rows:
            if place == "split":
                burn(added / 2)
            await asyncio.sleep(SLEEP)
            if place == "after":
                burn(added)
            elif place == "split":
                burn(added / 2)
            else:  # deferred: after this worker has started its next row
                loop.call_soon(burn, added)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def main(added: list[float], rounds: int) -> None:
    print(f"{ROWS} rows at {CONCURRENCY} in flight, {SLEEP * 1e3:.0f} ms each; median of {rounds} interleaved rounds")
    print(f"{'added µs/row':>12}  {'baseline':>9}  {'pool, after':>14}  {'pool, split':>14}  {'pool, deferred':>14}")
    for us in added:
        variants: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
            "baseline": lambda: semaphore_baseline(0),
            "after": partial(pool, us, "after"),
            "split": partial(pool, us, "split"),
            "deferred": partial(pool, us, "deferred"),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(rounds):
            for name, make in variants.items():
                t0 = _perf()
                await make()
                times[name].append(_perf() - t0)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        b = med["baseline"]
        cells = [f"{med[k]:7.1f} {b / med[k]:.3f}x" for k in ("after", "split", "deferred")]
        print(f"{us:12.0f}  {b:7.1f}ms  " + "  ".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--added", type=float, nargs="+", default=[0, 20, 40])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    asyncio.run(main(args.added, args.rounds))
