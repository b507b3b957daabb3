"""A sub-flow node's run record is attached when the sub-run starts (issue 12): a running sub-flow's nodes
can be seen live, and a cancelled or timed-out sub-flow node keeps its sub-run (finished inner nodes
included), in memory and in the checkpoint store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import nbflow as nf


def _inner(name: str) -> nf.Flow:
    inner = nf.Flow(name)

    @inner.node
    def fast(x: int) -> int:
        return x + 1

    @inner.node
    async def slow(fast: int) -> int:
        await asyncio.sleep(30)
        return fast

    return inner


def _assert_kept(sub: nf.Run | None, fast: int = 2) -> None:
    assert sub is not None, "the sub-run record was lost"
    assert sub.status is nf.RunStatus.CANCELLED
    assert sub.nodes["fast"].status is nf.NodeStatus.SUCCEEDED and sub.nodes["fast"].output == fast
    assert sub.nodes["slow"].status is nf.NodeStatus.CANCELLED


def test_a_timed_out_sub_flow_node_keeps_its_sub_run(tmp_path: Path) -> None:
    outer = nf.Flow("outer_node_timeout")
    outer.add(_inner("inner_node_timeout"), name="sub", timeout=0.5)
    db = tmp_path / "runs.db"
    run = outer.run(x=1, show=False, store=db)
    rec = run.nodes["sub"]
    assert rec.status is nf.NodeStatus.FAILED and rec.error_type == "NodeTimeoutError"
    _assert_kept(rec.subrun)
    assert run.record("sub.fast").output == 2 and [p for p, _ in run.walk()] == ["sub", "sub.fast", "sub.slow"]
    back = nf.load_run(db, run.run_id)
    _assert_kept(back.nodes["sub"].subrun)


def test_a_sub_flow_node_cut_by_the_run_deadline_keeps_its_sub_run(tmp_path: Path) -> None:
    outer = nf.Flow("outer_deadline")
    outer.add(_inner("inner_deadline"), name="sub")
    db = tmp_path / "runs.db"
    run = outer.run(x=1, show=False, timeout=0.5, store=db)
    assert run.status is nf.RunStatus.CANCELLED and run.nodes["sub"].status is nf.NodeStatus.CANCELLED
    _assert_kept(run.nodes["sub"].subrun)
    _assert_kept(nf.load_run(db, run.run_id).nodes["sub"].subrun)


@pytest.mark.anyio
async def test_a_running_sub_flow_is_visible_and_a_cancelled_one_is_kept() -> None:
    outer = nf.Flow("outer_live")
    outer.add(_inner("inner_live"), name="sub")
    handle = outer.start(x=1, show=False)
    for _ in range(200):  # until the inner 'slow' node runs
        sub = handle.run.nodes["sub"].subrun
        if sub is not None and sub.nodes["slow"].status is nf.NodeStatus.RUNNING:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the running sub-flow's record never appeared on its node")
    assert handle.run.record("sub.fast").output == 2
    assert handle.run.record("sub.slow").status is nf.NodeStatus.RUNNING
    dot = outer.to_dot(handle.run).source  # the live drawing shows the inner nodes' states
    assert "sub.slow" in dot
    handle.cancel()
    run = await handle
    assert run.status is nf.RunStatus.CANCELLED
    _assert_kept(run.nodes["sub"].subrun)


def test_a_map_over_a_sub_flow_keeps_each_items_sub_run_when_timed_out() -> None:
    outer = nf.Flow("outer_map_timeout")

    @outer.node
    def xs(n: int) -> list[int]:
        return list(range(n))

    outer.add(_inner("inner_map_timeout"), name="each", map=nf.Map(over="x"), inputs={"x": "xs"}, timeout=0.5)
    run = outer.run(n=2, show=False)
    items = run.nodes["each"].items
    assert items is not None and len(items) == 2
    for ir in items:
        _assert_kept(ir.run, fast=ir.index + 1)
