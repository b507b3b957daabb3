"""A fan-out's branches: each runs in a task of its own, started when the first branch waits.

The run's own task runs the first ready branch; once that one waits, the other ready branches get tasks of
their own (on Python 3.12+ started eagerly: a branch's first step runs as its task is made). What a node
does in its first step (ask, report usage, print, fail, end without waiting) must reach its own record.
"""

import asyncio

import pytest

import nbflow as nf

WIDTH = 8


def fan(body, width: int = WIDTH, name: str = "fan") -> nf.Flow:
    """``src`` -> ``width`` branches ``b0..`` (each ``body(i, src)``) -> ``total`` (their sum)."""
    flow = nf.Flow(name)

    @flow.node
    async def src() -> int:
        return 1

    for i in range(width):
        flow.add(_branch(body, i), name=f"b{i}")

    names = [f"b{i}" for i in range(width)]
    ns: dict = {}
    exec(f"async def total({', '.join(names)}):\n    return {' + '.join(names)}", ns)
    flow.add(ns["total"], name="total")
    return flow


def _branch(body, i: int):
    async def branch(src: int) -> int:
        return await body(i, src)

    return branch


def test_every_branch_waits_at_once_and_records_its_own_times():
    async def body(i: int, src: int) -> int:
        await asyncio.sleep(0.2)
        return src + i

    run = fan(body).run()
    assert run.status is nf.RunStatus.SUCCEEDED, run.summary()
    assert run["total"] == sum(1 + i for i in range(WIDTH))
    recs = [run.nodes[f"b{i}"] for i in range(WIDTH)]
    for i, rec in enumerate(recs):
        assert rec.status is nf.NodeStatus.SUCCEEDED and rec.output == 1 + i
        assert rec.inputs == {"src": 1}
        assert rec.started_at <= rec.finished_at
        assert rec.finished_at - rec.started_at >= 0.19
    # concurrent: the last branch started before the first one ended (one after the other would take 1.6 s)
    assert max(r.started_at for r in recs) < min(r.finished_at for r in recs)
    assert run.duration < 0.2 * WIDTH / 2


def test_a_branch_that_asks_before_it_waits_pauses_alone_and_resumes():
    async def body(i: int, src: int) -> int:
        if i == 5:  # not the first branch: this one runs in a task the scheduler started for it
            return int(await nf.ask("how many?", options=["3", "4"]))
        await asyncio.sleep(0.05)
        return src

    flow = fan(body)
    run = flow.run()
    assert run.status is nf.RunStatus.PAUSED, run.summary()
    assert list(run.pending) == ["b5#0"]
    assert run.nodes["b5"].status is nf.NodeStatus.PAUSED
    assert all(run.nodes[f"b{i}"].status is nf.NodeStatus.SUCCEEDED for i in range(WIDTH) if i != 5)
    assert run.nodes["total"].status is nf.NodeStatus.PENDING
    done = run.resume("4")
    assert done.status is nf.RunStatus.SUCCEEDED, done.summary()
    assert done["total"] == 4 + (WIDTH - 1)


def test_usage_and_printed_output_go_to_each_branch_s_own_record(capsys):
    async def body(i: int, src: int) -> int:
        nf.usage(input_tokens=10 + i, output_tokens=i)  # before the branch's first wait
        print(f"branch {i} starts")
        await asyncio.sleep(0.05)
        print(f"branch {i} ends")
        return src

    run = fan(body).run()
    assert run.status is nf.RunStatus.SUCCEEDED, run.summary()
    for i in range(WIDTH):
        attempt = run.nodes[f"b{i}"].attempts[-1]
        assert attempt.usage is not None
        assert (attempt.usage.input_tokens, attempt.usage.output_tokens) == (10 + i, i)
        assert attempt.output == f"branch {i} starts\nbranch {i} ends\n"


def test_branches_that_end_without_waiting_next_to_one_that_waits():
    """The first branch waits, so the others get tasks; these end in their first step (started eagerly on
    3.12+: inside the scheduler's hand-out) and each releases a dependent, which their task runs too."""
    flow = nf.Flow("mixed")

    @flow.node
    async def src() -> int:
        return 1

    async def body(i: int, src: int) -> int:
        if i == 0:
            await asyncio.sleep(0.05)
        return src + i

    for i in range(WIDTH):
        flow.add(_branch(body, i), name=f"b{i}")
        ns: dict = {}
        exec(f"async def after(b{i}):\n    return b{i} * 10", ns)
        flow.add(ns["after"], name=f"a{i}")

    async def main() -> nf.Run:
        run = await asyncio.wait_for(flow.arun(), 5)
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not left, left  # every worker task ended with the run
        return run

    run = asyncio.run(main())
    assert run.status is nf.RunStatus.SUCCEEDED, run.summary()
    assert [run[f"a{i}"] for i in range(WIDTH)] == [(1 + i) * 10 for i in range(WIDTH)]


def test_a_failing_branch_fails_alone_and_skips_the_sink():
    async def body(i: int, src: int) -> int:
        if i == 3:
            raise ValueError("branch 3 broke")  # in its first step
        await asyncio.sleep(0.05)
        return src

    run = fan(body).run()
    assert run.status is nf.RunStatus.FAILED
    assert run.nodes["b3"].status is nf.NodeStatus.FAILED
    assert "branch 3 broke" in str(run.nodes["b3"].error)
    assert all(run.nodes[f"b{i}"].status is nf.NodeStatus.SUCCEEDED for i in range(WIDTH) if i != 3)
    assert run.nodes["total"].status is nf.NodeStatus.SKIPPED


def test_concurrency_caps_the_branches_running_at_once():
    running = 0
    most = 0

    async def body(i: int, src: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.02)
        running -= 1
        return src

    run = fan(body).run(concurrency=3)
    assert run.status is nf.RunStatus.SUCCEEDED, run.summary()
    assert run["total"] == WIDTH
    assert most == 3


def test_a_run_deadline_cancels_the_waiting_branches_and_leaves_no_task():
    async def body(i: int, src: int) -> int:
        await asyncio.sleep(30)
        return src

    flow = fan(body)

    async def main() -> nf.Run:
        run = await flow.arun(timeout=0.2)
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not left, left
        return run

    run = asyncio.run(main())
    assert run.status is nf.RunStatus.CANCELLED
    assert "deadline" in (run.reason or "")
    for i in range(WIDTH):
        rec = run.nodes[f"b{i}"]
        assert rec.status is nf.NodeStatus.CANCELLED, (i, rec.status)
        assert "while the node was running" in (rec.skip_reason or "")
    assert run.nodes["total"].status is nf.NodeStatus.CANCELLED


def test_cancelling_the_run_task_cancels_every_branch():
    started = 0

    async def body(i: int, src: int) -> int:
        nonlocal started
        started += 1
        await asyncio.sleep(30)
        return src

    flow = fan(body)

    async def main() -> nf.Run:
        task = asyncio.ensure_future(flow.arun())
        while started < WIDTH:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not left, left
        assert flow.last_run is not None
        return flow.last_run

    run = asyncio.run(main())
    assert run.status is nf.RunStatus.CANCELLED
    assert all(run.nodes[f"b{i}"].status is nf.NodeStatus.CANCELLED for i in range(WIDTH))
