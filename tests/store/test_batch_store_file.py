"""nbflow.BatchStore: schema and version, exact round trips (JSON, pickle fallback), secrets, deletion."""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing

import pydantic
import pytest

import nbflow as nf


class Answer(pydantic.BaseModel):
    text: str
    score: float


class Opaque:  # nothing but pickle can represent it
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.n == self.n


def test_a_new_store_has_a_versioned_schema_in_wal_mode(tmp_path):
    db = tmp_path / "s.db"
    nf.BatchStore(db).close()
    with closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT value FROM nbflow_meta WHERE key = 'batch_schema'").fetchall() == [("4",)]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"nbflow_meta", "batches", "batch_rows"} <= tables
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    nf.BatchStore(db).close()  # reopening does not add a second version row
    with closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT COUNT(*) FROM nbflow_meta WHERE key = 'batch_schema'").fetchone()[0] == 1


def test_an_unknown_schema_version_is_refused(tmp_path):
    db = tmp_path / "s.db"
    nf.BatchStore(db).close()
    with closing(sqlite3.connect(db)) as con:
        con.execute("UPDATE nbflow_meta SET value = '99' WHERE key = 'batch_schema'")
        con.commit()
    with pytest.raises(nf.StoreError, match="batch schema version 99"):
        nf.BatchStore(db)


def test_values_round_trip_exactly_json_then_code_free_then_pickle(tmp_path):
    values = {
        "s": "text",
        "i": 3,
        "f": 0.5,
        "nan": math.nan,
        "b": True,
        "none": None,
        "list": [1, "a", [2.5]],
        "dict": {"k": [1, 2]},
        "tuple": (1, 2),
        "intkeys": {1: "a"},
        "model": Answer(text="t", score=0.25),
        "object": Opaque(7),
    }
    with nf.BatchStore(tmp_path / "s.db") as store:
        store.begin_batch("b", "flow", 1, list(values))
        store.write_row("b", 0, "r0", "succeeded", values)
        row = store.rows("b")[0]
        raw = store._db.execute("SELECT data FROM batch_rows").fetchone()[0]
    assert row.status == "succeeded" and row.run_id == "r0"
    data = row.data
    assert math.isnan(data.pop("nan"))
    assert data == {k: v for k, v in values.items() if k != "nan"}
    assert type(data["tuple"]) is tuple and isinstance(data["model"], Answer)
    assert '"s": "text"' in raw and '"list": [1, "a", [2.5]]' in raw  # plain JSON, readable
    assert raw.count("__nbflow_plain__") == 3  # tuple, int keys, model: code-free
    assert raw.count("__nbflow_signed__") == 1  # only the object: a pickle tagged with the writer's key


def test_pickled_values_are_left_alone_unless_unpickle(tmp_path):
    with nf.BatchStore(tmp_path / "s.db") as store:
        store.begin_batch("b", "flow", 1, ["x"])
        store.write_row("b", 0, None, "succeeded", {"x": Opaque(2)})
        assert store.rows("b", unpickle=False)[0].data == {"x": {"__nbflow_signed__": "(not unpickled)"}}


def test_secret_columns_and_secret_values_are_never_written(tmp_path):
    with nf.BatchStore(tmp_path / "s.db") as store:
        store.begin_batch("b", "flow", 1, ["token", "out", "key"])
        row = {"token": "abc", "out": pydantic.SecretStr("pw-1"), "key": nf.Secret("sk-2")}
        store.write_row("b", 0, None, "succeeded", row, secret_columns=["token"])
        raw = store._db.execute("SELECT data FROM batch_rows").fetchone()[0]
        assert "abc" not in raw and "pw-1" not in raw and "sk-2" not in raw
        assert store.rows("b")[0].data == dict.fromkeys(row, "<redacted: secret not stored>")


def test_batches_and_run_checkpoints_share_one_file(tmp_path):
    db = tmp_path / "both.db"
    flow = nf.Flow("both")

    @flow.node
    def double(x: int) -> int:
        return 2 * x

    run = flow.run(x=2, store=db)
    df = flow.batch([{"x": 1}, {"x": 3}], store=db)
    with nf.BatchStore(db) as store:
        assert store.load(df.attrs["batch_id"])["double"].tolist() == [2, 6]
    assert nf.load_run(db, run.run_id)["double"] == 4
    with closing(sqlite3.connect(db)) as con:
        keys = dict(con.execute("SELECT key, value FROM nbflow_meta").fetchall())
    assert keys == {"checkpoint_schema": "5", "batch_schema": "4"}


def test_batches_listing_load_and_delete(tmp_path):
    with nf.BatchStore(tmp_path / "s.db") as store:
        store.begin_batch("b1", "flow", 2, ["x"])
        store.write_row("b1", 1, None, "failed", {"x": 1})
        assert store.batches()[0]["batch_id"] == "b1"
        assert store.batches()[0]["finished"] == 1
        assert store.load("b1")["x"].tolist() == [1]
        with pytest.raises(nf.StoreError, match="no batch 'nope'; batches: 'b1'"):
            store.load("nope")
        store.delete_batch("b1")
        assert store.batches() == []


def test_a_later_try_of_a_row_replaces_the_earlier_one(tmp_path):
    with nf.BatchStore(tmp_path / "s.db") as store:
        store.begin_batch("b", "flow", 1, ["x"])
        store.write_row("b", 0, None, "failed", {"x": 1})
        store.write_row("b", 0, None, "succeeded", {"x": 2})
        rows = store.rows("b")
        assert len(rows) == 1 and rows[0].status == "succeeded" and rows[0].data == {"x": 2}


def _rows_per_key(path) -> list[tuple[str, str, int]]:
    with closing(sqlite3.connect(path)) as con:
        return con.execute(
            "SELECT batch_id, case_key, COUNT(*) FROM batch_rows GROUP BY batch_id, case_key ORDER BY batch_id"
        ).fetchall()


def test_one_row_per_key_whoever_wrote_the_earlier_try(tmp_path):
    # Schema 3 keeps "one row per (batch, key)" in the writer, not in a primary key: it must hold when
    # another connection wrote the earlier try, when one group holds the row twice, and across batches.
    path = tmp_path / "s.db"
    with nf.BatchStore(path) as a, nf.BatchStore(path) as b:
        a.begin_batch("b", "flow", 2, ["x"])
        b.begin_batch("c", "flow", 1, ["x"])
        a.write_row("b", 0, None, "failed", {"x": 1}, key="k0")
        b.write_row("b", 0, None, "failed", {"x": 2}, key="k0")  # b never saw k0: the file tells it
        a.write_row("b", 0, None, "succeeded", {"x": 3}, key="k0")  # a's knowledge is stale: read again
        a.write_row("c", 0, None, "succeeded", {"x": 9}, key="k0")  # the same key in another batch is another row
        rows = [a.prepare_row("b", 1, None, s, {"x": n}, key="k1") for n, s in ((4, "failed"), (5, "succeeded"))]
        a.write_rows(rows)
        assert {r.key: (r.status, r.data) for r in b.stored_rows("b")} == {
            "k0": ("succeeded", {"x": 3}),
            "k1": ("succeeded", {"x": 5}),
        }
        assert [r.data for r in b.stored_rows("c")] == [{"x": 9}]
        assert _rows_per_key(path) == [("b", "k0", 1), ("b", "k1", 1), ("c", "k0", 1)]
        b.delete_batch("b")
        a.write_row("b", 0, None, "succeeded", {"x": 7}, key="k0")
        assert [r.data for r in a.stored_rows("b")] == [{"x": 7}]
    assert _rows_per_key(path) == [("b", "k0", 1), ("c", "k0", 1)]


def test_after_another_connections_write_only_the_rows_it_added_are_read(tmp_path, monkeypatch):
    # A batch's claim rewrites its heartbeat every 10 s from its own connection: reading every stored key
    # of a large batch again each time would cost more than the rows; only what was added is read.
    from nbflow._store.batch_store import BatchStore

    full_reads: list[str] = []
    real = BatchStore._read_keys

    def counting(cur, batch_id):
        full_reads.append(batch_id)
        return real(cur, batch_id)

    monkeypatch.setattr(BatchStore, "_read_keys", staticmethod(counting))
    path = tmp_path / "s.db"
    with nf.BatchStore(path) as a, nf.BatchStore(path) as b:
        a.begin_batch("b", "flow", 3, ["x"])
        a.write_rows([a.prepare_row("b", i, None, "succeeded", {"x": i}, key=f"k{i}") for i in range(50)])
        assert full_reads == ["b"]
        with closing(sqlite3.connect(path)) as other:  # an unrelated change (as a heartbeat is)
            other.execute("UPDATE batches SET n_rows = 51")
            other.commit()
        a.write_row("b", 50, None, "succeeded", {"x": 50}, key="k50")
        b.write_row("b", 7, None, "failed", {"x": -7}, key="k7")  # b reads the batch once (its first write)
        b.write_row("b", 51, None, "succeeded", {"x": 51}, key="k51")
        assert full_reads == ["b", "b"]
        a.write_row("b", 51, None, "succeeded", {"x": 510}, key="k51")  # a learns k51 from the rows b added
        a.write_row("b", 7, None, "succeeded", {"x": 70}, key="k7")  # b replaced k7: found among them
        assert full_reads == ["b", "b"]
        rows = {r.key: r.data["x"] for r in a.stored_rows("b")}
        assert len(rows) == 52 and rows["k51"] == 510 and rows["k7"] == 70
        assert {n for _, _, n in _rows_per_key(path)} == {1}
        b.delete_batch("b")  # a's newest known row is gone: a reads the batch again
        a.write_row("b", 0, None, "succeeded", {"x": 0}, key="k0")
        assert full_reads == ["b", "b", "b"]
    assert _rows_per_key(path) == [("b", "k0", 1)]
    with closing(sqlite3.connect(path)) as con:
        assert con.execute("SELECT COUNT(*) FROM batch_rows").fetchone()[0] == 1


def test_one_row_per_key_in_a_group_of_many_batches(tmp_path):
    # A store object remembers the stored keys of a few batches only; a group spanning more still replaces.
    path = tmp_path / "s.db"
    with nf.BatchStore(path) as store:
        for round_ in range(3):
            store.write_rows(
                [store.prepare_row(f"b{n}", 0, None, "failed", {"try": round_}, key="k") for n in range(7)]
            )
            store.write_row("b0", 0, None, "succeeded", {"try": round_}, key="k")
        assert [r.data for r in store.stored_rows("b0")] == [{"try": 2}]
        assert [r.data for r in store.stored_rows("b6")] == [{"try": 2}]
    assert _rows_per_key(path) == [(f"b{n}", "k", 1) for n in range(7)]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("OPENAI_API_KEY", True),
        ("apiKey", True),
        ("auth_token", True),
        ("password", True),
        ("db_secret", True),
        ("HF_TOKEN", True),
        ("hfToken", True),
        ("hf-token", True),
        ("GITHUB_TOKEN", True),
        ("DB_PASSWORD", True),
        ("PASSWORD", True),
        ("SECRET", True),
        ("AUTH", True),
        ("CLIENT_SECRET", True),
        ("db_pwd", True),
        ("session_cookie", True),
        ("max_tokens", False),
        ("author", False),
        ("tokenizer", False),
        ("question", False),
    ],
)
def test_secret_looking_names(name, secret):
    from nbflow._core.secrets import is_secret_name

    assert is_secret_name(name) is secret


def test_a_corrupt_file_is_a_clear_store_error_and_is_left_untouched(tmp_path):
    bad = tmp_path / "corrupt.db"
    bad.write_bytes(b"definitely not sqlite " * 200)
    before = bad.read_bytes()
    with pytest.raises(nf.StoreError, match="not a readable nbflow store"):
        nf.BatchStore(bad)
    assert bad.read_bytes() == before


_UPPER_AND_OTHER_CASES = ["HF_TOKEN", "hfToken", "hf-token", "DB_PASSWORD", "CLIENT_SECRET", "db_pwd", "session_cookie"]


def test_one_secret_rule_for_batch_stores_and_checkpoints(tmp_path):
    """Every case style of a secret name stays out of both stores' files (the widget masks the same names)."""
    from nbflow.widgets.redact import mask_mapping

    values = {name: f"VALUE-{i}-a8f3" for i, name in enumerate(_UPPER_AND_OTHER_CASES)}
    assert set(mask_mapping(values).values()) == {"••••••"}

    flow = nf.Flow("secret_cases")
    idents = [n for n in values if n.isidentifier()]  # "hf-token" travels as a plain batch column
    ns: dict = {}
    exec(f"def use(q: str, {', '.join(f'{n}: str' for n in idents)}) -> str:\n    return q.upper()", ns)
    flow.node(ns["use"])
    row = {"q": "a", **values}
    db = tmp_path / "batch.db"
    df = flow.batch([row], store=db)
    assert df.loc[0, "status"] == "succeeded"
    ckpt = tmp_path / "runs.db"
    run = flow.run(q="a", store=ckpt, **{n: values[n] for n in idents})
    assert run.status == nf.RunStatus.SUCCEEDED
    for path in (db, ckpt):
        data = path.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob(path.name + "-*"))
        leaked = [v for v in values.values() if v.encode() in data]
        assert leaked == [], f"{path.name} holds {leaked}"
