"""Sync nodes: a quick one learns to run inline on the loop, a blocking one never freezes other rows.

The rule is in nbflow/_engine/sync_call.py and docs/engine.md ("Sync nodes"). These tests pin
behaviour (which thread ran a call, whether other rows progressed), not timings.
"""

import asyncio
import gc
import itertools
import threading
import time
import warnings

import anyio.from_thread
import pytest

import nbflow as nf

pytestmark = pytest.mark.anyio


async def test_a_blocking_sync_node_does_not_freeze_other_rows_or_the_loop():
    flow = nf.Flow("blocking")
    finished: dict[int, float] = {}

    @flow.node
    def work(x: int) -> int:
        if x == 0:
            time.sleep(1.5)  # a blocking call (a slow HTTP request, a sleep): must not hold the loop
        return x

    @flow.node
    async def done(work: int) -> int:
        finished[work] = time.perf_counter()
        return work

    ticks = []

    async def heartbeat() -> None:
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.01)

    beat = asyncio.get_running_loop().create_task(heartbeat())
    t0 = time.perf_counter()
    try:
        frame = await flow.abatch([{"x": i} for i in range(60)], concurrency=8, progress=False)
    finally:
        beat.cancel()
    assert (frame["status"] == "succeeded").all()
    # Every other row finished while row 0 was still blocked in its call...
    assert max(finished[i] for i in range(1, 60)) < finished[0]
    # ...and the loop kept turning: no gap between heartbeats near the length of the block.
    during = [t for t in ticks if t0 < t < finished[0]]
    gaps = [b - a for a, b in itertools.pairwise(during)]
    assert len(during) > 10 and max(gaps) < 0.75


async def test_a_quick_sync_node_moves_inline_and_back_to_a_thread_once_it_blocks():
    flow = nf.Flow("learn")
    loop_thread = threading.get_ident()
    where: list[int] = []

    @flow.node
    def step(x: int) -> int:
        where.append(threading.get_ident())
        if x < 0:
            time.sleep(0.05)  # longer than the inline budget (a few ms)
        return x + 1

    for i in range(10):
        assert (await flow.arun(x=i))["step"] == i + 1
    assert where[0] != loop_thread  # a sync node starts in a worker thread
    assert where[-1] == loop_thread  # quick, compute-only calls: it learned to run inline
    where.clear()
    await flow.arun(x=-1)  # the one failure mode: this call blocks the loop (it was inline)...
    assert where == [loop_thread]
    where.clear()
    for i in range(3):
        await flow.arun(x=i)
    assert where[0] != loop_thread  # ...and the node is back in a thread right after
    # A node that keeps blocking in its thread is never moved inline again.
    where.clear()
    for _ in range(12):
        await flow.arun(x=-1)
    assert loop_thread not in where


async def test_a_sync_node_that_waits_on_io_stays_in_a_thread_even_when_short():
    flow = nf.Flow("io")
    loop_thread = threading.get_ident()
    where: list[int] = []

    @flow.node
    def fetch(x: int) -> int:
        where.append(threading.get_ident())
        time.sleep(0.0001)  # short, but waiting rather than computing: a thread lets rows overlap
        return x

    for i in range(20):
        await flow.arun(x=i)
    assert loop_thread not in where


@pytest.mark.parametrize("forced", [True, False])
async def test_thread_given_is_always_honoured(forced: bool):
    flow = nf.Flow("forced")
    loop_thread = threading.get_ident()
    where: list[int] = []

    @flow.node(thread=forced)
    def step(x: int) -> int:
        where.append(threading.get_ident())
        if x == 0 and not forced:
            time.sleep(0.01)  # slow, yet inline: thread=False says so
        return x

    for i in range(20):
        await flow.arun(x=i)
    assert all((t != loop_thread) is forced for t in where), where


async def test_a_sync_node_with_a_timeout_stays_in_a_thread_so_the_timeout_can_fire():
    flow = nf.Flow("timeout")
    loop_thread = threading.get_ident()
    where: list[int] = []

    @flow.node(timeout=0.2)
    def step(x: int) -> int:
        where.append(threading.get_ident())
        if x < 0:
            time.sleep(1.0)
        return x

    for i in range(10):
        await flow.arun(x=i)
    assert loop_thread not in where
    run = await flow.arun(x=-1)
    assert run.status is nf.RunStatus.FAILED
    assert isinstance(run.nodes["step"].error, nf.NodeTimeoutError)


async def test_errors_from_a_learned_sync_node_keep_the_users_traceback():
    flow = nf.Flow("errors")

    @flow.node
    def step(x: int) -> int:
        if x < 0:
            raise ValueError(f"negative: {x}")
        return x

    for i in range(5):
        await flow.arun(x=i)
    for x in (-1, -2):  # -1 may run in a thread or inline: both give the same record
        run = await flow.arun(x=x)
        rec = run.nodes["step"]
        assert isinstance(rec.error, ValueError) and str(rec.error) == f"negative: {x}"
        assert 'raise ValueError(f"negative: {x}")' in rec.traceback
        first = rec.traceback.splitlines()[1]  # the first frame: the user's function, no frame of nbflow's
        assert f'"{__file__}"' in first and ", in step" in first, first


async def test_a_wave_of_rows_hops_only_until_the_node_proves_quick():
    """250 rows reach a new sync node in one loop turn: the calls still waiting for a worker thread
    when its first calls prove it quick run inline instead of each paying a thread hop."""
    flow = nf.Flow("wave")
    loop_thread = threading.get_ident()
    where: list[int] = []

    @flow.node
    def prepare(x: int) -> int:
        where.append(threading.get_ident())
        return x + 1

    @flow.node
    async def call(prepare: int) -> int:
        await asyncio.sleep(0.01)
        return prepare

    frame = await flow.abatch([{"x": i} for i in range(250)], concurrency=250, progress=False)
    assert (frame["status"] == "succeeded").all() and list(frame["call"]) == list(range(1, 251))
    hops = sum(1 for w in where if w != loop_thread)
    # About one call per worker-thread token (anyio's default limiter: 40) hops before the node is
    # known to be quick (before, all 250 did); the margin is for a loaded machine, where a call the OS
    # paused can send the node back to a thread once.
    assert where[0] != loop_thread and hops <= 125, hops
    assert where.count(loop_thread) >= 125


async def test_a_wave_of_rows_on_a_node_that_blocks_all_run_in_threads():
    """The same wave on a node that waits (a sleep standing for I/O): no call runs on the loop."""
    flow = nf.Flow("wave_io")
    loop_thread = threading.get_ident()
    where: list[int] = []

    @flow.node
    def fetch(x: int) -> int:
        where.append(threading.get_ident())
        time.sleep(0.002)
        return x

    frame = await flow.abatch([{"x": i} for i in range(120)], concurrency=120, progress=False)
    assert (frame["status"] == "succeeded").all()
    assert len(where) == 120 and loop_thread not in where


def _run_nested(way: str, value: int) -> int:
    """A sync function running a coroutine to its end, as sync code wrapping an async client does."""

    async def fetch() -> int:
        return value * 2

    if way == "asyncio.run":
        return asyncio.run(fetch())
    if way == "anyio.from_thread":  # back into the loop that runs the node (from a worker thread only)
        return anyio.from_thread.run(fetch)
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(fetch())
    finally:
        loop.close()


@pytest.mark.parametrize("way", ["asyncio.run", "run_until_complete", "anyio.from_thread"])
async def test_a_learned_node_that_starts_running_its_own_loop_moves_to_a_thread_and_its_rows_succeed(way: str):
    """A node learned quick (inline) that later calls asyncio.run: refused on the loop's thread, so that call
    runs again in a worker thread and the node stays there; no row fails, nothing warns of a lost coroutine."""
    flow = nf.Flow("nested_loop")
    loop_thread = threading.get_ident()
    where: list[tuple[int, int]] = []

    @flow.node
    def step(x: int) -> int:
        where.append((x, threading.get_ident()))
        if x >= 10:  # (say, a cache that starts missing and calls an async client)
            return _run_nested(way, x)
        return x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(10):
            assert (await flow.arun(x=i))["step"] == i
        assert where[-1] == (9, loop_thread)  # quick and compute-only: it learned to run inline
        frame = await flow.abatch([{"x": i} for i in range(10, 40)], concurrency=4, progress=False)
        gc.collect()
    assert (frame["status"] == "succeeded").all(), frame["error_message"].dropna().tolist()
    assert list(frame["step"]) == [2 * i for i in range(10, 40)]
    later = [t for x, t in where if x >= 10]
    # The first such call was tried inline (and refused), every call then ran in a worker thread, once.
    assert later[0] == loop_thread and loop_thread not in later[1:] and len(later) == 31
    assert not [w for w in caught if "never awaited" in str(w.message)]


async def test_a_runtime_error_of_the_users_own_is_not_run_again_in_a_thread():
    flow = nf.Flow("own_error")
    calls: list[int] = []

    @flow.node
    def step(x: int) -> int:
        calls.append(x)
        if x < 0:
            raise RuntimeError("this event loop is already running")  # the words, not asyncio's error
        return x

    for i in range(10):
        await flow.arun(x=i)
    calls.clear()
    run = await flow.arun(x=-1)
    assert run.status is nf.RunStatus.FAILED and calls == [-1]
    assert str(run.nodes["step"].error) == "this event loop is already running"


@pytest.mark.parametrize("forced", [True, None])
async def test_a_sync_node_in_a_thread_calls_back_into_its_loop_with_anyio_from_thread(forced: bool | None):
    """The anyio way for sync code to use async code (an async client): ``anyio.from_thread.run`` and
    ``run_sync`` from the node's worker thread run on the loop that runs the node."""
    flow = nf.Flow(f"from_thread_{forced}")
    loop = asyncio.get_running_loop()
    seen: list[tuple[object, int]] = []

    async def fetch(x: int) -> int:
        await asyncio.sleep(0.001)
        seen.append((asyncio.get_running_loop(), threading.get_ident()))
        return x * 2

    def note(x: int) -> int:
        seen.append((asyncio.get_running_loop(), threading.get_ident()))
        return x + 1

    @flow.node(thread=forced)
    def step(x: int) -> int:
        time.sleep(0.003)  # (blocking: the default keeps it in a worker thread)
        return anyio.from_thread.run_sync(note, anyio.from_thread.run(fetch, x))

    frame = await flow.abatch([{"x": i} for i in range(12)], concurrency=4, progress=False)
    assert (frame["status"] == "succeeded").all(), frame["error_message"].dropna().tolist()
    assert list(frame["step"]) == [2 * i + 1 for i in range(12)]
    assert len(seen) == 24 and all(lp is loop and t == threading.get_ident() for lp, t in seen)


@pytest.mark.parametrize("way", ["asyncio.run", "anyio.from_thread"])
async def test_asyncio_run_in_a_node_forced_inline_fails_with_a_note_naming_the_fix(way: str):
    flow = nf.Flow("forced_inline")

    @flow.node(thread=False)
    def step(x: int) -> int:
        return _run_nested(way, x)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = await flow.arun(x=1)
        gc.collect()
    error = run.nodes["step"].error
    assert run.status is nf.RunStatus.FAILED and isinstance(error, RuntimeError)
    assert not [w for w in caught if "never awaited" in str(w.message)]  # (only the error: nothing to await)
    assert any("'step'" in note and "thread=True" in note for note in error.__notes__)
    assert "thread=True" in run.nodes["step"].traceback
