"""A group commit that fails: its rows finished (``succeeded`` in the frame) but are not on disk. The frame says so
(``stored`` is False for them, and a warning names them), and ``resume=True`` runs again exactly the rows the
store lacks."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import pandas as pd

import nbflow as nf
from tests.helpers.store_files import hold_lock, rows_on_disk


def test_rows_of_a_failed_group_commit_are_marked_not_stored_and_resume_runs_only_them(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("group_commit_fails")
    calls: list[int] = []
    holders: list[threading.Thread] = []

    @flow.node
    async def out(x: int) -> int:
        calls.append(x)
        if x == 6 and not holders:  # another process takes the file and keeps it past the lock_wait
            holders.append(hold_lock(db, 1.5))
        return x * 10

    store = nf.BatchStore(db, timeout=0.05, lock_wait=0.3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = flow.batch(pd.DataFrame({"x": range(40)}), store=store, concurrency=4, progress=False)
    holders[0].join()
    store.close()
    on_disk = rows_on_disk(str(db))
    succeeded = set(frame.index[frame.status == "succeeded"])
    lost = succeeded - on_disk
    assert lost, "no finished row was left off the disk: the fault did not hit a commit"
    # The frame tells which rows are on disk.
    assert "stored" in frame.columns
    assert set(frame.index[frame.stored]) == on_disk
    assert set(frame.index[(frame.status == "succeeded") & ~frame.stored]) == lost
    assert any(
        "could not be written to the store" in str(w.message) and "stored=False" in str(w.message) for w in caught
    )
    # resume=True runs again exactly what the store lacks: the lost rows and the ones that never finished.
    calls.clear()
    again = flow.batch(pd.DataFrame({"x": range(40)}), store=db, resume=True, concurrency=4, progress=False)
    assert sorted(calls) == sorted(set(range(40)) - on_disk)
    assert (again.status == "succeeded").all() and list(again.out) == [x * 10 for x in range(40)]
    assert "stored" not in again.columns  # every write succeeded: no column
    assert rows_on_disk(str(db)) == set(range(40))
