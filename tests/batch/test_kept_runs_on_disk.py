"""With ``store=``, a succeeded row's kept run lives on disk only: it opens from the store, as after a restart.

Failed and paused rows (and a run the store could not take whole) stay in memory as well; no secret reaches
the file on either path.
"""

from __future__ import annotations

import threading
from pathlib import Path

import nbflow as nf
from tests.helpers.store_files import after_restart, written_bytes

TOKEN = "hf_disk_only_UPPER_0001"
PLAIN = "sk-disk-only-plain-name-0002"


def secret_flow() -> nf.Flow:
    flow = nf.Flow("kept_on_disk")

    @flow.node
    def ask(question: str, HF_TOKEN: str, key: str) -> str:
        if question == "boom":
            raise PermissionError(f"invalid key {HF_TOKEN} / {key}")  # a secret echoed in an error
        return f"asked {question} with {len(HF_TOKEN) + len(key)} chars of keys"

    @flow.node
    def score(ask: str) -> int:
        return len(ask)

    return flow


def rows() -> list[dict[str, object]]:
    return [{"question": q, "HF_TOKEN": TOKEN, "key": nf.Secret(PLAIN)} for q in ("a", "boom", "ccc")]


def test_a_succeeded_row_opens_from_the_store_and_a_failed_one_from_memory(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    df = secret_flow().batch(rows(), store=db, progress=False)  # keep="all": the default with a store
    assert df["status"].tolist() == ["succeeded", "failed", "succeeded"]
    ok = df.nbflow.run(0)
    # Read back from the store: its outputs, and its secret inputs redacted (as after a kernel restart).
    assert ok["ask"] == f"asked a with {len(TOKEN) + len(PLAIN)} chars of keys"
    assert ok["score"] == df.loc[0, "score"]
    assert ok.inputs["HF_TOKEN"] is nf.REDACTED
    assert ok.nodes["score"].status is nf.NodeStatus.SUCCEEDED
    in_memory = secret_flow().batch(rows()[:1], keep="all", progress=False).nbflow.run(0)
    assert sorted(ok._repr_mimebundle_()) == sorted(in_memory._repr_mimebundle_())  # displayed alike (its graph)
    # The failed row is held in memory (it can be re-run with its secrets): its error and traceback.
    failed = df.nbflow.run(1)
    assert failed.inputs["HF_TOKEN"] == TOKEN
    assert failed.nodes["ask"].error_type == "PermissionError"
    assert "raise PermissionError" in (df.nbflow.traceback(1) or "")
    # keep_limit bounds what stays in memory; every row still opens from the store.
    bounded = secret_flow().batch(rows(), store=tmp_path / "bounded.db", keep_limit=0, progress=False)
    assert [r.run_id for r in bounded.nbflow.runs()] == list(bounded["run_id"])
    assert bounded.nbflow.run(1).nodes["ask"].error_type == "PermissionError"
    # No secret reached the files (the database and its WAL), whichever way the run was written.
    data = written_bytes(db) + written_bytes(tmp_path / "bounded.db")
    assert b"chars of keys" in data  # (the records are there)
    for text in (TOKEN, PLAIN):
        assert text.encode() not in data


def test_a_succeeded_rows_run_opens_after_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    df = secret_flow().batch(rows(), store=db, progress=False)
    out = after_restart(
        db,
        f"""
        run = frame.nbflow.run(2)
        print(run.status.name, run["ask"], run["score"])
        failed = nf.load_run({str(db)!r}, frame.loc[1, "run_id"])
        print(failed.nodes["ask"].error_type, "[REDACTED]" in failed.nodes["ask"].error_message)
        """,
    )
    ask = f"asked ccc with {len(TOKEN) + len(PLAIN)} chars of keys"
    assert out.split("\n")[:2] == [f"SUCCEEDED {ask} {len(ask)}", "PermissionError True"]
    assert df.loc[2, "score"] == len(ask)


def test_a_run_the_store_cannot_take_whole_stays_in_memory(tmp_path: Path) -> None:
    flow = nf.Flow("unstorable")

    @flow.node
    def guard(x: int) -> threading.Lock:
        return threading.Lock()  # no file can hold a lock: the store leaves this output out

    @flow.node
    def total(guard: threading.Lock, x: int) -> int:
        return x + 1

    db = tmp_path / "runs.db"
    df = flow.batch([{"x": 1}, {"x": 2}], store=db, progress=False)
    assert df["status"].tolist() == ["succeeded", "succeeded"]
    assert nf.load_run(db, df.loc[0, "run_id"])["guard"] is nf.MISSING  # what the file holds
    run = df.nbflow.run(0)  # the run in memory: nothing silently missing
    assert isinstance(run["guard"], type(threading.Lock()))
    assert run["total"] == 2
