"""Checkpoint faults: a failed write fails the run (StoreError naming node and cause), a deleted or
replaced file is noticed, a run found RUNNING in a live process is not taken over, and a reloaded
record keeps attempts, reasons and the original error type."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import nbflow as nf


def test_a_store_deleted_mid_run_fails_the_run_naming_the_node_and_the_cause(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("deleted_store")
    ran = []

    @flow.node
    def first() -> int:
        for f in tmp_path.iterdir():
            os.remove(f)  # the store file (and its WAL) vanish while the run has it open
        return 1

    @flow.node
    def second(first: int) -> int:
        ran.append(1)
        return first + 1

    with pytest.raises(nf.StoreError, match=r"checkpoint write at node 'first' failed.*deleted") as info:
        flow.run(store=db, show=False)
    del info
    assert flow.last_run is not None and flow.last_run.status is nf.RunStatus.FAILED
    assert ran == []  # no node starts after a failed write


def test_a_store_replaced_between_runs_is_reopened(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("replaced_store")

    @flow.node
    def one() -> int:
        return 1

    flow.run(store=db, show=False)
    for f in tmp_path.iterdir():
        os.remove(f)
    run = flow.run(store=db, show=False)  # a new file at the same path
    assert nf.load_run(db, run.run_id)["one"] == 1


def test_an_unstorable_output_of_a_finished_run_raises_store_error(tmp_path: Path) -> None:
    flow = nf.Flow("unstorable_finish")

    @flow.node
    def handle() -> object:
        return threading.Lock()

    with pytest.raises(nf.StoreError, match=r"node 'handle'.*cannot store 'handle'.*lock"):
        flow.run(store=tmp_path / "runs.db", show=False)
    assert flow.last_run is not None and flow.last_run.status is nf.RunStatus.FAILED


def test_a_reloaded_record_keeps_attempts_reason_and_the_original_error_type(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("faithful")
    calls = {"n": 0}

    @flow.node(retry=nf.Retry(attempts=3, backoff=0.0))
    def flaky() -> int:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError(f"try {calls['n']}")
        return 7

    @flow.node(on_error=nf.Default(0))
    def broken(flaky: int) -> int:
        raise KeyError("nope")

    @flow.node(on_error="continue")
    def bad() -> int:
        raise ValueError("bad value")

    @flow.node
    def uses(bad: object) -> str:
        return type(bad).__name__

    run = flow.run(store=db, show=False)
    back = nf.load_run(db, run.run_id)
    assert [a.number for a in back.nodes["flaky"].attempts] == [1, 2, 3]
    assert type(back.nodes["flaky"].attempts[0].error).__name__ == "ConnectionError"
    assert back.nodes["broken"].recovered is True and back["broken"] == 0
    assert back.nodes["broken"].error_type == "KeyError"
    assert back.nodes["bad"].error_type == "ValueError"
    assert isinstance(back.nodes["bad"].error, nf.StoredError)


def test_a_run_deadline_reason_survives_a_reload(tmp_path: Path) -> None:
    import time

    db = tmp_path / "runs.db"
    flow = nf.Flow("deadline_reason")

    @flow.node
    def slow() -> int:
        time.sleep(0.5)
        return 1

    run = flow.run(store=db, timeout=0.05, show=False)
    assert run.reason
    assert nf.load_run(db, run.run_id).reason == run.reason


def test_a_run_running_in_a_live_process_is_not_taken_over(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("live_owner")
    seen: dict[str, object] = {}

    @flow.node
    def peek() -> int:
        other = nf.load_run(db, flow.last_run.run_id)  # type: ignore[union-attr]
        seen["status"] = other.status
        try:
            other.resume()
        except nf.ResumeConflictError as exc:
            seen["error"] = str(exc)
        return 1

    flow.run(store=db, show=False)
    assert seen["status"] is nf.RunStatus.RUNNING
    assert "RUNNING" in str(seen["error"])


def test_a_run_id_given_as_the_tuple_run_ids_lists_is_refused_naming_the_id_to_pass(tmp_path: Path) -> None:
    flow = nf.Flow("ids")

    @flow.node
    def one(x: int) -> int:
        return x

    path = str(tmp_path / "runs.db")
    run = flow.run(x=1, store=path, show=False)
    (listed,) = nf.CheckpointStore(path).run_ids()
    with pytest.raises(nf.StoreError, match=rf"run_id is the run's id, a str.*pass '{run.run_id}'"):
        nf.load_run(path, listed)  # type: ignore[arg-type]
    assert nf.load_run(path, listed[0])["one"] == 1
