"""Batch-row cells, a run's inputs and the values inside map items stored once (issue 34, batch schema 4 /
checkpoint schema 5): a frame every row of a batch is given is one value of the store file, whatever the number
of rows, experiments and kept runs; everything reads back equal; ``gc`` collects what a deleted batch leaves."""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbflow as nf
from tests.store import values4_flow

RESOURCES = Path(__file__).parent.parent / "resources"


def file_bytes(db: Path) -> int:
    return sum(os.path.getsize(p) for p in (db, Path(f"{db}-wal")) if os.path.exists(p))


def table(db: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(db)) as con:
        return con.execute(sql).fetchall()


def big_frame(seed: int = 0, n: int = 40_000) -> pd.DataFrame:
    return pd.DataFrame(np.random.default_rng(seed).normal(size=(n, 8)), columns=list("abcdefgh"))


def shared_input_flow() -> nf.Flow:
    flow = nf.Flow("shared_input")

    @flow.node
    def rows_of(data: pd.DataFrame, k: int) -> int:
        return len(data) + k

    @flow.node
    def total(data: pd.DataFrame, k: int) -> float:
        return float(data["a"].sum()) + k

    return flow


def encoded(value: object) -> int:
    from nbflow._store.pickling import dumps

    return len(dumps(value))


@pytest.mark.parametrize("keep", ["all", "none"])
def test_a_frame_given_to_24_rows_is_stored_once(tmp_path: Path, keep: str) -> None:
    db = tmp_path / "runs.db"
    data = big_frame()
    frame = shared_input_flow().batch([{"data": data, "k": k} for k in range(24)], store=db, keep=keep, progress=False)
    assert (frame["status"] == "succeeded").all()
    size, one = file_bytes(db), encoded(data)
    assert one > 2_000_000
    assert size <= 1.2 * one, f"{size / one:.2f}x the frame's bytes"  # was 24x (keep='none') to 48x ('all')
    assert table(db, "SELECT count(*) FROM nbflow_values") == [(1,)]
    back = nf.load_batch(db, frame.attrs["batch_id"])
    assert len(back) == 24
    for cell in back["data"]:
        pd.testing.assert_frame_equal(cell, data)
    assert back["total"].tolist() == frame["total"].tolist()
    if keep == "all":
        for run_id in frame["run_id"]:
            run = nf.load_run(db, run_id)
            pd.testing.assert_frame_equal(run.inputs["data"], data)
            assert run["total"] == float(data["a"].sum()) + run.inputs["k"]


def test_a_second_experiment_over_the_same_frame_adds_no_value_and_gc_keeps_what_a_live_batch_holds(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    data, other = big_frame(), big_frame(seed=1)
    flow = shared_input_flow()
    first = flow.batch([{"data": data, "k": k} for k in range(6)], store=db, experiment="first", progress=False)
    size = file_bytes(db)
    second = flow.batch([{"data": data, "k": k} for k in range(6, 12)], store=db, experiment="second", progress=False)
    third = flow.batch([{"data": other, "k": 1}], store=db, keep="none", experiment="third", progress=False)
    assert table(db, "SELECT count(*) FROM nbflow_values") == [(2,)]  # data once, other once
    assert file_bytes(db) < size + 1.2 * encoded(other)
    with nf.BatchStore(db) as store:
        store.delete_batch(first.attrs["batch_id"])
        assert store.gc().values == 0  # the second experiment still holds the frame
        store.delete_batch(third.attrs["batch_id"])  # (no kept run: its rows alone held `other`)
        done = store.gc()
        assert done.values == 1 and done.value_bytes == encoded(other)
        store.delete_batch(second.attrs["batch_id"])
        assert store.gc().values == 1
    assert table(db, "SELECT count(*) FROM nbflow_values") == [(0,)]
    assert file_bytes(db) < 200_000


def test_nbflow_gc_collects_a_deleted_batchs_cells(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "runs.db"
    data = big_frame()
    frame = shared_input_flow().batch([{"data": data, "k": k} for k in range(3)], store=db, keep="none", progress=False)
    with nf.BatchStore(db) as store:
        store.delete_batch(frame.attrs["batch_id"])
    before = file_bytes(db)
    done = subprocess.run([sys.executable, "-m", "nbflow", "gc", str(db)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert file_bytes(db) < before - 2_000_000


def map_flow() -> nf.Flow:
    flow = nf.Flow("map_frames")

    @flow.map(over="seeds")
    def make(seeds: int) -> pd.DataFrame:
        return big_frame(seeds, 5_000)

    @flow.node
    def total(make: list, k: int) -> float:
        return float(sum(f["a"].sum() for f in make)) + k

    return flow


def test_the_frames_of_map_items_are_stored_once_across_rows(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    frame = map_flow().batch([{"seeds": [1, 2, 3], "k": k} for k in range(8)], store=db, keep="all", progress=False)
    assert (frame["status"] == "succeeded").all()
    items = [encoded(big_frame(s, 5_000)) for s in (1, 2, 3)]
    state = table(db, "SELECT sum(length(state)) FROM checkpoint_nodes")[0][0]
    assert state < 8 * 2_000  # each run's items refer to the frames (it was 8 x 3 frames)
    # the items' frames once each, and the map's output (their list) once
    assert file_bytes(db) < 1.2 * 2 * sum(items)
    for i, run_id in enumerate(frame["run_id"]):
        run = nf.load_run(db, run_id)
        for seed, item in zip((1, 2, 3), run.nodes["make"].items, strict=True):
            pd.testing.assert_frame_equal(item.output, big_frame(seed, 5_000))
        assert run["total"] == frame.loc[i, "total"]


def test_a_sub_flow_record_refers_to_its_frames(tmp_path: Path) -> None:
    inner = nf.Flow("inner")

    @inner.node
    def grow(data: pd.DataFrame) -> pd.DataFrame:
        return data * 2

    outer = nf.Flow("outer")
    outer.add(inner, name="sub", inputs={"data": "data"})

    @outer.node
    def total(sub: dict) -> float:
        return float(sub["grow"]["a"].sum())

    db = tmp_path / "runs.db"
    data = big_frame(n=10_000)
    frame = outer.batch([{"data": data, "k": k} for k in range(6)], store=db, keep="all", progress=False)
    assert (frame["status"] == "succeeded").all(), frame.get("error_message")
    state = table(db, "SELECT sum(length(state)) FROM checkpoint_nodes")[0][0]
    assert state < 6 * 20_000  # each sub-flow record refers to its frames (one is 640 kB)
    run = nf.load_run(db, str(frame.loc[2, "run_id"]))
    sub = run.nodes["sub"].subrun
    pd.testing.assert_frame_equal(sub.nodes["grow"].output, data * 2)
    pd.testing.assert_frame_equal(sub.inputs["data"], data)


def test_a_schema_4_store_opens_reads_back_and_takes_cells_stored_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBFLOW_STORE_KEY", values4_flow.KEY)  # its map states are pickles signed with that key
    db = tmp_path / "values4.db"
    shutil.copy(RESOURCES / "values4_store.db", db)
    assert dict(table(db, "SELECT key, value FROM nbflow_meta")) == {"batch_schema": "3", "checkpoint_schema": "4"}
    data = values4_flow.frame()
    old = nf.load_batch(db, "shared input")
    assert len(old) == 4 and (old["status"] == "succeeded").all()
    for cell in old["data"]:
        pd.testing.assert_frame_equal(cell, data)
    for run_id in old["run_id"]:
        run = nf.load_run(db, run_id)
        pd.testing.assert_frame_equal(run.inputs["data"], data)
        assert [len(i.output) for i in run.nodes["part"].items] == [50, 50, 50]
    assert dict(table(db, "SELECT key, value FROM nbflow_meta")) == {"batch_schema": "4", "checkpoint_schema": "5"}
    before = table(db, "SELECT count(*) FROM nbflow_values")[0][0]
    again = values4_flow.make_flow().batch(values4_flow.rows(), store=db, keep="all", progress=False)
    assert again["total"].tolist() == old["total"].tolist()
    keys = {k for (k,) in table(db, "SELECT key FROM nbflow_values")}
    # the three item frames; the rows' frame is the value the old runs stored as `part`'s recorded input
    assert len(keys) == before + 3
    pd.testing.assert_frame_equal(nf.load_batch(db, "shared input"), old)  # the old rows read as before
    with nf.BatchStore(db) as store:
        assert store.gc().values == 0


def test_a_loops_iterations_refer_to_their_frames(tmp_path: Path) -> None:
    flow = nf.Flow("loop_frames")

    @flow.loop(feed="data", max_iterations=3)
    def smooth(data: pd.DataFrame, k: int) -> pd.DataFrame:
        return data.rolling(2, min_periods=1).mean()

    db = tmp_path / "runs.db"
    data = big_frame(n=10_000)
    frame = flow.batch([{"data": data, "k": k} for k in range(4)], store=db, keep="all", progress=False)
    assert (frame["status"] == "succeeded").all(), frame.get("error_message")
    state = table(db, "SELECT sum(length(state)) FROM checkpoint_nodes")[0][0]
    assert state < 4 * 20_000  # each run's 3 iterations refer to their frames (one is 640 kB)
    run = nf.load_run(db, str(frame.loc[1, "run_id"]))
    want = data
    for it in run.nodes["smooth"].iterations:
        want = want.rolling(2, min_periods=1).mean()
        pd.testing.assert_frame_equal(it.output, want)
