"""A local batch collects young garbage less often while its rows run, and puts the setting back."""

from __future__ import annotations

import asyncio
import gc

import pytest

import nbflow as nf


@pytest.fixture
def threshold():
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def seen_flow(seen: list[tuple[int, int, int]], fail: bool = False) -> nf.Flow:
    flow = nf.Flow("gc_seen")

    @flow.node
    async def look(x: int) -> int:
        seen.append(gc.get_threshold())
        await asyncio.sleep(0)
        if fail and x == 1:
            raise ValueError("row 1 fails")
        return x

    return flow


def test_threshold_is_raised_while_rows_run_and_put_back(threshold):
    gc.set_threshold(700, 10, 10)
    seen: list[tuple[int, int, int]] = []
    frame = seen_flow(seen, fail=True).batch([{"x": i} for i in range(5)], concurrency=2, progress=False)
    assert frame["status"].tolist() == ["succeeded", "failed", "succeeded", "succeeded", "succeeded"]
    assert len(seen) == 5 and all(t[0] > 700 and t[1:] == (10, 10) for t in seen)
    assert gc.get_threshold() == (700, 10, 10)


def test_put_back_after_an_interrupted_batch(threshold):
    gc.set_threshold(700, 10, 10)
    flow = nf.Flow("gc_interrupt")

    @flow.node
    def stop(x: int) -> int:
        if x == 2:
            raise KeyboardInterrupt
        return x

    with pytest.raises(nf.BatchInterrupted) as info:
        flow.batch([{"x": i} for i in range(5)], concurrency=1, progress=False)
    assert info.value.frame["status"].iloc[0] == "succeeded"
    assert gc.get_threshold() == (700, 10, 10)


def test_put_back_after_a_cancelled_batch(threshold):
    gc.set_threshold(700, 10, 10)
    flow = nf.Flow("gc_cancel")

    @flow.node
    async def slow(x: int) -> int:
        await asyncio.sleep(10)
        return x

    async def main() -> None:
        task = asyncio.ensure_future(flow.abatch([{"x": i} for i in range(4)], concurrency=2, progress=False))
        await asyncio.sleep(0.05)
        assert gc.get_threshold()[0] > 700
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert gc.get_threshold() == (700, 10, 10)


def test_two_batches_at_once_restore_once_both_end(threshold):
    gc.set_threshold(700, 10, 10)
    flow = nf.Flow("gc_two")
    gate: list[asyncio.Event] = []

    @flow.node
    async def wait(x: int) -> int:
        if x == 0:
            await gate[0].wait()  # the first batch's row holds until the second batch has ended
        return x

    async def main() -> None:
        gate.append(asyncio.Event())
        first = asyncio.ensure_future(flow.abatch([{"x": 0}], progress=False))
        await asyncio.sleep(0.01)
        await flow.abatch([{"x": 9}], progress=False)
        assert not first.done() and gc.get_threshold()[0] > 700  # the first batch still runs
        gate[0].set()
        await first

    asyncio.run(main())
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_or_disabled_threshold_is_left_alone(threshold):
    seen: list[tuple[int, int, int]] = []
    for setting in ((50_000, 20, 20), (0, 10, 10)):
        gc.set_threshold(*setting)
        seen.clear()
        seen_flow(seen).batch([{"x": 1}, {"x": 2}], progress=False)
        assert seen == [setting, setting]
        assert gc.get_threshold() == setting


def test_a_threshold_changed_during_the_batch_is_kept(threshold):
    gc.set_threshold(700, 10, 10)
    flow = nf.Flow("gc_changed")

    @flow.node
    def tune(x: int) -> int:
        gc.set_threshold(1234, 5, 5)  # the user's own choice, made while the batch runs
        return x

    flow.batch([{"x": 1}], progress=False)
    assert gc.get_threshold() == (1234, 5, 5)
