"""A node's own CancelledError or sys.exit() is that node's failure everywhere: under a node's
timeout=, under the run's deadline, in map items (issue 12). Never a cancelled-looking success, never
an exception escaping run(), never a hang."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

import nbflow as nf


def _cancels_itself() -> None:
    raise asyncio.CancelledError


def _flow_with(kind: str, **options: object) -> nf.Flow:
    flow = nf.Flow(f"self_cancel_{kind}")

    if kind == "async":

        @flow.node(name="bad", **options)
        async def bad_async(x: int) -> int:
            raise asyncio.CancelledError

    elif kind == "sync":

        @flow.node(name="bad", thread=True, **options)
        def bad_sync(x: int) -> int:
            raise asyncio.CancelledError

    else:

        @flow.node(name="bad", **options)
        def bad_exit(x: int) -> int:
            sys.exit(7)

    @flow.node
    def after(bad: int) -> int:
        return bad

    @flow.node
    def fine(x: int) -> int:
        return x * 10

    return flow


@pytest.mark.parametrize("kind", ["async", "sync", "exit"])
@pytest.mark.parametrize("options", [{"timeout": 5}, {"timeout": 5, "retry": 2}], ids=["timeout", "timeout+retry"])
@pytest.mark.parametrize("deadline", [None, 30], ids=["no-deadline", "run-deadline"])
def test_under_timeout_the_node_fails_and_the_run_fails(kind: str, options: dict, deadline: float | None) -> None:
    flow = _flow_with(kind, **options)
    t0 = time.perf_counter()
    run = flow.run(x=1, show=False, timeout=deadline)
    assert time.perf_counter() - t0 < 4  # nothing waited for the timeouts
    bad = run.nodes["bad"]
    assert bad.status is nf.NodeStatus.FAILED, bad
    assert "itself" in str(bad.error) or "sys.exit(7)" in str(bad.error)
    assert "'bad'" in str(bad.error)
    assert run.nodes["after"].status is nf.NodeStatus.SKIPPED
    assert run["fine"] == 10
    assert run.status is nf.RunStatus.FAILED and run.reason is None


@pytest.mark.parametrize("kind", ["async", "sync", "exit"])
def test_a_map_item_raising_it_fails_the_item_not_silently_drops_it(kind: str) -> None:
    flow = nf.Flow(f"map_self_cancel_{kind}")

    @flow.node
    def xs(n: int) -> list[int]:
        return list(range(n))

    if kind == "async":

        @flow.map(over="xs", errors="continue")
        async def each(xs: int) -> int:
            if xs == 1:
                raise asyncio.CancelledError
            return xs

    elif kind == "sync":

        @flow.map(over="xs", errors="continue", thread=True)
        def each(xs: int) -> int:
            if xs == 1:
                raise asyncio.CancelledError
            return xs

    else:

        @flow.map(over="xs", errors="continue")
        def each(xs: int) -> int:
            if xs == 1:
                sys.exit(2)
            return xs

    run = flow.run(n=3, show=False)
    items = run.nodes["each"].items
    assert items is not None
    assert [i.status for i in items] == [nf.NodeStatus.SUCCEEDED, nf.NodeStatus.FAILED, nf.NodeStatus.SUCCEEDED]
    assert "each[1]" in str(items[1].error)
    out = run["each"]
    assert out[0] == 0 and out[2] == 2 and isinstance(out[1], nf.ItemFailed)  # not [0, 2]


def test_a_terminating_map_fails_the_node_and_the_batch_row() -> None:
    flow = nf.Flow("map_self_cancel_terminate")

    @flow.map(over="xs")
    async def each(xs: int) -> int:
        if xs == 1:
            raise asyncio.CancelledError
        return xs

    run = flow.run(xs=[0, 1, 2], show=False)
    assert run.status is nf.RunStatus.FAILED
    assert run.nodes["each"].error_type == "MapItemError" and "itself" in str(run.nodes["each"].error)
    frame = flow.batch([{"xs": [0, 1]}, {"xs": [0, 2]}])
    assert list(frame.status) == ["failed", "succeeded"]
    assert list(frame.each)[1] == [0, 2]


def test_a_real_node_timeout_still_times_out() -> None:
    flow = nf.Flow("real_timeout_still")

    @flow.node(timeout=0.2)
    async def slow(x: int) -> int:
        await asyncio.sleep(5)
        return x

    run = flow.run(x=1, show=False)
    assert run.nodes["slow"].error_type == "NodeTimeoutError"
