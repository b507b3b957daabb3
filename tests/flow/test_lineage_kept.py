"""A batch's kept run is stored without a lineage of its own: its row holds it, in the row's form, and the run
loaded from the store reads it from there (with the batch's code versions and environment)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf


def make_flow() -> nf.Flow:
    flow = nf.Flow("kept_lineage")

    @flow.node
    def prepare(x: int, scale: int = 3) -> int:
        return x * scale

    @flow.node
    def score(prepare: int, x: int) -> float:
        if x == 99:
            raise KeyboardInterrupt  # (the interrupted batch below)
        return prepare / 2

    return flow


def _columns(path: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_a_kept_run_reads_its_rows_lineage_after_a_restart(tmp_path: Path) -> None:
    flow = make_flow()
    path = tmp_path / "runs.db"
    df = flow.batch([{"x": 1}, {"x": 2, "scale": 5}], store=path, keep="all", batch_id="b", progress=False)
    live = [df.nbflow.run(i).lineage() for i in range(2)]

    # The format: the run records hold no lineage, every row does (in the row's form: no code, no environment).
    assert _columns(path, "SELECT lineage FROM checkpoint_runs") == [(None,), (None,)]
    rows = [json.loads(t) for (t,) in _columns(path, "SELECT lineage FROM batch_rows ORDER BY row_index")]
    assert all(set(r) == {"nodes"} for r in rows) and rows[1]["nodes"]["prepare"][1][1][3] == "5"

    # A fresh read of the store (nothing of this process's runs): the same lineage, environment included.
    loaded = nf.load_batch(path, "b")
    for i in range(2):
        run = nf.load_run(path, loaded["run_id"].iloc[i])
        got = run.lineage()
        pd.testing.assert_frame_equal(got, live[i])
        assert got.attrs["environment"] == live[i].attrs["environment"]
        assert got.attrs["environment"]["python"]  # (recorded, not empty)
        pd.testing.assert_frame_equal(loaded.nbflow.lineage(i), live[i])


def test_an_interrupted_batchs_kept_runs_keep_their_environment(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with pytest.raises(nf.BatchInterrupted):
        make_flow().batch(
            [{"x": 1}, {"x": 2}, {"x": 99}], store=path, keep="all", batch_id="b", concurrency=1, progress=False
        )
    run_ids = [r for (r,) in _columns(path, "SELECT run_id FROM batch_rows ORDER BY row_index")]
    assert len(run_ids) == 2  # the rows before the interrupt
    lin = nf.load_run(path, run_ids[1]).lineage("score")
    assert lin.attrs["environment"]["python"] and lin["code_version"].notna().all()
    assert set(lin["node"]) == {"prepare", "score"}


def test_a_run_record_that_holds_its_lineage_is_read_first(tmp_path: Path) -> None:
    """A store written before rows held a kept run's lineage: the run's record has it (read as written)."""
    path = tmp_path / "runs.db"
    df = make_flow().batch([{"x": 4}], store=path, keep="all", batch_id="b", progress=False)
    run_id = df["run_id"].iloc[0]
    own = {"env": {"nbflow": "0.0-old"}, "nodes": {"prepare": {"code": "c1", "output": "v:1", "inputs": []}}}
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE checkpoint_runs SET lineage = ? WHERE run_id = ?", (json.dumps(own), run_id))
    db.close()
    got = nf.load_run(path, run_id).lineage()
    assert got.attrs["environment"] == {"nbflow": "0.0-old"} and list(got["node"]) == ["prepare"]


def test_a_garbled_experiment_record_names_the_file(tmp_path: Path) -> None:
    """Loading a kept run whose batch's experiment record was changed by another program: a StoreError that names
    the store's file and the run (as every garbled field's), not a bare JSON error."""
    path = tmp_path / "runs.db"
    df = make_flow().batch([{"x": 4}], store=path, keep="all", batch_id="b", progress=False)
    run_id = df["run_id"].iloc[0]
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE batches SET meta = ? WHERE batch_id = 'b'", ("{not json",))
    db.close()
    with pytest.raises(nf.StoreError) as caught:
        nf.load_run(path, run_id)
    message = str(caught.value)
    assert str(path) in message and run_id in message and "Restore it from a backup" in message
