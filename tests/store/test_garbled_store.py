"""Garbled store metadata and record fields nbflow never writes (another program edited the file, a bad copy) give
``CorruptStore`` naming the file and the field, never a raw ValueError/TypeError, and ``nbflow show`` says so
without a traceback."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import nbflow as nf

FLOW = """
import nbflow as nf

flow = nf.Flow("garbled")


@flow.node
def a(x: int) -> int:
    return x + 1


@flow.node
def b(a: int) -> int:
    return a * 2
"""

GARBLES = {
    "checkpoint schema": ("UPDATE nbflow_meta SET value='abc' WHERE key='checkpoint_schema'", "run"),
    "batch schema": ("UPDATE nbflow_meta SET value='x' WHERE key='batch_schema'", "batch"),
    "run status": ("UPDATE checkpoint_runs SET status='weird' WHERE run_id=:run", "run"),
    "node status": ("UPDATE checkpoint_nodes SET status='weird' WHERE run_id=:run", "run"),
    "pause version": ("UPDATE checkpoint_runs SET pause_version='x' WHERE run_id=:run", "run"),
    "start time": ("UPDATE checkpoint_runs SET started_at='yesterday' WHERE run_id=:run", "run"),
    "batch record": ("UPDATE batches SET meta='{not json'", "batch"),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("garbled")
    (folder / "garbled_flow.py").write_text(FLOW)
    sys.path.insert(0, str(folder))
    try:
        from garbled_flow import flow  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("garbled_flow", None)
    db = folder / "base.db"
    run = flow.run(x=1, store=db, show=False)
    flow.batch([{"x": i} for i in range(3)], store=db, experiment="e", progress=False)
    with closing(sqlite3.connect(db)) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file: a plain copy holds it
    return db, str(run.run_id)


@pytest.mark.parametrize("garble", list(GARBLES))
def test_a_garbled_field_is_a_corrupt_store(tmp_path: Path, written: tuple[Path, str], garble: str) -> None:
    base, run_id = written
    db = tmp_path / "runs.db"
    shutil.copy(base, db)
    shutil.copy(base.with_name("garbled_flow.py"), tmp_path / "garbled_flow.py")
    sql, part = GARBLES[garble]
    with closing(sqlite3.connect(db)) as con:
        assert con.execute(sql, {"run": run_id}).rowcount >= 1
        con.commit()
    reads: list[Callable[[], Any]] = (
        [lambda: nf.load_run(db, run_id)]
        if part == "run"
        else [lambda: nf.load_batch(db, "e"), lambda: nf.experiments(db)]
    )
    for read in reads:
        with pytest.raises(nf.StoreError, match=r"is not what nbflow writes") as info:
            read()
        assert type(info.value).__name__ == "CorruptStore" and str(db) in str(info.value)
    args = ["show", str(db)] + ([run_id, "--flow", "garbled_flow.py:flow"] if part == "run" else [])
    out = subprocess.run(
        [sys.executable, "-m", "nbflow", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "not what nbflow writes" in out.stderr
