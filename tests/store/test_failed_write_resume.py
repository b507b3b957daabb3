"""A checkpoint write that fails, then a resume in the same session: what the file lacks is written again (or
run again), so the pause the resume reaches can be answered after a restart. Both real faults: a database locked
by another connection past the store's timeout, and a disk I/O error injected into one node write."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nbflow as nf
from tests.helpers.store_files import hold_lock

FLOW = """
import os
import nbflow as nf

flow = nf.Flow("fault_then_resume")
HOOK = []


@flow.node
def first() -> int:
    with open(os.environ["RAN_LOG"], "a") as f:
        f.write("first\\n")
    while HOOK:
        HOOK.pop()()
    return 1


@flow.node
def second(first: int) -> int:
    return first + 1


@flow.node
async def review(second: int) -> str:
    return await nf.ask("ok?", options=["yes", "no"])


@flow.node
def done(review: str, second: int) -> str:
    return f"{review}:{second}"
"""

AFTER_RESTART = """
import sys
import nbflow as nf
from fault_flow import flow

run = nf.load_run(sys.argv[1], sys.argv[2])
print(run.status.name, run.nodes["first"].status.name, sorted(run.pending))
run.resume("yes")
print(run.status.name, run["done"])
"""


@pytest.fixture
def flow_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    (tmp_path / "fault_flow.py").write_text(FLOW)
    monkeypatch.setenv("RAN_LOG", str(tmp_path / "ran.log"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import fault_flow  # type: ignore[import-not-found]

    yield fault_flow
    sys.modules.pop("fault_flow", None)


class _DiskError:
    """The store's connection, whose first node write fails with SQLite's disk I/O error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.failed = False

    def execute(self, sql: str, *args: Any) -> Any:
        if not self.failed and "INSERT" in sql and "checkpoint_nodes" in sql:
            self.failed = True
            raise sqlite3.OperationalError("disk I/O error")
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def _restart(tmp_path: Path, db: Path, run_id: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(AFTER_RESTART), str(db), run_id],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**__import__("os").environ, "RAN_LOG": str(tmp_path / "ran.log")},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.mark.parametrize("fault", ["locked", "disk I/O error"])
def test_a_failed_write_then_a_resume_in_the_same_session_loses_nothing(
    tmp_path: Path, flow_module: Any, fault: str
) -> None:
    db = tmp_path / "runs.db"
    store = nf.CheckpointStore(db, timeout=0.2)
    if fault == "locked":
        flow_module.HOOK.append(lambda: hold_lock(db, 0.6))
        match = "locked by another process"
    else:
        store._db = _DiskError(store._db)  # type: ignore[assignment]
        match = "disk I/O error"
    with pytest.raises(nf.StoreError, match=rf"checkpoint write at node 'first' failed.*{match}") as info:
        flow_module.flow.run(store=store, show=False)
    del info
    run = flow_module.flow.last_run
    assert run.status is nf.RunStatus.FAILED
    time.sleep(0.7)  # the lock is gone; a disk error was once
    run.resume()  # same session: goes on to the question
    assert run.status is nf.RunStatus.PAUSED
    # What the failed write lost is on disk now.
    stored = nf.load_run(db, run.run_id)
    assert stored.status is nf.RunStatus.PAUSED
    assert stored.nodes["first"].status is nf.NodeStatus.SUCCEEDED and stored["first"] == 1
    store.close()
    # A restart answers the question: no StateTransitionError, not CANCELLED.
    assert _restart(tmp_path, db, run.run_id) == ["PAUSED SUCCEEDED ['review#0']", "SUCCEEDED yes:2"]
    assert nf.load_run(db, run.run_id).status is nf.RunStatus.SUCCEEDED
    assert (tmp_path / "ran.log").read_text() == "first\n"  # kept and written again, never run twice


def test_a_file_missing_an_upstream_node_runs_it_and_what_follows_again(tmp_path: Path, flow_module: Any) -> None:
    # A file damaged as an earlier nbflow left it: the paused run lacks its first node's record.
    db = tmp_path / "runs.db"
    run = flow_module.flow.run(store=db, show=False)
    assert run.status is nf.RunStatus.PAUSED
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM checkpoint_nodes WHERE run_id=? AND node='first'", (run.run_id,))
    con.close()
    assert _restart(tmp_path, db, run.run_id) == ["PAUSED PENDING ['review#0']", "SUCCEEDED yes:2"]
    assert (tmp_path / "ran.log").read_text() == "first\nfirst\n"  # run again, since the file lacked it
    back = nf.load_run(db, run.run_id)
    assert back.status is nf.RunStatus.SUCCEEDED and back["done"] == "yes:2"
