"""A run's own task is its first worker: nesting (a sub-flow run inside a parent's worker) stays correct."""

import nbflow as nf


def test_ask_after_a_subflow_node_in_the_same_worker():
    """The sub-flow's inline worker shares the parent worker's task; nf.ask must still find its node."""
    sub = nf.Flow("sub")

    @sub.node
    async def inner(text: str) -> str:
        return text.upper()

    parent = nf.Flow("parent")
    parent.add(sub, name="summ", inputs={"text": "doc"}, output="inner")

    @parent.node
    async def review(summ: str) -> str:
        return await nf.ask("ok?", data=summ, options=["yes", "no"])

    run = parent.run(doc="abc")
    assert run.status is nf.RunStatus.PAUSED, run.summary()
    assert list(run.pending) == ["review#0"]
    done = run.resume("yes")
    assert done["review"] == "yes"


def test_cancelling_a_run_whose_own_task_is_running_a_node_keeps_finished_outputs():
    import asyncio

    import pytest

    flow = nf.Flow("chain")
    started = asyncio.Event()

    @flow.node
    async def first() -> int:
        return 1

    @flow.node
    async def second(first: int) -> int:
        started.set()
        await asyncio.sleep(600)
        return first

    async def main() -> nf.Run:
        task = asyncio.ensure_future(flow.arun())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert flow.last_run is not None
        return flow.last_run

    run = asyncio.run(main())
    assert run.status is nf.RunStatus.CANCELLED
    assert run["first"] == 1
    assert run.nodes["second"].status is nf.NodeStatus.CANCELLED


def test_a_finished_run_is_freed_by_refcount_not_left_to_the_cyclic_gc():
    """A batch makes thousands of runs: a Run that is a reference cycle costs time and memory."""
    import asyncio
    import gc
    import weakref

    flow = nf.Flow("free")

    @flow.node
    async def a(x: int) -> int:
        return x

    @flow.node
    async def b(a: int) -> int:
        return a

    async def main() -> weakref.ref[nf.Run]:
        run = await flow.arun(x=1)
        flow.last_run = None
        return weakref.ref(run)

    gc.disable()
    try:
        ref = asyncio.run(main())
        assert ref() is None
    finally:
        gc.enable()


def test_a_fan_out_s_worker_tasks_are_freed_by_refcount_when_they_end():
    """Each extra branch of a fan-out runs in a task of its own, whose context names the branch's worker
    (nf.usage); the worker must not keep naming the task, or every task, its context and its worker stay
    alive until the cyclic collector runs (a 1,000-node fan-out kept ~0.8 MB that way)."""
    import asyncio
    import gc
    import weakref

    flow = nf.Flow("fan_free")
    tasks: list[weakref.ref[asyncio.Task[object]]] = []

    @flow.node
    async def src() -> int:
        return 1

    for i in range(20):

        async def branch(src: int) -> int:
            task = asyncio.current_task()
            assert task is not None
            tasks.append(weakref.ref(task))
            await asyncio.sleep(0)  # waits: the other branches get tasks of their own
            return src

        flow.add(branch, name=f"b{i}")

    async def main() -> None:
        run = await flow.arun()
        assert run.status is nf.RunStatus.SUCCEEDED

    gc.collect()
    gc.disable()
    try:
        asyncio.run(main())
        assert len(tasks) == 20
        alive = [ref() for ref in tasks if ref() is not None]
        assert not alive, f"{len(alive)} worker tasks left for the cyclic collector"
    finally:
        gc.enable()
