"""Engine semantics: once each, after upstreams, concurrently, failures skip descendants only."""

import threading
import time

import anyio
import pytest

import nbflow as nf

pytestmark = pytest.mark.anyio


async def test_independent_branches_run_concurrently():
    flow = nf.Flow("f")
    both_started = anyio.Event()
    started = []

    async def branch(tag: str) -> str:
        started.append(tag)
        if len(started) == 2:
            both_started.set()
        with anyio.fail_after(5):  # would hang if the branches ran one after the other
            await both_started.wait()
        return tag

    @flow.node
    async def left() -> str:
        return await branch("left")

    @flow.node
    async def right() -> str:
        return await branch("right")

    @flow.node
    def join(left: str, right: str) -> str:
        return left + right

    run = await flow.arun()
    assert run["join"] == "leftright"


async def test_sync_nodes_run_in_worker_threads_unless_thread_false():
    flow = nf.Flow("f")
    main = threading.get_ident()

    @flow.node
    def threaded() -> int:
        return threading.get_ident()

    @flow.node(thread=False)
    def inline() -> int:
        return threading.get_ident()

    run = await flow.arun()
    assert run["threaded"] != main
    assert run["inline"] == main


async def test_a_failure_skips_descendants_only_and_fails_the_run():
    flow = nf.Flow("f")

    @flow.node
    def ok() -> int:
        return 1

    @flow.node
    def boom(ok: int) -> int:
        raise ValueError("bad value 42")

    @flow.node
    def child(boom: int) -> int:
        return boom

    @flow.node
    def grandchild(child: int, ok: int) -> int:
        return child

    @flow.node
    async def independent(ok: int) -> int:
        await anyio.sleep(0.01)
        return ok + 1

    run = await flow.arun()
    assert run.status is nf.RunStatus.FAILED
    st = {n: r.status for n, r in run.nodes.items()}
    assert st == {
        "ok": nf.NodeStatus.SUCCEEDED,
        "boom": nf.NodeStatus.FAILED,
        "child": nf.NodeStatus.SKIPPED,
        "grandchild": nf.NodeStatus.SKIPPED,
        "independent": nf.NodeStatus.SUCCEEDED,
    }
    assert run.nodes["child"].skip_reason == "upstream 'boom' failed"
    assert run.nodes["grandchild"].skip_reason == "upstream 'boom' failed"
    rec = run.nodes["boom"]
    assert isinstance(rec.error, ValueError) and rec.error_type == "ValueError"
    assert "bad value 42" in rec.traceback and 'raise ValueError("bad value 42")' in rec.traceback
    assert "anyio" not in rec.traceback.splitlines()[1]  # the user's frame comes first
    assert run["independent"] == 2


async def test_concurrency_cap_is_never_exceeded():
    flow = nf.Flow("f", concurrency=3)
    active = 0
    peak = 0

    for i in range(12):

        async def work() -> int:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await anyio.sleep(0.002)
            active -= 1
            return 1

        flow.add(work, name=f"w{i}")
    run = await flow.arun()
    assert run.status is nf.RunStatus.SUCCEEDED
    assert peak == 3
    run = await flow.arun(concurrency=1)
    assert peak == 3 and run.status is nf.RunStatus.SUCCEEDED


async def test_targets_run_only_what_they_need():
    flow = nf.Flow("f")
    ran = []

    @flow.node
    def a(x: int) -> int:
        ran.append("a")
        return x

    @flow.node
    def b(a: int) -> int:
        ran.append("b")
        return a + 1

    @flow.node
    def c(y: int) -> int:  # needs an input the target does not
        ran.append("c")
        return y

    run = await flow.arun(x=1, targets="b")
    assert sorted(ran) == ["a", "b"]
    assert set(run.nodes) == {"a", "b"}
    assert run.status is nf.RunStatus.SUCCEEDED


async def test_overrides_inject_outputs_without_running():
    flow = nf.Flow("f")
    ran = []

    @flow.node
    def expensive(x: int) -> int:
        ran.append("expensive")
        return x

    @flow.node
    def cheap(expensive: int) -> int:
        ran.append("cheap")
        return expensive * 10

    run = await flow.arun(overrides={"expensive": 7})  # x is not needed any more
    assert ran == ["cheap"]
    assert run["cheap"] == 70
    assert run.nodes["expensive"].overridden and run["expensive"] == 7


async def test_every_node_runs_exactly_once_in_a_diamond():
    flow = nf.Flow("f")
    counts: dict[str, int] = {}

    def counted(name):
        counts[name] = counts.get(name, 0) + 1

    @flow.node
    async def top() -> int:
        counted("top")
        return 1

    @flow.node
    async def left(top: int) -> int:
        counted("left")
        return top + 1

    @flow.node
    def right(top: int) -> int:
        counted("right")
        return top + 2

    @flow.node
    async def bottom(left: int, right: int) -> int:
        counted("bottom")
        return left * right

    run = await flow.arun()
    assert run["bottom"] == 6
    assert counts == {"top": 1, "left": 1, "right": 1, "bottom": 1}


async def test_none_is_a_real_output_not_a_skip():
    flow = nf.Flow("f")

    @flow.node
    def nothing() -> None:
        return None

    @flow.node
    def after(nothing: None) -> str:
        return f"got {nothing!r}"

    run = await flow.arun()
    assert run["after"] == "got None"
    assert run.nodes["nothing"].status is nf.NodeStatus.SUCCEEDED


async def test_empty_flow_succeeds():
    run = await nf.Flow("empty").arun()
    assert run.status is nf.RunStatus.SUCCEEDED and run.nodes == {}


async def test_long_chain_does_not_recurse_or_starve_the_loop():
    flow = nf.Flow("chain")

    async def first() -> int:
        return 0

    flow.add(first, name="n0")
    for i in range(1, 20000):  # (long enough to hold the loop well over 10 ms at ~1 µs a node)

        async def step(x: int) -> int:
            return x + 1

        flow.add(step, name=f"n{i}", inputs={"x": f"n{i - 1}"})
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        run = await flow.arun()
        tg.cancel_scope.cancel()
    assert run["n19999"] == 19999
    assert ticks > 10  # the loop got control during the chain (once a ms)


async def test_a_long_failing_chain_is_skipped_without_recursion():
    flow = nf.Flow("chain")

    def first() -> int:
        raise RuntimeError("first fails")

    flow.add(first, name="n0", thread=False)
    for i in range(1, 3000):
        flow.add(lambda x: x, name=f"n{i}", inputs={"x": f"n{i - 1}"}, thread=False)
    run = await flow.arun()
    assert run.counts() == {"failed": 1, "skipped": 2999}


async def test_durations_and_attempts_are_recorded():
    flow = nf.Flow("f")

    @flow.node
    async def slow() -> int:
        await anyio.sleep(0.02)
        return 1

    before = time.time()
    run = await flow.arun()
    rec = run.nodes["slow"]
    assert before <= rec.started_at <= rec.finished_at <= time.time()
    assert rec.duration >= 0.015
    assert len(rec.attempts) == 1 and rec.attempts[0].error is None and rec.attempts[0].number == 1
    assert rec.inputs == {}
    assert run.duration >= rec.duration


async def test_async_callables_and_sync_functions_returning_coroutines_are_awaited():
    flow = nf.Flow("f")

    class Client:
        async def __call__(self, q: str) -> str:
            await anyio.sleep(0)
            return q.upper()

    async def fetch(q: str) -> str:
        return q * 2

    flow.add(Client(), name="client")
    flow.add(lambda q: fetch(q), name="wrapped", thread=False)
    flow.add(lambda q: fetch(q), name="wrapped_in_thread")
    run = await flow.arun(q="ab")
    assert run.outputs == {"client": "AB", "wrapped": "abab", "wrapped_in_thread": "abab"}
