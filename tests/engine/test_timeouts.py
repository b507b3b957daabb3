"""Node timeouts (per attempt, retried if the policy says so) and run deadlines (CANCELLED, finished kept)."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

import nbflow as nf

pytestmark = pytest.mark.anyio

FOREVER = 60  # seconds a hanging node would sleep; every test ends long before


async def test_a_node_over_its_timeout_fails_with_node_timeout_error_naming_node_and_limit():
    flow = nf.Flow("f")

    @flow.node(timeout=0.05)
    async def slow() -> str:
        await asyncio.sleep(FOREVER)
        return "never"

    @flow.node
    async def after(slow: str) -> str:
        return slow

    @flow.node
    async def independent() -> int:
        return 1

    run = await flow.arun()
    rec = run.nodes["slow"]
    assert rec.status is nf.NodeStatus.FAILED
    assert isinstance(rec.error, nf.NodeTimeoutError)
    assert isinstance(rec.error, TimeoutError) and isinstance(rec.error, nf.NbflowError)
    assert rec.error.node == "slow" and rec.error.timeout == 0.05 and rec.error.attempt == 1
    assert "'slow'" in str(rec.error) and "timeout=0.05s" in str(rec.error)
    assert run.nodes["after"].status is nf.NodeStatus.SKIPPED
    assert run["independent"] == 1
    assert run.status is nf.RunStatus.FAILED


async def test_timed_out_attempts_are_retried_and_each_is_recorded():
    clock = nf.FakeClock()
    flow = nf.Flow("f", clock=clock)
    calls = []

    @flow.node(timeout=0.05, retry=nf.Retry(attempts=3, backoff=1))
    async def llm() -> str:
        calls.append(1)
        if len(calls) < 3:
            await asyncio.sleep(FOREVER)
        return "answer"

    run = await flow.arun()
    rec = run.nodes["llm"]
    assert run["llm"] == "answer"
    assert [type(a.error).__name__ for a in rec.attempts] == ["NodeTimeoutError", "NodeTimeoutError", "NoneType"]
    assert [a.error.attempt for a in rec.attempts[:2]] == [1, 2]  # type: ignore[union-attr]
    assert clock.sleeps == [1, 2]


async def test_a_timeout_raised_by_the_node_itself_is_not_mistaken_for_the_limit():
    flow = nf.Flow("f")

    @flow.node(timeout=5)
    async def own() -> str:
        raise TimeoutError("the API said so")

    run = await flow.arun()
    err = run.nodes["own"].error
    assert type(err) is TimeoutError and str(err) == "the API said so"


async def test_a_thread_node_times_out_without_waiting_for_the_thread():
    flow = nf.Flow("f")
    release = threading.Event()

    @flow.node(timeout=0.05)
    def blocking() -> str:
        release.wait(FOREVER)
        return "late"

    try:
        with pytest.warns(nf.NodeStillRunningWarning, match="'blocking'"), anyio.fail_after(10):
            run = await flow.arun()
    finally:
        release.set()  # let the abandoned thread end
    assert isinstance(run.nodes["blocking"].error, nf.NodeTimeoutError)


def test_timeout_on_an_inline_sync_node_is_refused():
    flow = nf.Flow("f")
    with pytest.raises(nf.FlowDefinitionError, match=r"node 'inline'.*thread=False"):

        @flow.node(thread=False, timeout=1)
        def inline() -> int:
            return 1


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "5", True])
def test_bad_timeouts_are_refused(bad):
    flow = nf.Flow("f")
    with pytest.raises(nf.FlowDefinitionError, match="timeout"):
        flow.add(lambda: 1, name="n", timeout=bad)
    flow.add(lambda: 1, name="n")
    with pytest.raises(nf.FlowDefinitionError, match="timeout"):
        flow.run(timeout=bad)


async def test_a_run_over_its_deadline_is_cancelled_and_keeps_everything_finished():
    flow = nf.Flow("f")

    @flow.node
    async def fast() -> int:
        return 1

    @flow.node
    async def hangs(fast: int) -> int:
        await asyncio.sleep(FOREVER)
        return fast

    @flow.node
    async def after(hangs: int) -> int:
        return hangs

    events: list[nf.Event] = []
    with anyio.fail_after(10):
        run = await flow.arun(timeout=0.1, on_event=events.append)

    assert run.status is nf.RunStatus.CANCELLED
    assert run.reason == "run deadline of 0.1s exceeded"
    assert run["fast"] == 1
    assert run.nodes["hangs"].status is nf.NodeStatus.CANCELLED
    assert run.nodes["hangs"].skip_reason == "run deadline of 0.1s exceeded while the node was running"
    assert run.nodes["after"].status is nf.NodeStatus.CANCELLED
    assert run.nodes["after"].skip_reason == "run deadline of 0.1s exceeded before the node started"
    finished = [e for e in events if isinstance(e, nf.RunFinished)]
    assert len(finished) == 1 and finished[0].reason == run.reason
    assert "deadline" in repr(run)
    with pytest.raises(nf.RunFailedError, match="deadline"):
        run.raise_for_status()


async def test_a_run_within_its_deadline_is_untouched():
    flow = nf.Flow("f")

    @flow.node
    async def quick() -> int:
        return 1

    run = await flow.arun(timeout=30)
    assert run.status is nf.RunStatus.SUCCEEDED and run.reason is None


async def test_the_deadline_interrupts_a_retry_backoff():
    flow = nf.Flow("f")  # real clock: the backoff would take 30 s

    @flow.node(retry=nf.Retry(attempts=3, backoff=30))
    async def flaky() -> int:
        raise ConnectionError("down")

    with anyio.fail_after(10):
        run = await flow.arun(timeout=0.1)
    rec = run.nodes["flaky"]
    assert run.status is nf.RunStatus.CANCELLED
    assert rec.status is nf.NodeStatus.CANCELLED
    assert len(rec.attempts) == 1 and isinstance(rec.attempts[0].error, ConnectionError)


async def test_an_outside_cancel_still_propagates_with_a_deadline_set():
    flow = nf.Flow("f")

    @flow.node
    async def hangs() -> int:
        await asyncio.sleep(FOREVER)
        return 1

    with anyio.move_on_after(0.05):
        await flow.arun(timeout=30)
        pytest.fail("the cancel did not propagate")
    run = flow.last_run
    assert run is not None and run.status is nf.RunStatus.CANCELLED and run.reason is None


def test_blocking_run_and_start_take_the_deadline_too():
    flow = nf.Flow("f")

    @flow.node
    async def hangs() -> int:
        await asyncio.sleep(FOREVER)
        return 1

    run = flow.run(timeout=0.05)
    assert run.status is nf.RunStatus.CANCELLED and "deadline" in (run.reason or "")

    async def main() -> nf.Run:
        return await flow.start(timeout=0.05)

    run = anyio.run(main)
    assert run.status is nf.RunStatus.CANCELLED and "deadline" in (run.reason or "")


async def test_node_timeout_with_a_default_recovers():
    flow = nf.Flow("f")

    @flow.node(timeout=0.05, on_error=nf.Default("fallback"))
    async def slow() -> str:
        await asyncio.sleep(FOREVER)
        return "never"

    run = await flow.arun()
    rec = run.nodes["slow"]
    assert run["slow"] == "fallback" and rec.recovered
    assert isinstance(rec.error, nf.NodeTimeoutError)


async def test_a_flow_input_named_timeout_is_not_mistaken_for_the_deadline():
    flow = nf.Flow("f")

    @flow.node
    async def fetch(url: str, timeout: float = 10.0) -> str:
        return f"{url} within {timeout}"

    with pytest.raises(
        nf.FlowDefinitionError, match=r"input named 'timeout' \(taken by parameter 'timeout' of node 'fetch'\)"
    ):
        await flow.arun(url="u", timeout=3)
    run = await flow.arun({"timeout": 3}, url="u")
    assert run["fetch"] == "u within 3.0"
    run = await flow.arun({"timeout": 3}, url="u", timeout=30)  # both: the input and a deadline
    assert run["fetch"] == "u within 3.0" and run.status is nf.RunStatus.SUCCEEDED


async def test_a_sub_flow_node_times_out_and_its_inner_run_is_cancelled():
    sub = nf.Flow("sub")

    @sub.node
    async def inner(text: str) -> str:
        await asyncio.sleep(FOREVER)
        return text

    flow = nf.Flow("f")
    flow.add(sub, name="summ", output="inner", timeout=0.05)
    with anyio.fail_after(10):
        run = await flow.arun(text="x")
    rec = run.nodes["summ"]
    assert isinstance(rec.error, nf.NodeTimeoutError)
    assert rec.subrun is None or rec.subrun.status is nf.RunStatus.CANCELLED
