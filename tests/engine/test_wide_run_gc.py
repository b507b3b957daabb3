"""A run of many nodes collects young garbage less often while it runs, and puts the setting back.

Its branches keep objects alive across their awaits; a young collection walks all of them
(nbflow/_engine/collector.py, docs/benchmarks.md "Session 15"). A small run and a chain are left alone."""

from __future__ import annotations

import asyncio
import gc

import pytest

import nbflow as nf

WIDE = 40


@pytest.fixture
def threshold():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def fan_out(n: int, seen: list[tuple[int, int, int]], fail: bool = False, wait: float = 0.0) -> nf.Flow:
    flow = nf.Flow(f"gc_fan_{n}")

    @flow.node
    def src() -> int:
        return 1

    for i in range(n):

        async def branch(src: int, i: int = i) -> int:
            seen.append(gc.get_threshold())
            await asyncio.sleep(wait)
            if fail and i == 3:
                raise ValueError("branch 3 fails")
            return src + i

        flow.add(branch, name=f"b{i}")
    return flow


def test_a_wide_run_eases_the_collector_while_it_runs_and_puts_it_back(threshold):
    seen: list[tuple[int, int, int]] = []
    run = fan_out(WIDE, seen).run()
    assert run.status is nf.RunStatus.SUCCEEDED
    assert len(seen) == WIDE and all(t[0] > 700 and t[1:] == (10, 10) for t in seen)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_small_run_leaves_the_collector_alone(threshold):
    seen: list[tuple[int, int, int]] = []
    assert fan_out(3, seen).run().status is nf.RunStatus.SUCCEEDED
    assert seen == [(700, 10, 10)] * 3


def test_put_back_after_a_failed_and_a_cancelled_wide_run(threshold):
    seen: list[tuple[int, int, int]] = []
    run = fan_out(WIDE, seen, fail=True).run()
    assert run.status is nf.RunStatus.FAILED and run.nodes["b3"].status is nf.NodeStatus.FAILED
    assert gc.get_threshold() == (700, 10, 10)

    slow = fan_out(WIDE, seen, wait=10)

    async def main() -> None:
        task = asyncio.ensure_future(slow.arun())
        await asyncio.sleep(0.05)
        assert gc.get_threshold()[0] > 700  # its branches wait
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert gc.get_threshold() == (700, 10, 10)


def test_a_wide_run_inside_a_batch_puts_back_once_the_batch_ends(threshold):
    flow = nf.Flow("gc_rows")
    inner_seen: list[tuple[int, int, int]] = []
    inner = fan_out(WIDE, inner_seen)

    @flow.node
    async def row(x: int) -> int:
        run = await inner.arun()
        assert gc.get_threshold()[0] > 700  # the batch still runs: still eased after the inner run ended
        return x + len(run.outputs)

    frame = flow.batch([{"x": i} for i in range(3)], progress=False)
    assert frame["status"].tolist() == ["succeeded"] * 3
    assert gc.get_threshold() == (700, 10, 10)
