"""Group commit: rows that finish together share a transaction, and no worker outruns the disk."""

from __future__ import annotations

import asyncio
from typing import Any

import nbflow as nf
from nbflow._store.batch_store import BatchStore
from tests.helpers.store_files import rows_on_disk


def test_a_worker_starts_no_row_before_its_finished_rows_are_on_disk(tmp_path):
    path = str(tmp_path / "runs.db")
    seen: dict[int, set[int]] = {}
    flow = nf.Flow("disk")

    @flow.node
    async def work(i: int) -> int:
        seen[i] = rows_on_disk(path)  # another connection: only committed rows are visible
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


def test_cancelling_the_batch_while_a_group_commits_loses_no_finished_row(tmp_path):
    """The batch is cancelled in the loop turn between rows finishing and their group's commit: every
    row the frame reports finished is on disk, and the batch winds down (no worker hangs)."""
    path = str(tmp_path / "runs.db")
    flow = nf.Flow("cancel_mid_commit")
    holder: dict[str, Any] = {}

    @flow.node
    async def work(i: int) -> int:
        await asyncio.sleep(0.05 if i < 10 else 0.02)  # rows 0-9 finish in one turn; 10+ in the next waves
        if i >= 10 and "cancelled" not in holder:
            # The first row of its turn to finish: the batch's task wakes (cancelled) in the next turn
            # before this row's group commits, and cancels the workers waiting for that commit.
            holder["cancelled"] = True
            holder["task"].cancel()
        return i * 3

    async def main() -> None:
        holder["task"] = asyncio.ensure_future(
            flow.abatch([{"i": i} for i in range(40)], concurrency=10, store=path, progress=False)
        )
        try:
            await asyncio.wait_for(holder["task"], 30)
        except asyncio.CancelledError:
            pass

    asyncio.run(main())
    frame = flow.last_batch
    finished = set(frame.index[frame["status"] == "succeeded"])
    assert set(range(10)) <= finished  # the first wave was committed before the cancel
    assert finished - set(range(10)), frame["status"].tolist()  # rows that waited for their commit when cancelled
    assert finished <= rows_on_disk(path), f"rows reported succeeded but not stored: {finished - rows_on_disk(path)}"
    stored = BatchStore(path).load(BatchStore(path).batches()[-1]["batch_id"])
    assert sorted(stored["work"].dropna().astype(int).tolist()) == sorted(i * 3 for i in finished)
