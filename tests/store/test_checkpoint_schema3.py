"""Checkpoint schema 3 (issue 14): a batch row's kept run whose nodes are all plain is ONE compact record
holding its header too (its header row binds five columns). Files of schema 2 (``checkpoint2_store.db``,
written at c4f77b2) are migrated in place and read back identically by every reading path (``nf.load_run``,
resume of paused and failed runs, batch resume, run listings, the CLI, a batch frame's ``df.nbflow.run``);
a read-only schema 2 copy is read as it is; an older nbflow refuses a schema 3 file with a clear StoreError."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbflow as nf
from tests.helpers.read_only import run_read_only
from tests.helpers.store_files import written_bytes
from tests.store import checkpoint2_flow, schema2_flow
from tests.store.test_run_records import _plain

RESOURCES = Path(__file__).parent.parent / "resources"
REPO = Path(__file__).parents[2]
OLDER = "c4f77b2"  # the last commit writing checkpoint schema 2


def _meta(db: Path) -> dict[str, str]:
    with closing(sqlite3.connect(db)) as con:
        return dict(con.execute("SELECT key, value FROM nbflow_meta").fetchall())


def _runs_table(db: Path) -> list[tuple[object, ...]]:
    """The stored runs' columns as written (a column added on open, such as ``lineage``, is left out)."""
    with closing(sqlite3.connect(db)) as con:
        names = [r[1] for r in con.execute("PRAGMA table_info(checkpoint_runs)") if r[1] != "lineage"]
        return sorted(con.execute(f"SELECT {', '.join(names)} FROM checkpoint_runs").fetchall())


def _record(db: Path, run_id: str) -> object:
    from nbflow._store.pickling import loads

    with closing(sqlite3.connect(db)) as con:
        (blob,) = con.execute("SELECT record FROM checkpoint_runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if blob is None else loads(blob)


def _forget_open_stores() -> None:
    from nbflow._store import checkpoint

    for store in checkpoint._STORES.values():
        store.close()
    checkpoint._STORES.clear()


@pytest.fixture
def schema2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    """A copy of the schema 2 store (c4f77b2) and what that nbflow read back from it."""
    monkeypatch.setenv("NBFLOW_STORE_KEY", schema2_flow.KEY)  # its failed rows' error objects are signed pickles
    _forget_open_stores()
    db = tmp_path / "checkpoint2_store.db"
    shutil.copy(RESOURCES / "checkpoint2_store.db", db)
    assert _meta(db) == {"batch_schema": "3", "checkpoint_schema": "2"}
    return db, json.loads((RESOURCES / "checkpoint2_store.json").read_text())


def _all_runs(expected: dict) -> dict[str, dict]:
    """run id -> its description as c4f77b2 read it back."""
    out = {expected["run_ids"][row]: run for row, run in expected["runs"].items()}
    out.update({expected["plain"]["run_ids"][row]: run for row, run in expected["plain"]["runs"].items()})
    out[expected["single"]["run_id"]] = expected["single"]["run"]
    return out


def test_a_schema_2_store_is_migrated_in_place_and_every_run_reads_back_identically(schema2: tuple[Path, dict]) -> None:
    db, expected = schema2
    before = _runs_table(db)
    runs = _all_runs(expected)
    assert len(runs) == 10
    for run_id, described in runs.items():  # nf.load_run opens (and migrates) the file
        assert schema2_flow.describe(nf.load_run(db, run_id)) == described, run_id
    assert _meta(db) == {"batch_schema": "3", "checkpoint_schema": "5"}
    # The version number alone (and the later columns, NULL): every stored run stays as it was written.
    assert [r[: len(before[0])] for r in _runs_table(db)] == before
    assert {v for r in _runs_table(db) for v in r[len(before[0]) :]} == {None}
    from nbflow._store.checkpoint import open_store

    assert {r[0]: (r[1], r[2]) for r in open_store(db).run_ids()} == {
        run_id: (described["flow"], described["status"]) for run_id, described in runs.items()
    }
    with nf.BatchStore(db) as store:
        frame = store.load(expected["batch_id"])
    assert _plain(frame.astype(str).to_dict(orient="split")) == _plain(json.loads(json.dumps(expected["frame"])))


def test_a_migrated_store_resumes_its_paused_and_failed_runs_and_its_batches(schema2: tuple[Path, dict]) -> None:
    db, expected = schema2
    plain = checkpoint2_flow.make_plain_flow()
    paused = expected["plain"]["run_ids"]["2"]  # a schema 2 record (one blob of node records)
    assert type(_record(db, paused)) is dict
    run = plain.resume(paused, "yes", store=db)
    assert run.status is nf.RunStatus.SUCCEEDED and run["review"] == "yes" and run["call"] == 0.5
    assert nf.load_run(db, paused)["review"] == "yes"
    failed = expected["plain"]["run_ids"]["1"]  # a row per node (its error is an object)
    first = nf.load_run(db, failed).record("call").finished_at
    again_run = plain.resume(failed, store=db)  # row one fails on purpose: it ran again and failed again
    assert again_run.status is nf.RunStatus.FAILED
    back = nf.load_run(db, failed)
    assert back.status is nf.RunStatus.FAILED and back.record("call").finished_at > first
    assert back.record("call").error_message == "row one fails on purpose"
    single = expected["single"]["run_id"]  # flow.run(store=): a header and a row per node, its secret not stored
    flow = schema2_flow.make_flow()
    stored = nf.load_run(db, single, secrets={"api_key": "sk-single-run-secret"})
    assert flow.resume(stored, "no")["review"] == "no"
    assert nf.load_run(db, single).status is nf.RunStatus.SUCCEEDED
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nf.NbflowWarning)  # (on another Python: rows changed since stored)
        again = plain.batch(checkpoint2_flow.PLAIN_ROWS, store=db, resume=True, keep="all", progress=False)
    assert again.attrs["batch_id"] == expected["plain"]["batch_id"]
    assert list(again["status"]) == ["succeeded", "failed", "paused", "succeeded"]
    for i in again.index:  # a batch frame's runs, read back from the store (kept or loaded)
        assert again.nbflow.run(i).run_id == again.loc[i, "run_id"]


def test_the_cli_shows_runs_of_a_migrated_store_and_of_a_schema_3_store(schema2: tuple[Path, dict]) -> None:
    db, expected = schema2
    fresh = db.with_name("fresh.db")
    frame = checkpoint2_flow.make_plain_flow().batch(checkpoint2_flow.PLAIN_ROWS, store=fresh, progress=False)
    assert type(_record(fresh, frame.loc[0, "run_id"])) is tuple  # compact (schema 3)
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    for path, run_id, line in (
        (db, expected["plain"]["run_ids"]["3"], "'auto'"),  # a schema 2 record
        (db, expected["run_ids"]["2"], "row two fails on purpose"),  # a row per node
        (fresh, frame.loc[3, "run_id"], "'auto'"),  # a compact record
    ):
        shown = subprocess.run(
            [sys.executable, "-m", "nbflow", "show", str(path), run_id],
            env=env, capture_output=True, text=True, timeout=120, cwd=path.parent,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert line in shown.stdout and "review" in shown.stdout, shown.stdout
    assert _meta(db)["checkpoint_schema"] == "5"


def _plain_flow(seen: list[str]) -> nf.Flow:
    flow = nf.Flow("compact")

    @flow.node
    def prep(x: int, note: str = "") -> dict:
        return {"x": x, "pair": (x, -x), "tags": {"a", "b"}, "note": note}

    @flow.node
    async def call(prep: dict) -> float:
        return prep["x"] / 4

    @flow.node
    async def review(call: float) -> str:
        if call == 0.5:
            seen.append("asked")
            return await nf.ask("Publish?", options=["yes", "no"], data={"score": call})
        return "auto"

    return flow


def test_a_succeeded_plain_run_is_one_compact_record_and_loads_back_equal(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _plain_flow([])
    frame = flow.batch([{"x": i} for i in range(4)], store=db, keep="all", progress=False)
    assert list(frame["status"]) == ["succeeded", "succeeded", "paused", "succeeded"]
    assert _meta(db) == {"batch_schema": "4", "checkpoint_schema": "5"}
    with closing(sqlite3.connect(db)) as con:
        header = con.execute(
            "SELECT flow, status, pause_version, targets, inputs, answers, started_at, nodes, finished_at, "
            "updated_at IS NOT NULL FROM checkpoint_runs WHERE run_id = ?",
            (frame.loc[0, "run_id"],),
        ).fetchone()
        node_rows = con.execute("SELECT COUNT(*) FROM checkpoint_nodes").fetchone()[0]
    assert header == ("compact", "succeeded", 0, None, None, None, None, None, None, 1)  # the rest is in the record
    assert node_rows == 0
    for i in range(4):
        run = frame.nbflow.run(i)
        record = _record(db, run.run_id)
        if i == 2:  # paused: its node has its question (not plain), so a schema 2 record
            assert type(record) is dict
        else:
            assert type(record) is tuple and record[0] == 3
        back = nf.load_run(db, run.run_id)
        assert schema2_flow.describe(back) == schema2_flow.describe(run)
        assert (back.pause_version, back.targets, back.answers) == (run.pause_version, run.targets, run.answers)
        assert list(back.pending) == list(run.pending)
        assert back["prep"] == {"x": i, "pair": (i, -i), "tags": {"a", "b"}, "note": ""}
        assert type(back["prep"]["pair"]) is tuple
        assert [a.number for a in back.record("call").attempts] == [1]


def test_a_compact_record_claimed_gets_its_header_written_back(tmp_path: Path) -> None:
    """No compact run can be claimed today (only a SUCCEEDED run is compact); should one be (here its status is
    edited to PAUSED in the file), the claim first writes its header and a row per node, as for any record."""
    db = tmp_path / "runs.db"
    frame = _plain_flow([]).batch([{"x": 3, "note": "n"}], store=db, keep="all", progress=False)
    run_id = frame.loc[0, "run_id"]
    kept = frame.nbflow.run(0)
    assert type(_record(db, run_id)) is tuple
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE checkpoint_runs SET status = 'paused' WHERE run_id = ?", (run_id,))
    _forget_open_stores()
    stored = nf.load_run(db, run_id)
    assert stored.status is nf.RunStatus.PAUSED
    stored.cancel("edited")  # claims it (cancel=True)
    with closing(sqlite3.connect(db)) as con:
        row = con.execute(
            "SELECT status, record, started_at, finished_at, pause_version, nodes IS NOT NULL, "
            "targets IS NOT NULL, answers IS NOT NULL, inputs IS NOT NULL FROM checkpoint_runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        nodes = con.execute("SELECT COUNT(*) FROM checkpoint_nodes WHERE run_id = ?", (run_id,)).fetchone()[0]
    assert row[:3] == ("cancelled", None, kept.started_at) and row[3] >= kept.finished_at  # (cancelled later)
    assert row[4:] == (0, 1, 1, 1, 1) and nodes == 3
    back = nf.load_run(db, run_id)
    assert back.status is nf.RunStatus.CANCELLED and back.inputs == {"x": 3, "note": "n"}
    assert back["prep"] == kept["prep"] and list(back.nodes) == ["prep", "call", "review"]


def test_a_secret_value_never_reaches_a_compact_record(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("echo")

    @flow.node
    def greet(name: str, creds: object) -> str:  # a name that does not look secret: the value is an nf.Secret
        return f"hello {name}, creds {creds.reveal() if isinstance(creds, nf.Secret) else creds}"

    secret = "pw-Very-Secret-456"
    frame = flow.batch(
        [{"name": "ann", "creds": nf.Secret(secret)}, {"name": "bob", "creds": nf.Secret(secret)}],
        store=db, keep="all", progress=False,
    )  # fmt: skip
    assert list(frame["status"]) == ["succeeded", "succeeded"]
    run = nf.load_run(db, frame.loc[0, "run_id"])
    assert run["greet"] == "hello ann, creds [REDACTED]"
    assert secret.encode() not in written_bytes(db)


READ_ONLY_SCRIPT = """
import json, sys
import nbflow as nf
from tests.store import schema2_flow
from tests.store.test_checkpoint_schema3 import _all_runs

db, expected = sys.argv[1], json.loads(open(sys.argv[2]).read())
out = {run_id: schema2_flow.describe(nf.load_run(db, run_id)) for run_id in _all_runs(expected)}
print(json.dumps(out == _all_runs(expected)))
"""


def test_a_read_only_copy_of_a_schema_2_store_reads_back_identically(tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(RESOURCES / "checkpoint2_store.db", folder / "checkpoint2_store.db")
    before = (folder / "checkpoint2_store.db").read_bytes()
    command = [
        sys.executable, "-c", READ_ONLY_SCRIPT, str(folder / "checkpoint2_store.db"),
        str(RESOURCES / "checkpoint2_store.json"),
    ]  # fmt: skip
    env = {**os.environ, "NBFLOW_STORE_KEY": schema2_flow.KEY, "PYTHONPATH": str(REPO)}
    done = run_read_only(folder, command, env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.strip().splitlines()[-1] == "true"
    assert (folder / "checkpoint2_store.db").read_bytes() == before  # nothing migrated: still schema 2


OLDER_SCRIPT = """
import sys
import nbflow_before as nf

try:
    nf.load_run(sys.argv[1], sys.argv[2])
except nf.StoreError as exc:
    print("StoreError:", exc)
"""


def test_an_older_nbflow_refuses_a_schema_3_store_with_a_clear_error(tmp_path: Path) -> None:
    found = subprocess.run(["git", "cat-file", "-e", f"{OLDER}^{{commit}}"], cwd=REPO, capture_output=True)
    if found.returncode != 0:
        pytest.skip(f"needs the repository's history (commit {OLDER}) to run the older nbflow")
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from batch_ab import checkout
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    older = tmp_path / "older"
    older.mkdir()
    checkout(OLDER, older)  # nbflow at c4f77b2 as the package nbflow_before
    db = tmp_path / "runs.db"
    frame = _plain_flow([]).batch([{"x": 0}], store=db, keep="all", progress=False)
    done = subprocess.run(
        [sys.executable, "-c", OLDER_SCRIPT, str(db), frame.loc[0, "run_id"]],
        env={**os.environ, "PYTHONPATH": str(older)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "written by a newer nbflow (checkpoint schema 5); upgrade nbflow to read it" in done.stdout
    assert _meta(db)["checkpoint_schema"] == "5"


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=3)
        | st.frozensets(st.integers() | st.text(max_size=4), max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(_VALUES, min_size=1, max_size=3))
def test_any_built_in_output_round_trips_through_a_compact_record(tmp_path: Path, values: list[object]) -> None:
    """Whatever built-in data a node returns (NaN, big ints, bytes, tuples, int keys, frozensets...), a run
    kept as a compact record loads back with the same values of the same types."""
    db = tmp_path / f"runs-{len(list(tmp_path.iterdir()))}.db"
    flow = nf.Flow("values")

    @flow.node
    def make(i: int) -> object:
        return values[i]

    @flow.node
    def wrap(make: object) -> object:
        return [make, (make,)]

    frame = flow.batch([{"i": i} for i in range(len(values))], store=db, keep="all", progress=False)
    assert set(frame["status"]) == {"succeeded"}
    for i in range(len(values)):
        run = frame.nbflow.run(i)
        assert type(_record(db, run.run_id)) is tuple
        back = nf.load_run(db, run.run_id)
        for node in ("make", "wrap"):
            assert schema2_flow.shown(back[node]) == schema2_flow.shown(run[node])
            assert _types(back[node]) == _types(run[node])
        assert back.record("wrap").inputs.keys() == {"make"}
        assert schema2_flow.shown(back.record("wrap").inputs["make"]) == schema2_flow.shown(values[i])


def _types(value: object) -> object:
    """The type of every part of ``value`` (an equal-looking value of another type would be a silent change)."""
    if isinstance(value, dict):
        return ("dict", sorted((repr(k), _types(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_types(v) for v in value])
    if isinstance(value, frozenset | set):
        return (type(value).__name__, sorted(repr(_types(v)) for v in value))
    return type(value).__name__


def test_a_paused_row_answered_by_flow_answer_is_stored_without_its_question(tmp_path: Path) -> None:
    """The row's run is written again, SUCCEEDED: the question it answered is no longer open in the store
    (before: it loaded back SUCCEEDED with the question still pending)."""
    db = tmp_path / "runs.db"
    flow = _plain_flow([])
    frame = flow.batch([{"x": i} for i in range(3)], store=db, keep="all", progress=False)
    run_id = frame.loc[2, "run_id"]
    assert list(nf.load_run(db, run_id).pending) == ["review#0"]
    answered = flow.answer(frame, {2: "yes"})
    assert list(answered["status"]) == ["succeeded"] * 3
    back = nf.load_run(db, run_id)
    assert back.status is nf.RunStatus.SUCCEEDED and back["review"] == "yes"
    assert dict(back.pending) == {}
    assert list(nf.load_run(db, frame.loc[0, "run_id"]).pending) == []
