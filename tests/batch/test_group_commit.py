"""Group commit: rows that finish together share a transaction, and no worker outruns the disk."""

from __future__ import annotations

import asyncio
import sqlite3

import nbflow as nf
from nbflow._store.batch_store import BatchStore


def _on_disk(path: str) -> set[int]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {i for (i,) in db.execute("SELECT row_index FROM batch_rows")}
    except sqlite3.OperationalError:  # the table is not there yet
        return set()
    finally:
        db.close()


def test_a_worker_starts_no_row_before_its_finished_rows_are_on_disk(tmp_path):
    path = str(tmp_path / "runs.db")
    seen: dict[int, set[int]] = {}
    flow = nf.Flow("disk")

    @flow.node
    async def work(i: int) -> int:
        seen[i] = _on_disk(path)  # another connection: only committed rows are visible
        await asyncio.sleep(0)
        return i

    frame = flow.batch([{"i": i} for i in range(8)], concurrency=1, store=path, progress=False)
    assert frame["status"].tolist() == ["succeeded"] * 8
    for i in range(8):
        assert set(range(i)) <= seen[i], f"row {i} started before rows {set(range(i)) - seen[i]} were on disk"


def test_rows_finishing_together_share_transactions(tmp_path, monkeypatch):
    path = str(tmp_path / "runs.db")
    groups: list[int] = []
    real = BatchStore.write_rows

    def counting(self, rows):
        rows = list(rows)
        groups.append(len(rows))
        return real(self, rows)

    monkeypatch.setattr(BatchStore, "write_rows", counting)
    flow = nf.Flow("together")

    @flow.node
    async def work(i: int) -> int:
        await asyncio.sleep(0.05)  # every row of a wave wakes in the same loop turn
        return i * 2

    frame = flow.batch([{"i": i} for i in range(40)], concurrency=20, store=path, progress=False)
    assert frame["status"].tolist() == ["succeeded"] * 40
    assert sum(groups) == 40
    assert len(groups) < 40 and max(groups) > 1, groups
    stored = BatchStore(path).load(BatchStore(path).batches()[-1]["batch_id"])
    assert sorted(stored["work"].tolist()) == [i * 2 for i in range(40)]
