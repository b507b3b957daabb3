"""A worker thread that finishes a sync node's call takes the next call waiting for a thread token itself.

The rule is in nbflow/_engine/threads.py: a token is held for a thread's turn of work, not for one call,
so a fan-out with more blocking nodes than tokens starts each next call as soon as a thread is free,
without waiting for the event loop (measured: benchmarks/io_fanout.py, the ``sync`` shape). These tests
pin the behaviour with a one-token limiter: who starts when, and that every token comes back.
"""

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import anyio.to_thread
import pytest

import nbflow as nf

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the limiter and the loop hog below are asyncio's


@pytest.fixture
async def one_token() -> AsyncIterator[anyio.CapacityLimiter]:
    limiter = anyio.to_thread.current_default_thread_limiter()
    before = limiter.total_tokens
    limiter.total_tokens = 1
    try:
        yield limiter
    finally:
        limiter.total_tokens = before


async def _no_token_held(limiter: anyio.CapacityLimiter) -> bool:
    """Whether every token comes back (a token freed as the run ends may pass through the task that waits
    for the limiter on behalf of queued calls: it gives it back a loop turn later)."""
    for _ in range(100):
        if limiter.borrowed_tokens == 0:
            return True
        await asyncio.sleep(0.001)
    return False


def _fan_out(name: str, width: int, started: dict[str, float], wait: float) -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def src() -> int:
        return 0

    for i in range(width):

        def blocking(src: int, i: int = i) -> int:
            started[f"b{i}"] = time.perf_counter()
            time.sleep(wait)
            return i

        flow.add(blocking, name=f"b{i}", thread=True, inputs={"src": "src"})
    return flow


async def test_the_next_waiting_call_starts_while_the_loop_is_busy(one_token: anyio.CapacityLimiter) -> None:
    started: dict[str, float] = {}
    flow = _fan_out("handover", 2, started, 0.05)

    @flow.node
    async def hog(src: int) -> int:
        await asyncio.sleep(0.01)
        time.sleep(0.4)  # holds the loop: a token handed back through the loop waits for this
        return 0

    run = await flow.arun()
    assert run.status is nf.RunStatus.SUCCEEDED, run
    first, second = sorted(started.values())
    # One token: the second call waits for the first; the thread that ran the first starts it at once.
    assert 0.04 <= second - first < 0.25, second - first
    assert await _no_token_held(one_token)


async def test_a_wide_fan_out_keeps_to_the_tokens_and_gives_them_all_back() -> None:
    limiter = anyio.to_thread.current_default_thread_limiter()
    running = [0, 0]  # now, most at once
    lock = threading.Lock()
    flow = nf.Flow("wide")

    @flow.node
    def src() -> int:
        return 0

    for i in range(int(limiter.total_tokens) * 3):

        def blocking(src: int, i: int = i) -> int:
            with lock:
                running[0] += 1
                running[1] = max(running)
            time.sleep(0.01)
            with lock:
                running[0] -= 1
            return i

        flow.add(blocking, name=f"b{i}", thread=True, inputs={"src": "src"})
    run = await flow.arun()
    assert run.status is nf.RunStatus.SUCCEEDED, run
    assert [run[f"b{i}"] for i in range(int(limiter.total_tokens) * 3)] == list(range(int(limiter.total_tokens) * 3))
    assert 1 < running[1] <= limiter.total_tokens
    assert await _no_token_held(limiter)


async def test_calls_waiting_while_another_user_holds_the_tokens_start_when_it_gives_one_back(
    one_token: anyio.CapacityLimiter,
) -> None:
    release = threading.Event()
    started: dict[str, float] = {}
    flow = _fan_out("others", 3, started, 0.0)
    async with anyio.create_task_group() as tg:

        async def hold() -> None:
            await anyio.to_thread.run_sync(release.wait)

        tg.start_soon(hold)  # anyio's own thread holds the one token
        await asyncio.sleep(0.05)
        assert one_token.borrowed_tokens == 1
        handle = asyncio.ensure_future(flow.arun())
        await asyncio.sleep(0.1)
        assert not handle.done() and not started  # every call waits for the token
        release.set()
        with anyio.fail_after(5):
            run = await handle
    assert run.status is nf.RunStatus.SUCCEEDED, run
    assert sorted(started) == ["b0", "b1", "b2"]
    assert await _no_token_held(one_token)


@pytest.mark.filterwarnings("ignore::nbflow.NodeStillRunningWarning")
async def test_an_abandoned_call_gives_its_token_back_at_once(one_token: anyio.CapacityLimiter) -> None:
    finished = threading.Event()
    flow = nf.Flow("abandon")

    @flow.node(thread=True, timeout=0.05)
    def slow() -> int:
        time.sleep(0.5)  # abandoned at its timeout: its thread goes on without a token
        finished.set()
        return 1

    @flow.node(thread=True)
    def quick() -> int:
        return 2

    loop_errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
    t0 = time.perf_counter()
    run = await flow.arun()
    took = time.perf_counter() - t0
    assert run.nodes["slow"].status is nf.NodeStatus.FAILED
    assert run["quick"] == 2
    assert took < 0.4, took  # quick did not wait for slow's thread
    assert await _no_token_held(one_token)
    await anyio.to_thread.run_sync(finished.wait, 2)
    await asyncio.sleep(0.05)
    assert await _no_token_held(one_token)
    assert not loop_errors  # the thread, done, gave back nothing (a second release raises on the loop)
    asyncio.get_running_loop().set_exception_handler(None)
