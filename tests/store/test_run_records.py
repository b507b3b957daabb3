"""Checkpoint schema 2: a batch row's kept run is ONE stored record (header row + all its nodes in one
value of built-in data) instead of a header and a row per node. Files of schema 1 (today's main before
this change) are migrated when opened and read back identically; runs stored either way load, resume
and cancel; a tampered record runs no code; secrets never reach it."""

from __future__ import annotations

import json
import pickle
import shutil
import sqlite3
import sys
import warnings
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from tests.helpers.read_only import run_read_only
from tests.helpers.store_files import written_bytes
from tests.store import schema2_flow

RESOURCES = Path(__file__).parent.parent / "resources"


def _layout(db: Path) -> dict[str, object]:
    with closing(sqlite3.connect(db)) as con:
        meta = dict(con.execute("SELECT key, value FROM nbflow_meta").fetchall())
        records = dict(con.execute("SELECT run_id, record IS NOT NULL FROM checkpoint_runs").fetchall())
        node_rows = dict(con.execute("SELECT run_id, COUNT(*) FROM checkpoint_nodes GROUP BY run_id").fetchall())
    return {"meta": meta, "records": records, "node_rows": node_rows}


def _plain(value: object) -> object:
    """JSON-comparable: NaN (never equal to itself) as a marker."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return "<NaN>" if isinstance(value, float) and value != value else value


@pytest.fixture
def schema1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    """A copy of the store main wrote before this change, and what it read back then."""
    monkeypatch.setenv("NBFLOW_STORE_KEY", schema2_flow.KEY)  # its failed row's error objects are signed pickles
    from nbflow._store import checkpoint

    checkpoint._STORES.clear()
    db = tmp_path / "schema2_store.db"
    shutil.copy(RESOURCES / "schema2_store.db", db)
    expected = json.loads((RESOURCES / "schema2_store.json").read_text())
    with closing(sqlite3.connect(db)) as con:
        assert dict(con.execute("SELECT key, value FROM nbflow_meta").fetchall()) == {
            "batch_schema": "2",
            "checkpoint_schema": "1",
        }
    return db, expected


def test_a_schema_1_store_is_migrated_and_reads_back_identically(schema1: tuple[Path, dict]) -> None:
    db, expected = schema1
    for row, run_id in expected["run_ids"].items():  # nf.load_run opens (and migrates) the file
        back = schema2_flow.describe(nf.load_run(db, run_id))
        assert back == expected["runs"][row], row
    with nf.BatchStore(db) as store:
        frame = store.load(expected["batch_id"])
    assert _plain(frame.astype(str).to_dict(orient="split")) == _plain(expected["frame"])
    layout = _layout(db)
    assert layout["meta"] == {"batch_schema": "4", "checkpoint_schema": "5"}
    assert set(layout["records"].values()) == {0}  # its runs keep the row-per-node layout
    assert sum(layout["node_rows"].values()) == 15


WRITTEN_ON = (3, 11)  # the Python that wrote tests/resources/schema2_store.db (schema2_flow.py)


def test_a_migrated_store_resumes_its_batch_and_its_paused_and_failed_runs(schema1: tuple[Path, dict]) -> None:
    db, expected = schema1
    flow = schema2_flow.make_flow()
    if sys.version_info[:2] == WRITTEN_ON:
        frame = flow.batch(schema2_flow.ROWS, store=db, resume=True, retry_failed=True, keep="all", progress=False)
        rerun = ["2"]  # only the failed row ran again; the paused one waits for its answer
    else:  # a node's code fingerprint holds its bytecode: on another Python every finished row counts as changed
        with pytest.warns(nf.NbflowWarning, match="changed since they were stored"):
            frame = flow.batch(schema2_flow.ROWS, store=db, resume=True, retry_failed=True, keep="all", progress=False)
        rerun = ["0", "1", "2", "3", "4"]  # the paused row too: it asks again
    assert frame.attrs["batch_id"] == expected["batch_id"]
    assert list(frame["status"]) == ["succeeded", "succeeded", "failed", "paused", "succeeded"]
    again = [str(i) for i in frame.index if frame.loc[i, "run_id"] != expected["run_ids"][str(i)]]
    assert again == rerun
    paused = expected["run_ids"]["3"]
    stored = nf.load_run(db, paused, secrets={"api_key": schema2_flow.ROWS[3]["api_key"]})  # never stored
    run = flow.resume(stored, "yes")
    assert run.status is nf.RunStatus.SUCCEEDED and run["review"] == "yes"
    assert nf.load_run(db, paused)["review"] == "yes"


def test_a_schema_2_batch_table_is_migrated_in_place_and_keeps_one_row_per_key(schema1: tuple[Path, dict]) -> None:
    """Batch schema 3 (issue 14): rows appended by rowid, one index on the batch instead of the (batch_id,
    case_key) primary key; the store keeps one row per key itself, also for rows it migrated."""
    db, expected = schema1
    with closing(sqlite3.connect(db)) as con:
        before = sorted(con.execute("SELECT batch_id, case_key, row_index, run_id, status, data FROM batch_rows"))
    with nf.BatchStore(db):
        pass
    with closing(sqlite3.connect(db)) as con:
        after = sorted(con.execute("SELECT batch_id, case_key, row_index, run_id, status, data FROM batch_rows"))
        table = con.execute("SELECT sql FROM sqlite_master WHERE name = 'batch_rows'").fetchone()[0]
        indexes = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'batch_rows'")}
        version = con.execute("SELECT value FROM nbflow_meta WHERE key = 'batch_schema'").fetchone()[0]
    assert after == before and len(after) == 5
    assert "PRIMARY KEY" not in table and "batch_rows_batch" in indexes and version == "4"
    assert not any(n.startswith("sqlite_autoindex") for n in indexes)
    flow = schema2_flow.make_flow()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nf.NbflowWarning)  # (on another Python: rows changed since stored)
        frame = flow.batch(schema2_flow.ROWS, store=db, resume=True, retry_failed=True, keep="all", progress=False)
    with closing(sqlite3.connect(db)) as con:
        counts = con.execute("SELECT case_key, COUNT(*) FROM batch_rows GROUP BY batch_id, case_key").fetchall()
        stored = dict(con.execute("SELECT row_index, run_id FROM batch_rows"))
    assert len(counts) == 5 and {n for _, n in counts} == {1}  # the re-run rows replaced their stored ones
    assert stored == {int(i): frame.loc[i, "run_id"] for i in frame.index}
    assert frame.attrs["batch_id"] == expected["batch_id"]


def _asking_flow(fail: dict[str, bool] | None = None) -> nf.Flow:
    flow = nf.Flow("records")

    @flow.node
    def prep(x: int) -> dict:
        return {"x": x, "pair": (x, -x), "tags": {"a", "b"}}  # a tuple and a set: built-in data, kept exactly

    @flow.node
    async def call(prep: dict) -> float:
        if fail is not None and fail["now"] and prep["x"] == 1:
            fail["now"] = False
            raise ValueError("row one fails once")
        return prep["x"] / 4

    @flow.node
    async def review(call: float) -> str:
        if call == 0.5:
            return await nf.ask("Publish?", options=["yes", "no"])
        return "auto"

    return flow


def test_kept_runs_are_one_record_each_and_load_back_equal(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    frame = _asking_flow().batch([{"x": i} for i in range(4)], store=db, keep="all", progress=False)
    assert list(frame["status"]) == ["succeeded", "succeeded", "paused", "succeeded"]
    layout = _layout(db)
    assert layout["meta"] == {"batch_schema": "4", "checkpoint_schema": "5"}
    assert set(layout["records"].values()) == {1} and layout["node_rows"] == {}
    for i in range(4):
        run = frame.nbflow.run(i)
        back = nf.load_run(db, run.run_id)
        assert schema2_flow.describe(back) == schema2_flow.describe(run)
        assert back["prep"] == {"x": i, "pair": (i, -i), "tags": {"a", "b"}}
        assert type(back["prep"]["pair"]) is tuple
    assert list(nf.load_run(db, frame.loc[2, "run_id"]).pending) == list(frame.nbflow.run(2).pending)


def test_a_run_stored_as_one_record_resumes_and_its_nodes_are_checkpointed_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _asking_flow()
    frame = flow.batch([{"x": i} for i in range(3)], store=db, keep="all", progress=False)
    run_id = frame.loc[2, "run_id"]
    run = flow.resume(run_id, "no", store=db)  # claimed: the record becomes a row per node first
    assert run.status is nf.RunStatus.SUCCEEDED and run["review"] == "no"
    layout = _layout(db)
    assert layout["records"][run_id] == 0 and layout["node_rows"][run_id] == 3
    back = nf.load_run(db, run_id)
    assert back["review"] == "no" and back["prep"] == {"x": 2, "pair": (2, -2), "tags": {"a", "b"}}
    assert schema2_flow.describe(back)["nodes"]["prep"] == schema2_flow.describe(run)["nodes"]["prep"]


def test_a_failed_run_stored_as_one_record_resumes_and_a_cancelled_one_stays_cancelled(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    fail = {"now": True}
    flow = _asking_flow(fail)
    frame = flow.batch([{"x": i} for i in range(3)], store=db, keep="all", progress=False)
    assert list(frame["status"]) == ["succeeded", "failed", "paused"]
    failed, paused = frame.loc[1, "run_id"], frame.loc[2, "run_id"]
    run = flow.resume(failed, store=db)  # the failed node and what it skipped run again
    assert run.status is nf.RunStatus.SUCCEEDED and run["call"] == 0.25
    assert nf.load_run(db, failed)["call"] == 0.25
    stored = nf.load_run(db, paused)
    stored.cancel("nobody will answer")
    back = nf.load_run(db, paused)
    assert back.status is nf.RunStatus.CANCELLED and back.record("review").status is nf.NodeStatus.CANCELLED
    assert back["prep"] == {"x": 2, "pair": (2, -2), "tags": {"a", "b"}}


def test_a_tampered_record_is_refused_and_runs_no_code(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    frame = _asking_flow().batch([{"x": 0}], store=db, keep="all", progress=False)
    marker = tmp_path / "pwned"
    from tests.store.evil import Evil

    evil = b"NBD1" + pickle.dumps([["prep", "succeeded", Evil(str(marker))]], protocol=5)
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE checkpoint_runs SET record = ?", (evil,))
    from nbflow._store import checkpoint

    checkpoint._STORES.clear()
    with pytest.raises(nf.StoreError, match=r"names (posix|os)\.mkdir: the file was tampered with"):
        nf.load_run(db, frame.loc[0, "run_id"])
    with pytest.raises(nf.StoreError):
        nf.load_run(db, frame.loc[0, "run_id"], allow_pickle=True)  # built-in data never unpickles objects
    assert not marker.exists()


def test_a_secret_echoed_by_a_node_never_reaches_a_record(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("echo")

    @flow.node
    def greet(name: str, Token: str) -> str:  # the secret-name rule ignores case
        return f"hello {name}, your token is {Token}"

    secret = "tok-Very-Secret-123"
    frame = flow.batch(
        pd.DataFrame({"name": ["ann", "bob"], "Token": [secret, secret]}), store=db, keep="all", progress=False
    )
    assert list(frame["status"]) == ["succeeded", "succeeded"]
    run = nf.load_run(db, frame.loc[0, "run_id"])
    assert run["greet"] == "hello ann, your token is [REDACTED]"
    assert secret.encode() not in written_bytes(db)


def test_built_in_data_round_trips_exactly_and_nothing_else_is_taken() -> None:
    from nbflow._store.pickling import core_bytes, loads

    values = [
        {"a": [1, 2.5, None, True], 3: "int key", (1, "t"): {"nested": (b"raw", bytearray(b"ba"))}},
        {"set": {1, 2}, "frozen": frozenset({"x"}), "big": 10**40, "text": "é" * 3},
    ]
    for value in values:
        back = loads(core_bytes(value))
        assert back == value and type(back) is type(value)
    nan = loads(core_bytes([float("nan")]))[0]
    assert nan != nan

    class Mine:
        pass

    class Text(str):
        pass

    for other in (Mine(), Text("a"), nf.RunStatus.PAUSED, len, Mine, 1j, ValueError("x")):
        assert core_bytes({"v": [other]}) is None, other  # the caller stores it another way
    assert loads(core_bytes({"api": "key sk-12345678 here"}, _redactor("sk-12345678"))) == {
        "api": "key [REDACTED] here"
    }


def _redactor(*texts: str) -> object:
    from nbflow._core.secrets import Redactor

    return Redactor(texts)


READ_ONLY_SCRIPT = """
import json, sys
import nbflow as nf
from tests.store import schema2_flow

db, expected = sys.argv[1], json.loads(open(sys.argv[2]).read())
out = {row: schema2_flow.describe(nf.load_run(db, run_id)) for row, run_id in expected["run_ids"].items()}
print(json.dumps(out == expected["runs"]))
"""


def test_a_read_only_copy_of_a_schema_1_store_reads_back_identically(tmp_path: Path) -> None:
    # Nothing can be migrated in a read-only copy (a read-only mount, as in test_read_only_store): read as it is.
    import os
    import sys

    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(RESOURCES / "schema2_store.db", folder / "schema2_store.db")
    before = (folder / "schema2_store.db").read_bytes()
    command = [
        sys.executable,
        "-c",
        READ_ONLY_SCRIPT,
        str(folder / "schema2_store.db"),
        str(RESOURCES / "schema2_store.json"),
    ]
    env = {**os.environ, "NBFLOW_STORE_KEY": schema2_flow.KEY, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = run_read_only(folder, command, env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.strip().splitlines()[-1] == "true"
    assert (folder / "schema2_store.db").read_bytes() == before


READ_ONLY_BATCH_SCRIPT = """
import json, sys
import nbflow as nf

db, batch_id = sys.argv[1], sys.argv[2]
with nf.BatchStore(db) as store:
    frame = store.load(batch_id)
    keys = sorted(r.key for r in store.stored_rows(batch_id))
print(json.dumps({"frame": frame.astype(str).to_dict(orient="split"), "keys": keys}))
"""


def test_a_read_only_copy_of_a_schema_2_batch_store_loads_unmigrated(schema1: tuple[Path, dict]) -> None:
    # Batch schema 3 changed only the table's key: a read-only schema 2 copy (nothing can be migrated) reads as is.
    import os

    db, expected = schema1
    with closing(sqlite3.connect(db)) as con:
        keys = sorted(k for (k,) in con.execute("SELECT case_key FROM batch_rows"))
    folder = db.parent / "copy"
    folder.mkdir()
    shutil.copy(db, folder / db.name)
    before = (folder / db.name).read_bytes()
    command = [sys.executable, "-c", READ_ONLY_BATCH_SCRIPT, str(folder / db.name), expected["batch_id"]]
    env = {**os.environ, "NBFLOW_STORE_KEY": schema2_flow.KEY, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = run_read_only(folder, command, env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert _plain(out["frame"]) == _plain(json.loads(json.dumps(expected["frame"])))
    assert out["keys"] == keys and len(keys) == 5
    assert (folder / db.name).read_bytes() == before
