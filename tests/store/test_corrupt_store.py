"""A store file with a corrupt interior page (a disk fault, a bad copy) gives a clear StoreError naming
the file and the fix wherever it is opened - resume=True, nf.load_run, flow.resume, nf.load_batch,
nf.BatchStore - never a raw sqlite3.DatabaseError. Real files, real pages overwritten."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf

FIX = r"is damaged \(database disk image is malformed\).*sqlite3 .*\.recover"


def _flow(ran: list[int] | None = None) -> nf.Flow:
    flow = nf.Flow("corrupt")

    @flow.node
    def work(x: int) -> str:
        if ran is not None:
            ran.append(x)
        return "y" * 300 + str(x)

    return flow


def _corrupt_root_page(db: Path, table: str) -> int:
    """Overwrite the root page of ``table``'s b-tree (an interior page: the table spans many pages)."""
    with closing(sqlite3.connect(db)) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (root,) = raw.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
        with open(db, "r+b") as f:  # the page is interior: its first byte says so (0x05: interior table page)
            f.seek((root - 1) * page_size)
            assert f.read(1) == b"\x05", "the table fits one page: not an interior page"
            f.seek((root - 1) * page_size)
            f.write(os.urandom(page_size))
    return root


@pytest.fixture
def stored(tmp_path: Path) -> dict:
    db = tmp_path / "runs.db"
    frame = _flow().batch(pd.DataFrame({"x": range(1500)}), store=db, batch_id="b", keep="all", progress=False)
    return {"db": db, "run_id": frame["run_id"].iloc[700]}


def test_resume_and_every_batch_reader_on_a_corrupt_batch_table(stored: dict) -> None:
    db = stored["db"]
    _corrupt_root_page(db, "batch_rows")
    ran: list[int] = []
    flow = _flow(ran)
    with pytest.raises(nf.StoreError, match=FIX) as err:
        flow.batch(pd.DataFrame({"x": range(1500)}), store=db, batch_id="b", resume=True, progress=False)
    assert str(db) in str(err.value) and not ran  # refused before a row ran
    with pytest.raises(nf.StoreError, match=FIX):
        nf.load_batch(db, "b")
    assert nf.experiments(db)["rows"].tolist() == [1500]  # the list reads the batch record, not the rows
    with nf.BatchStore(db) as store, pytest.raises(nf.StoreError, match=FIX):
        store.rows("b")


def test_load_run_and_flow_resume_on_a_corrupt_checkpoint_table(stored: dict) -> None:
    db = stored["db"]
    _corrupt_root_page(db, "checkpoint_runs")  # a batch's kept runs: one row each, holding its node records
    with pytest.raises(nf.StoreError, match=FIX) as err:
        nf.load_run(db, stored["run_id"])
    assert str(db) in str(err.value)
    with pytest.raises(nf.StoreError, match=FIX):
        _flow().resume(stored["run_id"], "yes", store=db)
