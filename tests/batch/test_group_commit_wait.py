"""The group commit's wait (session 8): a worker waits one loop turn for its row's commit, without a future,
and still starts no new row before its finished rows are on disk; rows of every kind take the fast or the
general encoding and read back the same."""

from __future__ import annotations

import asyncio
import enum
import json

import numpy as np
import pytest

import nbflow as nf
from nbflow._batch.rows import _Commit
from nbflow._core.errors import StoreError
from tests.helpers.store_files import rows_on_disk


def test_with_many_workers_none_starts_a_row_before_its_own_finished_rows_are_on_disk(tmp_path):
    path = str(tmp_path / "runs.db")
    done_by: dict[int, list[int]] = {}  # worker task -> rows it finished, in order
    checks: list[tuple[int, set[int], set[int]]] = []
    flow = nf.Flow("disk_many")

    @flow.node
    async def work(i: int) -> int:
        task = id(asyncio.current_task())
        mine = done_by.setdefault(task, [])
        checks.append((i, set(mine), rows_on_disk(path)))  # another connection: only committed rows are visible
        await asyncio.sleep(0.001 * (i % 3))  # rows finish in different turns, several per turn
        mine.append(i)
        return i

    frame = flow.batch([{"i": i} for i in range(60)], concurrency=6, store=path, progress=False)
    assert frame["status"].tolist() == ["succeeded"] * 60
    assert len(done_by) <= 6  # the rows ran on the batch's workers: each checked its own earlier rows
    assert sum(len(v) > 3 for v in done_by.values()) >= 2
    for i, mine, on_disk in checks:
        assert mine <= on_disk, f"row {i} started before its worker's rows {mine - on_disk} were on disk"


def _waiter(commit: _Commit) -> asyncio.Task:
    async def wait() -> object:
        return await commit

    return asyncio.get_running_loop().create_task(wait())


def test_a_commit_still_pending_after_the_turn_is_waited_for_and_cannot_be_cancelled():
    async def main() -> None:
        commit = _Commit(asyncio.get_running_loop())
        task = _waiter(commit)
        for _ in range(3):  # the waiter's turn passed without the flush: it waits on the fallback future
            await asyncio.sleep(0)
        assert not task.done() and commit.future is not None
        task.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done()  # the commit is not cancelled by one of its waiters
        commit.settle(None)
        with pytest.raises(asyncio.CancelledError):
            await task  # ...the waiter is, once the commit is done

    asyncio.run(main())


@pytest.mark.parametrize("pending_turns", [0, 3])
def test_a_commit_gives_its_waiters_the_store_error_or_raises_a_bug(pending_turns):
    async def main() -> None:
        loop = asyncio.get_running_loop()
        failed, broken, fine = _Commit(loop), _Commit(loop), _Commit(loop)
        tasks = [_waiter(c) for c in (failed, broken, broken, fine)]
        for _ in range(pending_turns):
            await asyncio.sleep(0)
        error = StoreError("disk full")
        failed.settle(error)
        broken.settle(ValueError("an nbflow bug"))
        fine.settle(None)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert results[0] is error
        assert isinstance(results[1], ValueError) and isinstance(results[2], ValueError)
        assert results[3] is None

    asyncio.run(main())


class Color(enum.IntEnum):
    RED = 1


class Tag(str):
    pass


def test_rows_of_every_kind_read_back_as_before(tmp_path):
    """The fast encoding takes only rows of exact built-in scalars: a float64, an IntEnum, a str subclass and an
    nf.Secret output each go the general way and read back as they did (types kept, the secret redacted)."""
    path = tmp_path / "runs.db"
    flow = nf.Flow("kinds")

    @flow.node
    def out(kind: str) -> object:
        return {
            "plain": 2.5,
            "numpy": np.float64(2.5),
            "enum": Color.RED,
            "sub": Tag("t"),
            "secret": nf.Secret("sk-live-0123456789"),
            "none": None,
        }[kind]

    kinds = ["plain", "numpy", "enum", "sub", "secret", "none"]
    frame = flow.batch([{"kind": k} for k in kinds], store=path, progress=False, keep="none")
    assert frame["status"].tolist() == ["succeeded"] * len(kinds)
    stored = nf.load_batch(path, frame.attrs["batch_id"])
    values = dict(zip(stored["kind"], stored["out"], strict=True))
    assert type(values["plain"]) is float and values["plain"] == 2.5
    assert type(values["numpy"]) is np.float64 and values["numpy"] == 2.5
    assert values["enum"] == 1
    assert values["sub"] == "t"
    assert values["secret"] == "<redacted: secret not stored>"
    assert values["none"] is None
    assert b"sk-live-0123456789" not in path.read_bytes()


_EDGE = {
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "big": 2**70,
    "-big": -(2**64),
    "int64": 2**63 - 1,
    "null-text": "null",
    "null-in-text": "not null at all",
    "accents": "café, naïve ✓",
    "surrogate": "a\ud800b",
    "quote": 'say "hi"\n\\',
    "none": None,
    "float": 0.1 + 0.2,
    "true": True,
}


def _edge_batch(path: str) -> dict[str, object]:
    flow = nf.Flow("edges")

    @flow.node
    def out(kind: str) -> object:
        return _EDGE[kind]

    frame = flow.batch([{"kind": k} for k in _EDGE], store=path, progress=False, keep="none")
    assert frame["status"].tolist() == ["succeeded"] * len(_EDGE)
    stored = nf.load_batch(path, frame.attrs["batch_id"])
    return dict(zip(stored["kind"], stored["out"], strict=True))


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "standard encoder"])
def test_plain_cells_read_back_exactly_whichever_encoder_wrote_them(tmp_path, monkeypatch, fast):
    """A plain row's JSON is orjson's unless orjson would write something else (NaN, infinities, ints beyond
    64 bits, a lone surrogate): each value reads back with its type and value, with and without orjson."""
    from nbflow._store import batch_store

    if not fast:
        monkeypatch.setattr(batch_store, "_ORJSON", [None])
    back = _edge_batch(str(tmp_path / "runs.db"))
    for kind, value in _EDGE.items():
        assert _same(back[kind], value), (kind, back[kind], value)


def test_the_row_text_is_orjson_s_only_where_it_reads_back_the_same(tmp_path):
    from nbflow._store.batch_store import _plain_json
    from nbflow._store.pickling import json_text

    for kind, value in _EDGE.items():
        row = {"kind": kind, "out": value, "status": "succeeded"}
        text = _plain_json(row)
        assert text == json_text(row) or text.startswith('{"kind":'), kind
        decoded = json.loads(text)
        assert _same(decoded["out"], value), kind
    assert _plain_json({"a": 1, "b": None, "c": "x"}) == '{"a":1,"b":null,"c":"x"}'  # orjson's: it is used
    assert _plain_json({"a": float("nan")}) == '{"a": NaN}'  # the standard encoder's
