"""Nodes run on their worker until they first wait; only then do other ready nodes get workers.

What must hold whatever the scheduling: branches that wait still overlap, a node sees one task
from start to end (timeouts and cancel scopes inside it work), and cancellation reaches a node
that is waiting.
"""

from __future__ import annotations

import asyncio
import time

import anyio
import pytest

import nbflow as nf


def test_waiting_branches_still_overlap() -> None:
    flow = nf.Flow("overlap")
    started: list[int] = []
    finished: list[int] = []

    @flow.node
    def src() -> int:
        return 1

    for i in range(4):

        async def branch(src: int, i: int = i) -> int:
            started.append(i)
            await asyncio.sleep(0.2)
            finished.append(i)
            return src

        flow.add(branch, name=f"b{i}")

    run = flow.run()
    assert run.status is nf.RunStatus.SUCCEEDED
    assert sorted(started) == [0, 1, 2, 3] and sorted(finished) == [0, 1, 2, 3]
    # Every branch started before the first one finished: they waited together.
    first_done_at = run.nodes[f"b{finished[0]}"].finished_at
    assert all(run.nodes[f"b{i}"].started_at < first_done_at for i in range(4)), run


def test_a_node_keeps_one_task_and_its_timeouts_work() -> None:
    flow = nf.Flow("task")
    seen: dict[str, list[object]] = {}

    @flow.node
    async def quick() -> int:
        return 1

    @flow.node
    async def slow_timeout(quick: int) -> str:
        before = asyncio.current_task()
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            pass
        seen["asyncio"] = [before, asyncio.current_task()]
        return "timed out"

    @flow.node
    async def anyio_scope(quick: int) -> str:
        before = asyncio.current_task()
        with anyio.move_on_after(0.05):
            await anyio.sleep(5)
        seen["anyio"] = [before, asyncio.current_task()]
        return "moved on"

    t0 = time.perf_counter()
    run = flow.run()
    assert time.perf_counter() - t0 < 2
    assert run.status is nf.RunStatus.SUCCEEDED, run
    assert run["slow_timeout"] == "timed out" and run["anyio_scope"] == "moved on"
    for before, after in seen.values():
        assert before is after and before is not None


@pytest.mark.anyio
async def test_cancelling_the_run_cancels_a_waiting_node() -> None:
    flow = nf.Flow("cancel")
    cancelled = []

    @flow.node
    async def a() -> int:
        return 1

    @flow.node
    async def waits(a: int) -> int:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return a

    task = asyncio.ensure_future(flow.arun())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled == [True]
    assert flow.last_run.nodes["waits"].status is nf.NodeStatus.CANCELLED
    assert flow.last_run.nodes["a"].status is nf.NodeStatus.SUCCEEDED
