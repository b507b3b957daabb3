"""Each value stored once (issue 34): a sweep's shared upstream frames are one row of the store file, whatever the
number of rows, runs and experiments; kept runs read back equal (after a restart, after a SIGKILL); ``gc``."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from tests.store.values_child import GRID, ROWS, make_flow

RESOURCES = Path(__file__).parent.parent / "resources"
ROOT = Path(__file__).parent.parent.parent


def file_bytes(db: Path) -> int:
    return sum(os.path.getsize(p) for p in (db, Path(f"{db}-wal")) if os.path.exists(p))


def unique_value_bytes(runs: list[nf.Run]) -> int:
    """The bytes of the runs' distinct node outputs and recorded inputs, each encoded once by the store's codec."""
    from nbflow._engine.caching import data_version
    from nbflow._store.pickling import dumps

    seen: dict[str | None, int] = {}
    for run in runs:
        for rec in run.nodes.values():
            for value in (rec.output, *rec.inputs.values()):
                seen.setdefault(data_version(value), len(dumps(value)))
    return sum(seen.values())


def table(db: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(db)) as con:
        return con.execute(sql).fetchall()


def child(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.store.values_child", *args], cwd=ROOT, **kw)


def assert_same_run(back: nf.Run, original: nf.Run, reused: Sequence[str] = ()) -> None:
    """The same outputs, and the same recorded inputs for every node that ran (a ``reused`` node was fed its
    stored output: it records none)."""
    assert list(back.nodes) == list(original.nodes)
    for name, rec in original.nodes.items():
        got = back.nodes[name]
        assert_equal_value(got.output, rec.output)
        if name in reused:
            continue
        assert set(got.inputs) == set(rec.inputs), name
        for k, v in rec.inputs.items():
            assert_equal_value(got.inputs[k], v)


def assert_equal_value(got: object, want: object) -> None:
    if isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want)  # type: ignore[arg-type]
    else:
        assert got == want


def test_identical_frames_across_24_rows_are_stored_once(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = make_flow()
    frame = flow.batch(ROWS, grid=GRID, store=db, progress=False)  # keep="all": every row's run on disk
    assert len(frame) == 24 and (frame["status"] == "succeeded").all()
    runs = frame.nbflow.runs()
    raw = runs[0]["raw"]
    assert raw.memory_usage(deep=True).sum() > 2_000_000  # a few MB, read back from the file
    unique = unique_value_bytes(runs)
    size = file_bytes(db)
    # Before: every row kept raw, X_train, X_test and each as the next nodes' inputs again (~24 x 9 frames).
    assert size <= 1.2 * unique, (size, unique)
    # raw, X_train and X_test, once each (the scores are small: in their records)
    assert table(db, "SELECT count(*) FROM nbflow_values")[0][0] == 3
    for run in runs:
        pd.testing.assert_frame_equal(run["raw"], raw)
        assert run.nodes["X_train"].inputs["raw"] is run["raw"]  # one value, one object when read back


def test_a_second_experiment_over_the_same_frames_adds_no_frame(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = make_flow()
    flow.batch(ROWS, grid=GRID, store=db, experiment="first", progress=False)
    before = file_bytes(db)
    flow.batch(ROWS, grid={"k": [100, 101, 102]}, store=db, experiment="second", progress=False)
    assert table(db, "SELECT count(*) FROM nbflow_values")[0][0] == 3
    assert file_bytes(db) - before < 0.05 * before  # rows and records, not frames


def test_gc_frees_a_deleted_experiments_values_and_keeps_the_shared_ones(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = make_flow()
    kept = flow.batch(ROWS, grid={"k": [1, 2]}, store=db, experiment="kept", progress=False)
    gone = flow.batch([{"n": 40_000, "seed": 1}], grid={"k": [1, 2]}, store=db, experiment="gone", progress=False)
    with nf.BatchStore(db) as store:
        assert store.gc().values == 0  # everything is referenced
        listed = store.values()
        assert len(listed) == 6 and listed["runs"].tolist() == [2] * 6 and listed["bytes"].min() > 100_000
        store.delete_batch("gone")
        before = file_bytes(db)
        done = store.gc()
    assert done.values == 3 and done.value_bytes > 2_000_000  # seed 1's raw, X_train, X_test
    assert done.freed > 2_000_000 and file_bytes(db) < before - 2_000_000
    assert done.file_after == file_bytes(db)
    with pytest.raises(nf.StoreError, match="has no run"):
        nf.load_run(db, gone.loc[0, "run_id"])
    for i in range(2):  # the shared frames of the batch that stays
        back = nf.load_run(db, kept.loc[i, "run_id"])
        pd.testing.assert_frame_equal(back["raw"], make_flow().run(n=40_000, targets=["raw"])["raw"])
    assert nf.load_batch(db, "kept")["score"].tolist() == kept["score"].tolist()


def test_nbflow_gc_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    make_flow().batch(ROWS, grid={"k": [1]}, store=db, experiment="old", progress=False)
    with nf.BatchStore(db) as store:
        store.delete_batch("old")
    before = file_bytes(db)
    done = subprocess.run(
        [sys.executable, "-m", "nbflow", "gc", str(db)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "deleted 3 stored values no run refers to" in done.stdout, done.stdout
    assert file_bytes(db) < before - 2_000_000
    assert table(db, "SELECT count(*) FROM nbflow_values")[0][0] == 0


def test_a_kept_run_read_back_after_a_restart_equals_the_original(tmp_path: Path) -> None:
    db, out = tmp_path / "runs.db", tmp_path / "back.pkl"
    flow = make_flow()
    frame = flow.batch(ROWS, grid={"k": [0, 5, 9]}, store=db, progress=False)
    proc = child("read", str(db), str(out))
    assert proc.wait(120) == 0
    with open(out, "rb") as f:
        back = pickle.load(f)
    for i, k in enumerate([0, 5, 9]):
        original = flow.run(n=40_000, k=k)  # the same values, computed again in this process
        nodes = back[frame.loc[i, "run_id"]]
        assert list(nodes) == list(original.nodes)
        for name, rec in original.nodes.items():
            output, inputs = nodes[name]
            assert_equal_value(output, rec.output)
            assert set(inputs) == set(rec.inputs)
            for key, value in rec.inputs.items():
                assert_equal_value(inputs[key], value)


def test_a_sigkill_midway_leaves_a_store_that_resumes(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = child("batch", str(db), "0.25")
    try:
        deadline = time.monotonic() + 120
        done = 0
        while time.monotonic() < deadline and done < 6:
            time.sleep(0.05)
            if db.exists():
                try:
                    done = table(db, "SELECT count(*) FROM batch_rows")[0][0]
                except sqlite3.OperationalError:  # the tables are not there yet
                    pass
        assert done >= 6, "the child stored no rows"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    stored = table(db, "SELECT count(*) FROM batch_rows")[0][0]
    assert 6 <= stored < 24  # killed midway
    # Every reference the file holds points at a value it holds (a reference is written with its value).
    assert table(db, "SELECT count(*) FROM nbflow_value_refs WHERE key NOT IN (SELECT key FROM nbflow_values)") == [
        (0,)
    ]
    flow = make_flow()
    with pytest.warns(nf.NbflowWarning, match="reus"):
        frame = flow.batch(ROWS, grid=GRID, store=db, resume=True, progress=False)
    assert (frame["status"] == "succeeded").all() and len(frame) == 24
    original = flow.run(n=40_000, k=3)
    # The child's node that sleeps read another DELAY (a global of its code): the stored rows re-run it alone.
    reused = frame["reused"].iloc[3] if "reused" in frame.columns else []
    assert_same_run(frame.nbflow.run(3), original, reused)
    assert table(db, "SELECT count(*) FROM nbflow_values")[0][0] == 3
    assert table(db, "PRAGMA integrity_check") == [("ok",)]


def test_an_old_store_still_opens_and_takes_values_stored_once(tmp_path: Path) -> None:
    import json

    db = tmp_path / "schema2.db"
    shutil.copy(RESOURCES / "schema2_store.db", db)
    expected = json.loads((RESOURCES / "schema2_store.json").read_text())
    old = expected["batch_id"]
    old_frame = nf.load_batch(db, old)
    assert len(old_frame) == len(expected["frame"]["data"])
    frame = make_flow().batch(ROWS, grid={"k": [1, 2]}, store=db, progress=False)
    assert (frame["status"] == "succeeded").all()
    meta = dict(table(db, "SELECT key, value FROM nbflow_meta"))
    assert meta == {"batch_schema": "4", "checkpoint_schema": "5"}
    assert table(db, "SELECT count(*) FROM nbflow_values")[0][0] == 3
    pd.testing.assert_frame_equal(nf.load_batch(db, old), old_frame)  # the old rows read as before
    for run_id in old_frame["run_id"].dropna():
        nf.load_run(db, run_id)  # and the old runs
    with nf.BatchStore(db) as store:
        assert store.gc().values == 0


def test_keep_names_the_nodes_whose_outputs_every_row_keeps(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = make_flow()
    frame = flow.batch(ROWS, grid={"k": [1, 2]}, store=db, keep=["raw"], progress=False)
    run = frame.nbflow.run(1)
    assert run["raw"].shape == (40_000, 7)
    assert run["score"] == frame.loc[1, "score"]  # the output columns are kept too
    with pytest.raises(nf.NodeOutputError, match="dropped"):
        run["X_train"]
    with pytest.raises(nf.BatchError, match=r"'rwa' is not a node of flow 'shared_frames' \(did you mean 'raw'\?\)"):
        flow.batch(ROWS, keep=["rwa"], progress=False)
    with pytest.raises(nf.BatchError, match="a list names the nodes"):
        flow.batch(ROWS, keep=[], progress=False)


def test_nbflow_batch_keep_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(
        "from tests.store.values_child import make_flow\n\nflow = make_flow('cli_frames')\n", encoding="utf-8"
    )
    (tmp_path / "cases.csv").write_text("n\n2000\n", encoding="utf-8")
    db = tmp_path / "runs.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "nbflow", "batch", "flows.py:flow", "cases.csv", "--no-progress", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)

    done = cli("--grid", "k=[1,2]", "--store", str(db), "--keep", "raw,X_test")
    assert done.returncode == 0, done.stderr
    (batch,) = nf.BatchStore(db).batches()
    run = nf.load_run(db, nf.load_batch(db, batch["batch_id"]).loc[0, "run_id"])
    assert run["raw"].shape == (2000, 7) and run["X_test"].shape == (500, 7)
    with pytest.raises(nf.NodeOutputError, match="dropped"):
        run["X_train"]
    bad = cli("--grid", "k=[1,2]", "--keep", "raw,X_tran")
    assert bad.returncode == 2
    assert "'X_tran' is not a node of flow 'cli_frames' (did you mean 'X_train'?)" in bad.stderr, bad.stderr


def test_a_shared_value_of_a_run_with_a_secret_is_stored_redacted(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("secret_values")

    @flow.node
    def echo(api_key: str, n: int) -> dict:
        return {"said": f"my key is {api_key}", "pad": ["x" * 50] * n}

    @flow.node
    def size(echo: dict) -> int:
        return len(echo["pad"])

    key = "sk-live-0123456789abcdef"
    frame = flow.batch([{"api_key": nf.Secret(key), "n": 100}, {"api_key": nf.Secret(key), "n": 100}], store=db)
    assert (frame["status"] == "succeeded").all()
    with nf.BatchStore(db) as store:
        listed = store.values()
    assert len(listed) == 1 and listed.loc[0, "runs"] == 2  # the same redacted value, once
    assert listed.loc[0, "key"].startswith("b:")  # keyed by the bytes written, not by the secret's value
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            assert key.encode() not in path.read_bytes()
    back = nf.load_run(db, frame.loc[0, "run_id"])
    assert back["echo"]["said"] == "my key is [REDACTED]" and back.nodes["size"].inputs["echo"] == back["echo"]


def test_checkpointed_runs_share_their_values_too(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = make_flow("checkpointed_frames")
    first = flow.run(n=40_000, k=1, store=db)
    second = flow.run(n=40_000, k=2, store=db)
    assert table(db, "SELECT count(*) FROM nbflow_values")[0][0] == 3  # raw, X_train, X_test: once for both runs
    for run in (first, second):
        assert_same_run(nf.load_run(db, run.run_id), run)


def test_a_record_whose_inputs_cannot_be_stored_still_reads_back(tmp_path: Path) -> None:
    import threading

    db = tmp_path / "runs.db"
    flow = nf.Flow("unstorable_input")

    @flow.node
    def raw(n: int) -> pd.DataFrame:
        return pd.DataFrame({"a": range(n)})

    @flow.node
    def lock(raw: pd.DataFrame) -> object:
        return threading.Lock()  # no store can hold it: left out of the record

    @flow.node
    def use(raw: pd.DataFrame, lock: object) -> int:
        return len(raw)

    frame = flow.batch([{"n": 5_000}], store=db, outputs=["use"], progress=False)
    assert frame.loc[0, "status"] == "succeeded"
    back = nf.load_run(db, frame.loc[0, "run_id"])
    pd.testing.assert_frame_equal(back["raw"], pd.DataFrame({"a": range(5_000)}))
    assert back["use"] == 5_000 and back.nodes["use"].inputs == {}  # its inputs left out together


def test_a_dropped_output_equal_to_a_kept_value_stays_dropped_when_read_back(tmp_path: Path) -> None:
    # keep=[node] keeps a dropped output's data version for its lineage; a stored value with the same content
    # (here the kept `raw`) must not be read back as the dropped output
    flow = nf.Flow("drop_same")

    @flow.node
    def raw(n: int) -> pd.DataFrame:
        return pd.DataFrame({"a": range(n), "b": [str(i) for i in range(n)]})

    @flow.node
    def same(raw: pd.DataFrame) -> pd.DataFrame:
        return raw.copy()

    @flow.node
    def total(same: pd.DataFrame) -> int:
        return int(same["a"].sum())

    db = tmp_path / "runs.db"
    frame = flow.batch([{"n": 5000}, {"n": 5000}], store=db, keep=["raw"], progress=False)
    run = nf.load_run(db, frame.loc[0, "run_id"])
    assert run["raw"].shape == (5000, 2) and run["total"] == sum(range(5000))
    with pytest.raises(nf.NodeOutputError, match="dropped"):
        run["same"]
    versions = run.lineage("same").set_index("node")["output_version"]
    assert versions["same"] == versions["raw"]  # its lineage still names the value it was (equal to raw)
