"""A batch's wave of rows on a learning sync node: a few timed calls in threads decide for the rest.

The rule is in nbflow/_engine/sync_call.py (docs/engine.md "Sync nodes"). These tests count which
thread ran each call, not timings (except the bound on how long a blocking node's first wave waits).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import nbflow as nf

pytestmark = pytest.mark.anyio


def wave_flow(where: list[int], slow: set[int] | None = None, sleep: float = 0.01) -> nf.Flow:
    flow = nf.Flow("wave_hops")
    slow = slow or set()

    @flow.node
    def prepare(x: int) -> int:
        where.append(threading.get_ident())
        if x in slow:
            time.sleep(0.02)  # this call holds whatever thread runs it (the loop, if inline)
        return x + 1

    @flow.node
    async def call(prepare: int) -> int:
        await asyncio.sleep(sleep)
        return prepare

    return flow


def hops(where: list[int]) -> int:
    loop_thread = threading.get_ident()
    return sum(1 for w in where if w != loop_thread)


async def test_a_fresh_quick_node_decides_on_a_few_calls_not_one_per_thread_token():
    where: list[int] = []
    flow = wave_flow(where)
    frame = await flow.abatch([{"x": i} for i in range(250)], concurrency=250, progress=False)
    assert (frame["status"] == "succeeded").all() and list(frame["call"]) == list(range(1, 251))
    # 3 timed calls move it inline; each later one while they are out waits for them. (Before: one
    # hop per worker-thread token, ~40.) The margin is for a machine so loaded that the OS pauses
    # the loop mid-call, which sends the node back to a thread once.
    assert len(where) == 250 and hops(where) <= 20, hops(where)


async def test_after_a_slow_inline_call_a_wave_hops_a_few_times_then_runs_inline_again():
    where: list[int] = []
    flow = wave_flow(where, slow={-1})
    loop_thread = threading.get_ident()
    for _ in range(20):  # learned: inline (a loaded machine may pause the loop mid-call: learn again)
        where.clear()
        await flow.abatch([{"x": i} for i in range(50)], concurrency=50, progress=False)
        if where[-1] == loop_thread:
            break
    assert where[-1] == loop_thread
    where.clear()
    await flow.abatch([{"x": -1}], progress=False)  # one call holds the loop 20 ms: back to a thread
    assert where == [loop_thread]
    where.clear()
    frame = await flow.abatch([{"x": i} for i in range(250)], concurrency=250, progress=False)
    assert (frame["status"] == "succeeded").all()
    # After the strike it needs 6 quick calls in threads; the rest of the wave waits for them and
    # then runs inline (before: ~40 hops, one per worker-thread token). The margin is for a loaded
    # machine, where the OS pausing the loop mid-call can send the node back to a thread again.
    assert len(where) == 250 and hops(where) <= 24, hops(where)


async def test_a_blocking_nodes_first_wave_is_not_held_back_by_the_probes():
    """Every call blocks 0.2 s: the calls waiting for the first timed calls' verdict hop after a
    bounded wait, so the wave's calls still overlap in threads (never one after another)."""
    flow = nf.Flow("wave_blocking")
    where: list[int] = []

    @flow.node
    def fetch(x: int) -> int:
        where.append(threading.get_ident())
        time.sleep(0.2)
        return x

    t0 = time.perf_counter()
    frame = await flow.abatch([{"x": i} for i in range(30)], concurrency=30, progress=False)
    took = time.perf_counter() - t0
    assert (frame["status"] == "succeeded").all()
    assert len(where) == 30 and threading.get_ident() not in where
    assert took < 2.0, took  # 30 calls one after another: 6 s; in threads, overlapping: ~0.25-0.5 s
