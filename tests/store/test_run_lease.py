"""A checkpointed run left RUNNING by a process on another host (a re-created container, a shared folder, a
renamed laptop) is taken over once its lease is stale: the owner rewrites a heartbeat while it runs the run, and
a heartbeat older than ``STALE`` seconds means it is gone. ``force=True`` (``nbflow resume --force``) takes it
over at once. On this host a killed owner is seen by its pid, as before."""

from __future__ import annotations

import os
import signal
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
from nbflow._store import owner

FLOW = """
import os
import time
import nbflow as nf

flow = nf.Flow("leased")


@flow.node
def first() -> int:
    with open(os.environ["RAN_LOG"], "a") as f:
        f.write("first\\n")
    return 1


@flow.node
def slow(first: int) -> int:
    if os.environ.get("SLOW"):
        time.sleep(120)  # killed here
    return first + 1


@flow.node
async def review(slow: int) -> str:
    return await nf.ask("ok?", options=["yes", "no"])


@flow.node
def done(review: str, slow: int) -> str:
    return f"{review}:{slow}"
"""


@pytest.fixture
def leased(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    (tmp_path / "leased_flow.py").write_text(FLOW)
    monkeypatch.setenv("RAN_LOG", str(tmp_path / "ran.log"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import leased_flow  # type: ignore[import-not-found]

    yield leased_flow
    sys.modules.pop("leased_flow", None)


def _held_elsewhere(db: Path, run_id: str, heartbeat: float | None) -> None:
    """Make the stored run RUNNING, owned by a process on another host whose last heartbeat was ``heartbeat``."""
    with sqlite3.connect(db) as con:
        con.execute(
            "UPDATE checkpoint_runs SET status='running', owner='container-7f3a:4242:99', heartbeat=? WHERE run_id=?",
            (heartbeat, run_id),
        )
    con.close()


def _paused(leased: Any, db: Path) -> str:
    run = leased.flow.run(store=db, show=False)
    assert run.status is nf.RunStatus.PAUSED
    return str(run.run_id)


def test_a_run_of_another_host_whose_heartbeat_is_stale_is_taken_over(tmp_path: Path, leased: Any) -> None:
    db = tmp_path / "runs.db"
    run_id = _paused(leased, db)
    _held_elsewhere(db, run_id, time.time() - owner.STALE - 5)
    run = nf.load_run(db, run_id)
    assert run.status is nf.RunStatus.PAUSED
    assert run.reason is not None and "process 4242 on host 'container-7f3a'" in run.reason
    assert "no heartbeat for" in run.reason
    run.resume("yes")
    assert run.status is nf.RunStatus.SUCCEEDED and run["done"] == "yes:2"
    assert nf.load_run(db, run_id).status is nf.RunStatus.SUCCEEDED


@pytest.mark.parametrize("heartbeat", ["fresh", "none"])
def test_a_run_of_another_host_with_a_live_lease_needs_force(tmp_path: Path, leased: Any, heartbeat: str) -> None:
    db = tmp_path / "runs.db"
    run_id = _paused(leased, db)
    # A fresh heartbeat (alive), or none at all (an older nbflow: unknown, so alive).
    _held_elsewhere(db, run_id, time.time() if heartbeat == "fresh" else None)
    run = nf.load_run(db, run_id)
    assert run.status is nf.RunStatus.RUNNING
    with pytest.raises(nf.ResumeConflictError, match="RUNNING"):
        run.resume("yes")
    with pytest.raises(nf.ResumeConflictError, match="RUNNING"):
        leased.flow.cancel(run_id, store=db)
    assert nf.load_run(db, run_id).status is nf.RunStatus.RUNNING  # nothing changed
    run.resume("yes", force=True)
    assert run.status is nf.RunStatus.SUCCEEDED and run["done"] == "yes:2"
    assert nf.load_run(db, run_id).status is nf.RunStatus.SUCCEEDED
    # A cancel can force too.
    other = _paused(leased, db)
    _held_elsewhere(db, other, time.time())
    cancelled = leased.flow.cancel(other, store=db, force=True)
    assert cancelled.status is nf.RunStatus.CANCELLED
    assert nf.load_run(db, other).status is nf.RunStatus.CANCELLED


def test_force_refuses_a_run_this_process_is_running(tmp_path: Path, leased: Any) -> None:
    db = tmp_path / "runs.db"
    seen: dict[str, Any] = {}
    flow = nf.Flow("forced_here")

    @flow.node
    def look() -> int:
        from nbflow._flow.flow import Flow  # noqa: F401  (the engine is loaded: load_run below)

        seen["run"] = nf.load_run(db, flow.last_run.run_id if flow.last_run else "")
        with pytest.raises(nf.ResumeConflictError, match="running in this process"):
            seen["run"].resume(force=True)
        return 1

    assert flow.run(store=db, show=False).status is nf.RunStatus.SUCCEEDED  # (the check in the node passed)
    assert seen["run"].status is nf.RunStatus.RUNNING


def test_nbflow_resume_force_on_the_command_line(tmp_path: Path, leased: Any) -> None:
    db = tmp_path / "runs.db"
    run_id = _paused(leased, db)
    _held_elsewhere(db, run_id, time.time())
    env = {**os.environ, "NO_COLOR": "1", "RAN_LOG": str(tmp_path / "ran.log")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "nbflow", "resume", str(db), run_id, "--flow", "leased_flow.py:flow", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    refused = cli("--answer", "yes")
    assert refused.returncode != 0
    assert "RUNNING in another live process" in refused.stderr and "--force" in refused.stderr
    assert nf.load_run(db, run_id).status is nf.RunStatus.RUNNING
    forced = cli("--answer", "yes", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "SUCCEEDED" in forced.stdout
    assert nf.load_run(db, run_id)["done"] == "yes:2"


CHILD = """
import socket
socket.gethostname = lambda: "container-gone"  # this process is "another host" to the test
import sys
import nbflow as nf
from nbflow._store import owner
owner.HEARTBEAT = 0.2
from leased_flow import flow
flow.run(store=sys.argv[1], show=False)
"""


def test_a_sigkilled_owner_on_another_host_is_taken_over_once_its_lease_is_stale(
    tmp_path: Path, leased: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "runs.db"
    monkeypatch.setattr(owner, "STALE", 1.5)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(db)],
        cwd=tmp_path,
        env={**os.environ, "SLOW": "1", "RAN_LOG": str(tmp_path / "ran.log")},
    )
    try:
        deadline = time.monotonic() + 60
        run_id = None
        while time.monotonic() < deadline and run_id is None:
            time.sleep(0.1)
            if db.exists():
                with sqlite3.connect(db) as con:
                    try:
                        row = con.execute("SELECT run_id FROM checkpoint_nodes WHERE node='first'").fetchone()
                    except sqlite3.OperationalError:
                        row = None
                con.close()
                run_id = row[0] if row else None
        assert run_id is not None, "the child never checkpointed its first node"
        with sqlite3.connect(db) as con:
            (beat1,) = con.execute("SELECT heartbeat FROM checkpoint_runs WHERE run_id=?", (run_id,)).fetchone()
        con.close()
        time.sleep(2.0)  # longer than STALE: a live owner beats meanwhile
        assert nf.load_run(db, run_id).status is nf.RunStatus.RUNNING
        with sqlite3.connect(db) as con:
            (beat2,) = con.execute("SELECT heartbeat FROM checkpoint_runs WHERE run_id=?", (run_id,)).fetchone()
        con.close()
        assert beat2 > beat1
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    time.sleep(2.0)  # its last heartbeat grows stale
    run = nf.load_run(db, run_id)
    assert run.status is nf.RunStatus.PAUSED and "container-gone" in (run.reason or "")
    run.resume()  # continues from the last checkpoint: 'first' is kept
    assert run.status is nf.RunStatus.PAUSED and sorted(run.pending) == ["review#0"]
    run.resume("yes")
    assert run.status is nf.RunStatus.SUCCEEDED and run["done"] == "yes:2"
    assert (tmp_path / "ran.log").read_text() == "first\n"
