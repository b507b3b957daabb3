"""The runs a batch kept in memory are released with its frame: a deleted frame's runs are garbage (they stayed
referenced by the recent batches, up to 8 batches of 10,000 runs), while any frame that still names them (a
filtered copy, ``flow.last_batch``) keeps them."""

from __future__ import annotations

import gc
import weakref

import nbflow as nf


def _flow() -> nf.Flow:
    flow = nf.Flow("released")

    @flow.node
    def out(x: int) -> list[int]:
        return [x] * 1000

    return flow


def test_a_deleted_frames_kept_runs_are_released() -> None:
    flow = _flow()
    df = flow.batch([{"x": i} for i in range(5)], keep="all", progress=False)
    runs = [weakref.ref(df.nbflow.run(i)) for i in range(5)]
    subset = df[df.x >= 3]  # a filtered copy names the same runs
    flow.batch([{"x": 9}], keep="all", progress=False)  # flow.last_batch is another frame now
    del df
    gc.collect()
    assert all(r() is not None for r in runs)  # the copy still opens its rows
    assert subset.nbflow.run(3)["out"] == [3] * 1000
    del subset
    gc.collect()
    assert [r() for r in runs] == [None] * 5


def test_the_last_batch_keeps_its_runs() -> None:
    flow = _flow()
    df = flow.batch([{"x": 1}], keep="all", progress=False)
    run = weakref.ref(df.nbflow.run(0))
    del df
    gc.collect()
    assert run() is not None  # flow.last_batch is the frame
    assert flow.last_batch is not None and flow.last_batch.nbflow.run(0)["out"] == [1] * 1000
