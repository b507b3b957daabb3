"""Batch on Dask vs local: the cost of sending rows to worker processes, and what chunking buys.

Starts ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``, warms both workers, then
times ``flow.batch`` locally and with ``executor=client`` for trivial rows (pure overhead) and for
rows awaiting a 50 ms call (I/O-bound). Numbers are in docs/dask.md.

    python benchmarks/dask_batch.py
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from typing import Any

import nbflow as nf


def make(sleep: float) -> nf.Flow:
    flow = nf.Flow(f"bench-dask-{sleep}")

    @flow.node
    async def call(x: int) -> int:
        if sleep:
            await asyncio.sleep(sleep)
        return x + 1

    @flow.node
    def score(call: int) -> int:
        return call * 2

    return flow


def timed(flow: nf.Flow, rows: list[dict[str, Any]], **kw: Any) -> float:
    t0 = time.perf_counter()
    frame = flow.batch(rows, progress=False, **kw)
    elapsed = time.perf_counter() - t0
    assert frame.attrs["counts"] == {"succeeded": len(rows)}, frame.attrs["counts"]
    return elapsed


def main() -> None:
    from distributed import Client, LocalCluster

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    )
    client = Client(cluster)
    print(f"cluster start: {time.perf_counter() - t0:.2f}s")
    try:
        trivial, slow = make(0.0), make(0.05)
        for flow in (trivial, slow):  # both workers import and unpickle once
            flow.batch([{"x": i} for i in range(4)], executor=client, chunk_size=1, progress=False)
        rows = [{"x": i} for i in range(2_000)]
        print(f"2000 trivial rows, local:                 {timed(trivial, rows):.2f}s")
        print(f"2000 trivial rows, Dask default chunks:   {timed(trivial, rows, executor=client):.2f}s")
        print(f"2000 trivial rows, Dask chunk_size=16:    {timed(trivial, rows, executor=client, chunk_size=16):.2f}s")
        rows = rows[:400]
        print(f"400 rows of 50 ms, local concurrency=16:  {timed(slow, rows):.2f}s")
        print(f"400 rows of 50 ms, Dask concurrency=16:   {timed(slow, rows, executor=client):.2f}s")
        t = timed(slow, rows, executor=client, concurrency=64, chunk_size=100)
        print(f"400 rows of 50 ms, Dask concurrency=64, chunk_size=100: {t:.2f}s")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
