"""Batch store write faults: an unstorable output fails its row (the batch goes on); a locked file is
retried for a bounded time; a file that stays unwritable stops the batch with its partial frame."""

from __future__ import annotations

import sqlite3
import threading
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf


def _flow(name: str) -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def out(x: int) -> object:
        if x % 5 == 0:
            return threading.Lock()  # cannot be pickled
        return x * 2

    return flow


def test_an_unstorable_output_fails_its_row_and_the_batch_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    frame = _flow("unstorable_rows").batch(pd.DataFrame({"x": range(20)}), store=db)
    bad = frame[frame.x % 5 == 0]
    good = frame[frame.x % 5 != 0]
    assert (bad.status == "failed").all() and (bad.error_type == "StoreError").all()
    assert (bad.error_node == "out").all()
    assert bad.error_message.str.contains("node 'out' cannot be stored").all()
    assert (good.status == "succeeded").all() and list(good.out) == [x * 2 for x in good.x]
    with nf.BatchStore(db) as store:
        (batch,) = store.batches()
        stored = store.load(batch["batch_id"])
    assert len(stored) == 20 and (stored[stored.x % 5 == 0].status == "failed").all()


def _hold_lock(db: Path, seconds: float, started: threading.Event) -> None:
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    started.set()
    time.sleep(seconds)
    other.execute("ROLLBACK")
    other.close()


def _slow_flow(name: str) -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def out(x: int) -> int:
        time.sleep(0.01)
        return x + 1

    return flow


def test_a_lock_released_within_lock_wait_is_waited_for(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = nf.BatchStore(db, timeout=0.1, lock_wait=10.0)
    started = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(db, 1.0, started))
    holder.start()
    started.wait()
    frame = _slow_flow("lock_waited").batch(pd.DataFrame({"x": range(30)}), store=store)
    holder.join()
    assert (frame.status == "succeeded").all()
    assert len(store.rows(store.batches()[0]["batch_id"])) == 30


def test_a_lock_held_past_lock_wait_stops_the_batch_with_its_partial_frame(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = nf.BatchStore(db, timeout=0.05, lock_wait=0.3)
    flow = nf.Flow("lock_stops")
    started = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(db, 2.0, started))

    @flow.node
    def out(x: int) -> int:
        if x == 5:  # another process takes the file mid-batch and keeps it for 2 s
            holder.start()
            started.wait()
        time.sleep(0.01)
        return x + 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = flow.batch(pd.DataFrame({"x": range(300)}), store=store, concurrency=2)
    holder.join()
    assert "StoreError" in frame.attrs["stopped"] and "locked" in frame.attrs["stopped"]
    finished = frame[frame.status == "succeeded"]
    assert 5 <= len(finished) < 300  # rows that finished are in the frame, the rest never started
    assert list(finished.out) == [x + 1 for x in finished.x]
    assert (frame[frame.status != "succeeded"].status.isin(["pending", "cancelled"])).all()
    assert any("stopped early" in str(w.message) for w in caught)
    assert flow.last_batch is frame


def test_a_store_file_deleted_mid_batch_stops_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("deleted_batch_store")

    @flow.node
    def out(x: int) -> int:
        if x == 3:
            for f in tmp_path.iterdir():
                f.unlink()
        return x

    with pytest.warns(nf.NbflowWarning, match="stopped early, StoreError"):
        frame = flow.batch(pd.DataFrame({"x": range(10)}), store=db, concurrency=1)
    assert "deleted" in frame.attrs["stopped"]
    assert list(frame[frame.status == "succeeded"].x) == [0, 1, 2, 3]
