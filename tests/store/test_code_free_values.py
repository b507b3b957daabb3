"""Plain data is stored in a form that runs no code when read (nbflow/_store/plain.py): a file written by
someone else (another store key) opens without ``allow_pickle`` and gives back DataFrames, Series, numpy
arrays and scalars, pydantic models, enums, datetimes, Decimal, bytes, sets, tuples... exactly, in
checkpoints, batch stores, the runs a batch keeps, and the file cache. Pickle is left for what nothing
else represents."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import pathlib
import sqlite3
import sys
import uuid
import warnings
import zoneinfo
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pydantic
import pytest

import nbflow as nf


class Answer(pydantic.BaseModel):
    text: str
    score: float
    tags: list[str] = []


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


def values() -> dict[str, Any]:
    return {
        "tuple": (1, "a", (2.5, None)),
        "set": {1, 2, 3},
        "frozenset": frozenset({"x"}),
        "int_keys": {1: "a", (2, 3): [4]},
        "bytes": b"\x00\x01binary",
        "bytearray": bytearray(b"ba"),
        "naive": dt.datetime(2024, 5, 6, 7, 8, 9, 123456),
        "utc": dt.datetime(2024, 5, 6, tzinfo=dt.UTC),
        "offset": dt.datetime(2024, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=-3))),
        "zoned": dt.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=zoneinfo.ZoneInfo("America/New_York")),
        "date": dt.date(1999, 12, 31),
        "time": dt.time(23, 59, 1, 5),
        "timedelta": dt.timedelta(days=-1, seconds=5, microseconds=7),
        "decimal": decimal.Decimal("1.10"),
        "complex": complex(1.5, -2),
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "path": pathlib.PurePosixPath("/data/in.csv"),
        "enum": Color.BLUE,
        "model": Answer(text="t", score=0.25, tags=["a"]),
        "models": [Answer(text="u", score=1.0)],
        "array": np.arange(12, dtype=np.int16).reshape(3, 4),
        "float_array": np.array([1.5, np.nan, -np.inf]),
        "text_array": np.array(["a", "bc"]),
        "np_float": np.float32(1.25),
        "np_int": np.int64(-7),
        "np_bool": np.bool_(True),
        "np_datetime": np.datetime64("2024-01-02T03:04:05"),
        "frame": pd.DataFrame(
            {
                "n": [1, 2, 3],
                "x": [0.5, np.nan, 2.0],
                "s": ["a", None, "c"],
                "when": pd.to_datetime(["2024-01-01", "2024-01-02", None]),
                "cat": pd.Categorical(["u", "v", "u"]),
                "nullable": pd.array([1, None, 3], dtype="Int64"),
            },
            index=pd.Index(["r1", "r2", "r3"], name="row_id"),
        ),
        "series": pd.Series([1.0, 2.5], index=[10, 20], name="score"),
        "timestamp": pd.Timestamp("2024-03-04 05:06:07.000000009", tz="Europe/Paris"),
        "nested": {"__nbflow__": "not a tag", "list": [(1,), {2}]},
        "error": ValueError("boom"),
    }


def assert_same(got: Any, want: Any, where: str = "value") -> None:
    if isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    elif isinstance(want, pd.Series):
        pd.testing.assert_series_equal(got, want, check_exact=True)
    elif isinstance(want, np.ndarray):
        assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape, where
        np.testing.assert_array_equal(got, want)
    elif isinstance(want, BaseException):
        assert isinstance(got, nf.StoredError) and type(got).__name__ == type(want).__name__, where
        assert str(got) == str(want), where
    elif isinstance(want, dict):
        assert type(got) is dict and list(got) == list(want), where
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, list | tuple):
        assert type(got) is type(want) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert type(got) is type(want), f"{where}: {type(got)} != {type(want)}"
        assert got == want, f"{where}: {got!r} != {want!r}"
        if isinstance(want, dt.datetime):
            assert got.tzinfo == want.tzinfo and got.fold == want.fold, where
        if isinstance(want, pd.Timestamp):
            assert str(got.tz) == str(want.tz) and got.unit == want.unit, where
        if isinstance(want, np.generic):
            assert got.dtype == want.dtype, where


TOP_LEVEL = ("frame", "array", "model", "tuple", "series", "timestamp")


def make_flow(name: str, ran: list[str] | None = None, **kw: Any) -> nf.Flow:
    flow = nf.Flow(name, **kw)

    @flow.node
    def everything(x: int) -> dict:
        if ran is not None:
            ran.append("everything")
        return values()

    for key in TOP_LEVEL:

        def one(everything: dict, _key: str = key) -> Any:
            return values()[_key]

        one.__name__ = key
        flow.node(one)
    return flow


@pytest.fixture
def as_author(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Write as the author (their store key), then read as someone else (another key, nothing open)."""
    monkeypatch.setenv("NBFLOW_STORE_KEY", "the author's key")

    def become_reader() -> None:
        from nbflow._store import checkpoint, node_cache

        checkpoint._STORES.clear()
        node_cache._FILES.clear()
        monkeypatch.setenv("NBFLOW_STORE_KEY", "the reader's key")

    return become_reader


def no_pickles_in(db: Path) -> None:
    """Every value blob of the file is JSON or the code-free form: none is a pickle."""
    with sqlite3.connect(db) as raw:
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        blobs: list[bytes] = []
        if "checkpoint_nodes" in tables:
            blobs += [r[0] for r in raw.execute("SELECT output FROM checkpoint_nodes WHERE output IS NOT NULL")]
            blobs += [r[0] for r in raw.execute("SELECT detail FROM checkpoint_nodes WHERE detail IS NOT NULL")]
            blobs += [r[0] for r in raw.execute("SELECT question FROM checkpoint_questions")]
        if "node_cache" in tables:
            blobs += [r[0] for r in raw.execute("SELECT value FROM node_cache")]
        if "nbflow_values" in tables:  # values stored once; the records hold references to them (b"NBR1" + key)
            blobs += [r[0] for r in raw.execute("SELECT data FROM nbflow_values")]
            blobs = [b for b in blobs if bytes(b)[:4] != b"NBR1"]
        for b in blobs:
            assert bytes(b)[:4] in (b"NBJ1", b"NBT1", b"NBPQ"), bytes(b)[:40]
        if "batch_rows" in tables:
            for (text,) in raw.execute("SELECT data FROM batch_rows"):
                assert "__nbflow_signed__" not in text and "__nbflow_pickle__" not in text


def test_a_checkpoint_of_plain_data_opens_anywhere_without_pickle(tmp_path: Path, as_author: Any) -> None:
    db = tmp_path / "runs.db"
    flow = make_flow("plain_ckpt")

    @flow.node
    async def review(everything: dict) -> str:
        return await nf.ask("ok?", data={"when": dt.date(2024, 1, 1), "pair": (1, 2)}, options=["yes", "no"])

    run = flow.run(x=1, store=db, show=False)
    assert run.status is nf.RunStatus.PAUSED
    no_pickles_in(db)
    as_author()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = nf.load_run(db, run.run_id)  # another key, no allow_pickle: nothing needs trust
    assert_same(back["everything"], values())
    for key in TOP_LEVEL:
        assert_same(back[key], values()[key], key)
    (question,) = back.pending.values()
    assert isinstance(question, nf.Question) and question.data == {"when": dt.date(2024, 1, 1), "pair": (1, 2)}
    assert question.options == ("yes", "no")
    done = flow.resume(run.run_id, "yes", store=db)  # the reader goes on from the author's checkpoint
    assert done.status is nf.RunStatus.SUCCEEDED and done["review"] == "yes"


def test_batch_rows_and_kept_runs_of_plain_data_open_anywhere(tmp_path: Path, as_author: Any) -> None:
    db = tmp_path / "batch.db"
    ran: list[str] = []
    frame = make_flow("plain_batch", ran).batch(
        pd.DataFrame({"x": [1, 2]}), store=db, keep="all", outputs=["everything", *TOP_LEVEL], progress=False
    )
    assert list(frame.status) == ["succeeded", "succeeded"] and len(ran) == 2
    no_pickles_in(db)
    as_author()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = nf.load_batch(db, frame.attrs["batch_id"])
        for i in range(2):
            assert_same(loaded["everything"].iloc[i], values())
            for key in TOP_LEVEL:
                assert_same(loaded[key].iloc[i], values()[key], key)
            kept = nf.load_run(db, frame["run_id"].iloc[i])
            assert_same(kept["everything"], values())
            assert_same(kept["frame"], values()["frame"])
        again = make_flow("plain_batch", ran).batch(
            pd.DataFrame({"x": [1, 2]}), store=db, resume=True, outputs=["everything", *TOP_LEVEL], progress=False
        )
    assert len(ran) == 2  # resumed from the author's rows: nothing ran again, nothing needed trust
    assert_same(again["model"].iloc[1], values()["model"])


def test_the_file_cache_of_plain_data_is_a_hit_for_another_reader(tmp_path: Path, as_author: Any) -> None:
    db = tmp_path / "cache.db"
    ran: list[str] = []
    first = make_flow("plain_cache", ran, cache=db).run(x=1, show=False)
    assert first.status is nf.RunStatus.SUCCEEDED and ran == ["everything"]
    no_pickles_in(db)
    as_author()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = make_flow("plain_cache", ran, cache=db).run(x=1, show=False)
    assert ran == ["everything"]  # a hit: read without pickle
    assert second.record("everything").cached
    assert_same(second["everything"], values())
    for key in TOP_LEVEL:
        assert_same(second[key], values()[key], key)


def test_a_model_class_is_never_imported_to_read_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The class path in a file names a module; reading never imports it (an import runs its code)."""
    pkg = tmp_path / "mods"
    pkg.mkdir()
    marker = tmp_path / "imported"
    (pkg / "nbflow_side_effect_models.py").write_text(
        "import pathlib, pydantic\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "class Point(pydantic.BaseModel):\n    x: int\n    y: int\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    import nbflow_side_effect_models as mod  # type: ignore[import-not-found]

    db = tmp_path / "b.db"
    flow = nf.Flow("no_import")

    @flow.node
    def point(x: int) -> Any:
        return mod.Point(x=x, y=2)

    flow.batch([{"x": 1}], store=db, progress=False)
    back = nf.load_batch(db, nf.experiments(db)["batch_id"].iloc[0])
    assert isinstance(back["point"].iloc[0], mod.Point)  # the class is loaded here: the model comes back
    marker.unlink()
    del sys.modules["nbflow_side_effect_models"]  # a reader that never imported it (it is importable)
    back = nf.load_batch(db, nf.experiments(db)["batch_id"].iloc[0])
    assert back["point"].iloc[0] == {"x": 1, "y": 2}  # its fields, as data
    assert not marker.exists()
    assert "nbflow_side_effect_models" not in sys.modules


def test_forged_tags_run_no_code(tmp_path: Path) -> None:
    """A file author can write any tag: a class path of a function, an object array. None runs code."""
    marker = tmp_path / "pwned"
    db = tmp_path / "forged.db"
    with nf.BatchStore(db) as store:
        store.begin_batch("b", "f", 4, ["v"])
    import io

    evil_array = io.BytesIO()
    np.save(evil_array, np.array([object()], dtype=object), allow_pickle=True)
    forged = [
        {"__nbflow__": "model", "cls": "os:system", "json": json.dumps(f"touch {marker}")},
        {"__nbflow__": "enum", "cls": "subprocess:getoutput", "v": f"touch {marker}"},
        {"__nbflow__": "record", "cls": "Popen", "fields": {"args": ["touch", str(marker)]}},
        {"__nbflow__": "ndarray", "b": __import__("base64").b64encode(evil_array.getvalue()).decode()},
    ]
    with sqlite3.connect(db) as raw:
        for i, tree in enumerate(forged):
            raw.execute(
                "INSERT INTO batch_rows(batch_id, case_key, row_index, run_id, status, finished_at, data) "
                "VALUES ('b', ?, ?, 'r', 'succeeded', 0, ?)",
                (f"row:{i}", i, json.dumps({"v": {"__nbflow_plain__": tree}})),
            )
    with nf.BatchStore(db) as store:
        rows = store.rows("b", skip_unreadable=True)
        assert rows[0].data["v"] == f"touch {marker}"  # not a model class: its data, as data
        assert rows[1].data["v"] == f"touch {marker}"  # not an enum class: the value
        assert set(store.unreadable) == {2, 3}  # unknown record, object array: refused, not run
        with pytest.raises(nf.StoreError, match=r"row 2: .*unknown nbflow record 'Popen'"):
            store.load("b")
    assert not marker.exists()


def test_what_nothing_else_represents_is_still_a_signed_pickle(tmp_path: Path, as_author: Any) -> None:
    db = tmp_path / "runs.db"
    flow = nf.Flow("opaque")

    @flow.node
    def obj(x: int) -> Any:
        return pathlib  # a module: no data form

    @flow.node
    async def review(obj: Any) -> str:
        return await nf.ask("ok?")

    with pytest.raises(nf.StoreError):
        flow.run(x=1, store=db, show=False)  # a module cannot be pickled either: a clear StoreError

    flow2 = nf.Flow("opaque2")

    @flow2.node
    def obj2(x: int) -> Any:
        return Opaque(x)

    @flow2.node
    async def review2(obj2: Any) -> str:
        return await nf.ask("ok?")

    run = flow2.run(x=3, store=db, show=False)
    assert nf.load_run(db, run.run_id)["obj2"] == Opaque(3)  # your own file: your key verifies it
    as_author()
    with pytest.raises(nf.StoreError, match="allow_pickle=True"):
        nf.load_run(db, run.run_id)
    assert nf.load_run(db, run.run_id, allow_pickle=True)["obj2"] == Opaque(3)


class Opaque:
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.n == self.n
