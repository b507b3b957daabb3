"""A read-only copy of a valid store (read-only file and folder: SQLite cannot create the ``-shm`` file WAL
mode needs) can be read through every public reader, and a write says clearly that the store is read-only.

Read-only for real: the readers run in a subprocess that sees the folder through a read-only bind mount
(a private mount namespace; as root, file modes alone would not stop a write), or, for a user that is not
root, with the file 0444 and its folder 0555."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from tests.helpers.read_only import run_read_only

KEY = {"NBFLOW_STORE_KEY": "read-only test key"}

SCRIPT = """
import json, sys
import pandas as pd
import nbflow as nf

db, run_id = sys.argv[1], sys.argv[2]
flow = nf.Flow("ro")

@flow.node
def work(x: int) -> int:
    return x * 2

@flow.node
async def review(work: int) -> str:
    return await nf.ask("ok?")

def attempt(fn):
    try:
        return {"ok": fn()}
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc), "store_error": isinstance(exc, nf.StoreError)}

out = {
    "load_run": attempt(lambda: [nf.load_run(db, run_id).status.value, nf.load_run(db, run_id)["work"]]),
    "load_batch": attempt(lambda: nf.load_batch(db, "b")["work"].tolist()),
    "experiments": attempt(lambda: nf.experiments(db)["rows"].tolist()),
    "batch_store": attempt(lambda: nf.BatchStore(db).load("b")["status"].tolist()),
    "resume_run": attempt(lambda: flow.resume(run_id, "yes", store=db).status.value),
    "resume_batch": attempt(
        lambda: flow.batch(pd.DataFrame({"x": range(5)}), store=db, batch_id="b", outputs=["work"],
                           resume=True, progress=False).shape[0]),
    "new_run": attempt(lambda: flow.run(x=3, store=db, show=False).status.value),
    "still_paused": attempt(lambda: nf.load_run(db, run_id).status.value),
}
print(json.dumps(out))
"""


def _write_store(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    monkeypatch.setenv("NBFLOW_STORE_KEY", KEY["NBFLOW_STORE_KEY"])
    db = folder / "runs.db"
    flow = nf.Flow("ro")

    @flow.node
    def work(x: int) -> int:
        return x * 2

    @flow.node
    async def review(work: int) -> str:
        return await nf.ask("ok?")

    run = flow.run(x=1, store=db, show=False)
    flow.batch(pd.DataFrame({"x": range(5)}), store=db, batch_id="b", outputs=["work"], progress=False)
    from nbflow._store import checkpoint

    checkpoint.open_store(db).close()  # what a copy holds: the file alone, its log folded in
    checkpoint._STORES.clear()
    with closing(sqlite3.connect(db)) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for extra in ("-wal", "-shm"):
        Path(str(db) + extra).unlink(missing_ok=True)
    return db, run.run_id


def _read_only_run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c SCRIPT args`` with ``folder`` read-only for it."""
    return run_read_only(folder, [sys.executable, "-c", SCRIPT, *args], {**os.environ, **KEY})


def test_a_read_only_copy_reads_and_refuses_writes_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    db, run_id = _write_store(folder, monkeypatch)
    before = db.read_bytes()
    done = _read_only_run(folder, str(db), run_id)
    assert done.returncode == 0, (done.stdout, done.stderr)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["load_run"] == {"ok": ["paused", 2]}
    assert out["load_batch"] == {"ok": [0, 2, 4, 6, 8]}
    assert out["experiments"] == {"ok": [5]}
    assert out["batch_store"] == {"ok": ["succeeded"] * 5}
    for write in ("resume_run", "resume_batch", "new_run"):
        got = out[write]
        assert got.get("error") == "ReadOnlyStore" and got["store_error"], (write, got)
        assert str(db) in got["message"] and "is read-only" in got["message"]
        assert "copy the file to a writable folder" in got["message"]
    assert out["still_paused"] == {"ok": "paused"}  # the refused resume consumed nothing
    assert db.read_bytes() == before and sorted(p.name for p in folder.iterdir()) == ["runs.db"]


def test_a_read_only_copy_with_a_pending_log_is_refused_not_read_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy taken with its -wal file (changes not yet in the main file): immutable mode would ignore
    the log and read too few rows, so the reader is told what to do instead."""
    folder = tmp_path / "copy"
    folder.mkdir()
    db, run_id = _write_store(folder, monkeypatch)
    with closing(sqlite3.connect(db)) as raw:  # another row lands in the log, and stays there
        raw.execute("PRAGMA wal_autocheckpoint=0")
        raw.execute("INSERT INTO nbflow_meta VALUES ('late', 'in the log')")
        raw.commit()
        Path(str(db) + "-shm").unlink()
        shutil.copy(str(db) + "-wal", tmp_path / "kept-wal")
    shutil.copy(tmp_path / "kept-wal", str(db) + "-wal")  # the connection's close folded it in: put it back
    Path(str(db) + "-shm").unlink(missing_ok=True)
    done = _read_only_run(folder, str(db), run_id)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    got = out["load_run"]
    assert got.get("error") == "ReadOnlyStore" and "write-ahead log" in got["message"], got
    assert "-wal" in got["message"] and "writable folder" in got["message"]
