"""Batches with store=: rows written as they finish, resume, secrets, a process killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing

import pytest

import nbflow as nf


def counting_flow(calls: list[int], fail: set[int] = frozenset()) -> nf.Flow:  # type: ignore[assignment]
    flow = nf.Flow("store")

    @flow.node
    def work(i: int) -> dict:
        calls.append(i)
        if i in fail:
            raise ValueError(f"bad {i}")
        return {"i": i, "sq": i * i, "pair": (i, i)}

    return flow


ROWS = [{"i": i, "note": f"n{i}"} for i in range(6)]


def test_every_finished_row_is_written_and_resume_skips_them(tmp_path):
    db = tmp_path / "runs.db"
    calls: list[int] = []
    flow = counting_flow(calls, fail={2})
    first = flow.batch(ROWS, store=db)
    assert first["status"].tolist() == ["succeeded", "succeeded", "failed", "succeeded", "succeeded", "succeeded"]
    batch_id = first.attrs["batch_id"]
    assert batch_id.startswith("store-")

    with nf.BatchStore(db) as store:
        saved = store.load(batch_id)
    assert saved.index.tolist() == list(range(6))
    assert saved.loc[3, "work"] == {"i": 3, "sq": 9, "pair": (3, 3)}  # a tuple inside: pickled, exact
    assert saved.loc[2, "error_message"] == "bad 2"

    calls.clear()
    again = flow.batch(ROWS, store=db, resume=True)
    assert calls == []  # finished rows (failed ones too) come from the store
    assert again.drop(columns=["latency"]).equals(first.drop(columns=["latency"]))

    again = flow.batch(ROWS, store=db, resume=True, retry_failed=True)
    assert calls == [2]
    assert again.loc[2, "status"] == "failed"


def test_running_the_same_batch_without_resume_refuses_to_overwrite(tmp_path):
    db = tmp_path / "runs.db"
    flow = counting_flow([])
    flow.batch(ROWS, store=db)
    with pytest.raises(nf.StoreError, match="pass resume=True"):
        flow.batch(ROWS, store=db)
    # a different batch (other rows) gets another id and runs
    df = flow.batch(ROWS[:2], store=db)
    assert len(df) == 2


def test_an_explicit_batch_id_resumes_a_subset_of_the_rows_by_content(tmp_path):
    db = tmp_path / "runs.db"
    calls: list[int] = []
    flow = counting_flow(calls)
    df = flow.batch(ROWS, store=db, batch_id="eval-1")
    assert df.attrs["batch_id"] == "eval-1"
    calls.clear()
    again = flow.batch(ROWS[4:1:-1], store=db, batch_id="eval-1", resume=True)  # rows 4, 3, 2: fewer, reordered
    assert calls == []
    assert [w["i"] for w in again["work"]] == [4, 3, 2]


def test_secret_looking_columns_are_not_stored_unless_asked(tmp_path):
    db = tmp_path / "runs.db"
    flow = nf.Flow("secret")

    @flow.node
    def call(q: str, api_key: str) -> str:
        return q.upper()

    rows = [{"q": "a", "api_key": "sk-SECRET-1", "password": "hunter2", "max_tokens": 5}]
    df = flow.batch(rows, store=db)
    assert df.loc[0, "api_key"] == "sk-SECRET-1"  # the frame in memory keeps it
    raw = sqlite3.connect(db).execute("SELECT data FROM batch_rows").fetchone()[0]
    assert "sk-SECRET-1" not in raw and "hunter2" not in raw
    assert '"max_tokens": 5' in raw
    with nf.BatchStore(db) as store:
        saved = store.load(df.attrs["batch_id"])
    assert saved.loc[0, "api_key"] == "<redacted: secret not stored>"
    # resuming takes the secret from the rows given now, never from the store
    again = flow.batch(rows, store=db, resume=True)
    assert again.loc[0, "api_key"] == "sk-SECRET-1"

    marked = flow.batch([{"q": "b", "api_key": nf.Secret("sk-MARKED-2")}], store=db, store_secrets=True)
    assert marked.loc[0, "call"] == "B"
    raw = sqlite3.connect(db).execute("SELECT data FROM batch_rows WHERE run_id = ?", (marked.loc[0, "run_id"],))
    assert "sk-MARKED-2" not in raw.fetchone()[0]  # an nf.Secret value is never written, even opted in

    # opted in: a secret-named column is stored, unless its value is known as a secret in this process (the
    # first batch above used "sk-SECRET-1" as a secret: it stays redacted everywhere, docs/secrets.md)
    db2 = tmp_path / "opt-in.db"
    flow.batch([{**rows[0], "api_key": "sk-OPTED-IN-3"}], store=db2, store_secrets=True)
    raw = sqlite3.connect(db2).execute("SELECT data FROM batch_rows").fetchone()[0]
    assert "sk-OPTED-IN-3" in raw


KILLED = textwrap.dedent(
    """
    import asyncio, collections, json, os, sys
    import nbflow as nf

    flow = nf.Flow("killed")
    CALLS = collections.deque()  # not plain data: not part of the node's fingerprint

    @flow.node
    async def work(i: int) -> int:
        CALLS.append(i)
        if i >= 7 and os.environ.get("BLOCK"):
            print("row", i, "running", flush=True)
            await asyncio.sleep(600)  # the process is killed here
        return i * 100

    resume = not os.environ.get("BLOCK")
    df = flow.batch([{"i": i} for i in range(12)], concurrency=2, store=sys.argv[1], batch_id="b", resume=resume)
    print(json.dumps({"calls": sorted(CALLS), "work": df["work"].tolist(), "status": df["status"].tolist()}))
    """
)


def test_a_process_killed_with_sigkill_loses_only_rows_in_flight_and_resume_fills_in_the_rest(tmp_path):
    db = tmp_path / "runs.db"
    script = tmp_path / "batch.py"
    script.write_text(KILLED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "BLOCK": "1"},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("row 7 running")
    assert proc.stdout.readline().startswith("row 8 running")  # both workers blocked: rows 0-6 done
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=20)
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()

    with nf.BatchStore(db) as store:
        saved = store.rows("b")
    assert sorted(saved) == list(range(7))

    # The same code in a new process: the finished rows are reused (same fingerprints), the rest run.
    out = subprocess.run([sys.executable, str(script), str(db)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["calls"] == [7, 8, 9, 10, 11]
    assert result["work"] == [i * 100 for i in range(12)]
    assert result["status"] == ["succeeded"] * 12


INTERRUPTED = textwrap.dedent(
    """
    import asyncio, sys
    import nbflow as nf

    flow = nf.Flow("ctrlc")

    @flow.node
    async def work(i: int) -> int:
        if i >= 3:
            print("blocked", flush=True)
            await asyncio.sleep(600)
        return i

    try:
        flow.batch([{"i": i} for i in range(6)], concurrency=1, store=sys.argv[1])
    except nf.BatchInterrupted as exc:
        print("interrupted", exc.frame["status"].tolist(), flush=True)
        sys.exit(3)
    """
)


def test_ctrl_c_in_a_script_raises_batch_interrupted_with_the_frame(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(INTERRUPTED)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "r.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "blocked"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 3, err
    statuses = ["succeeded"] * 3 + ["cancelled", "pending", "pending"]
    assert out.strip() == f"interrupted {statuses}"


def test_store_rows_are_committed_one_by_one_while_the_batch_runs(tmp_path):
    db = tmp_path / "runs.db"
    seen: list[int] = []
    flow = nf.Flow("live")

    @flow.node
    def work(i: int) -> int:
        # another connection sees every earlier row already committed
        if i:
            count = sqlite3.connect(db).execute("SELECT COUNT(*) FROM batch_rows").fetchone()[0]
            seen.append(count)
        time.sleep(0)
        return i

    flow.batch([{"i": i} for i in range(5)], store=db, concurrency=1)
    assert seen == [1, 2, 3, 4]


def test_a_stored_row_that_cannot_be_read_back_runs_again(tmp_path):
    db = tmp_path / "runs.db"
    calls: list[int] = []
    flow = counting_flow(calls)
    first = flow.batch(ROWS[:3], store=db)
    with closing(sqlite3.connect(db)) as con:
        # as if the class of a pickled output no longer existed
        con.execute(
            "UPDATE batch_rows SET data = ? WHERE row_index = 1", ('{"work": {"__nbflow_pickle__": "bm9wZQ=="}}',)
        )
        con.commit()
    with nf.BatchStore(db) as store, pytest.raises(nf.StoreError, match="row 1: a stored value is an unsigned pickle"):
        store.rows(first.attrs["batch_id"])
    with nf.BatchStore(db, allow_pickle=True) as store, pytest.raises(nf.StoreError, match="row 1: cannot decode"):
        store.rows(first.attrs["batch_id"])
    calls.clear()
    with pytest.warns(nf.NbflowWarning, match="1 finished rows of batch .* cannot be read back"):
        again = flow.batch(ROWS[:3], store=db, resume=True)
    assert calls == [1]
    assert again["work"].tolist() == first["work"].tolist()


def test_resume_warns_when_the_store_has_only_other_batches_of_the_flow(tmp_path):
    db = tmp_path / "runs.db"
    flow = counting_flow([])
    flow.batch(ROWS, store=db)
    changed = [{**r, "note": "edited"} for r in ROWS]
    with pytest.warns(nf.NbflowWarning, match="has no batch .* so every row runs; it holds other batches"):
        df = flow.batch(changed, store=db, resume=True)
    assert (df["status"] == "succeeded").all()
