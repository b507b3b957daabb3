"""SQLite persistence (stdlib ``sqlite3``): finished batch rows, written as they finish.

One file, WAL journal, one transaction per finished row, so a process killed mid-batch loses at
most the rows that were in flight. The same file can hold run checkpoints (``checkpoint.py``):
the tables do not overlap and both record their schema version in ``nbflow_meta``.

Schema (version 1; the file may also hold run checkpoints, see ``nbflow/_store/checkpoint.py``)::

    nbflow_meta(key TEXT PK, value TEXT)               key 'batch_schema' -> '1' (shared with checkpoints)
    batches(batch_id TEXT PK, flow TEXT, created_at REAL, n_rows INTEGER, columns TEXT)
    batch_rows(batch_id TEXT, row_index INTEGER, run_id TEXT, status TEXT, finished_at REAL,
               data TEXT,  PK(batch_id, row_index))

``data`` is a JSON object, column -> value. Values JSON keeps exactly (str, int, float, bool,
None, and lists / str-keyed dicts of those) are stored as JSON; anything else (tuples, pydantic
models, dataclasses, numpy values...) is pickled and stored as ``{"__nbflow_pickle__": base64}``.

Security: unpickling runs code chosen by whoever wrote the file. Only open stores you wrote
yourself; ``load(..., unpickle=False)`` leaves pickled values as an opaque marker.
"""

from __future__ import annotations

import base64
import json
import math
import os
import pickle
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import StoreError
from nbflow._core.secrets import Redactor, Secret
from nbflow._store.checkpoint import ensure_schema, write_whole_run
from nbflow._store.pickling import dumps, loads
from nbflow._store.sqlite import Transaction, open_db, store_error

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._record.run import Run

__all__ = ["SCHEMA_VERSION", "BatchStore", "StoredRow"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nbflow_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    batch_id   TEXT PRIMARY KEY,
    flow       TEXT NOT NULL,
    created_at REAL NOT NULL,
    n_rows     INTEGER NOT NULL,
    columns    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_rows (
    batch_id    TEXT NOT NULL REFERENCES batches(batch_id),
    row_index   INTEGER NOT NULL,
    run_id      TEXT,
    status      TEXT NOT NULL,
    finished_at REAL NOT NULL,
    data        TEXT NOT NULL,
    PRIMARY KEY (batch_id, row_index)
);
"""

_PICKLED = "__nbflow_pickle__"
_REDACTED = "__nbflow_redacted__"


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A finished row as read back from the store."""

    index: int
    run_id: str | None
    status: str
    finished_at: float
    data: dict[str, Any]


class BatchStore:
    """An nbflow SQLite store at ``path`` (created if needed). Use as a context manager or ``close()``.

    The connection may be used from the thread that runs the batch (``check_same_thread=False``);
    nbflow itself only writes from one thread at a time.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.unreadable: dict[int, str] = {}  # row index -> why, from the last rows(skip_unreadable=True)
        self._runs_ready = False  # the checkpoint tables exist (created with the first run written)
        self._db = open_db(self.path, timeout=5.0)
        try:
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM nbflow_meta WHERE key = 'batch_schema'").fetchone()
        except sqlite3.Error as exc:
            self._db.close()
            raise store_error(exc, self.path, 5.0) from None
        if row is None:
            self._db.execute("INSERT INTO nbflow_meta(key, value) VALUES ('batch_schema', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path!r} has batch schema version {row[0]}, this nbflow reads version {SCHEMA_VERSION}; "
                f"use a matching nbflow version or a new store file"
            )

    # --- batches -----------------------------------------------------------------------------------
    def batch_info(self, batch_id: str) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT flow, created_at, n_rows, columns FROM batches WHERE batch_id = ?", (batch_id,)
        ).fetchone()
        if row is None:
            return None
        return {"flow": row[0], "created_at": row[1], "n_rows": row[2], "columns": json.loads(row[3])}

    def begin_batch(self, batch_id: str, flow: str, n_rows: int, columns: Iterable[str]) -> None:
        """Record the batch (idempotent for the same batch)."""
        self._db.execute(
            "INSERT OR IGNORE INTO batches(batch_id, flow, created_at, n_rows, columns) VALUES (?, ?, ?, ?, ?)",
            (batch_id, flow, time.time(), n_rows, json.dumps(list(columns))),
        )

    def delete_batch(self, batch_id: str) -> None:
        """Forget the batch and its rows."""
        with self._transaction():
            self._db.execute("DELETE FROM batch_rows WHERE batch_id = ?", (batch_id,))
            self._db.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))

    def batches(self) -> list[dict[str, Any]]:
        """Every batch in the store with its number of finished rows."""
        rows = self._db.execute(
            "SELECT b.batch_id, b.flow, b.created_at, b.n_rows, "
            "(SELECT COUNT(*) FROM batch_rows r WHERE r.batch_id = b.batch_id) "
            "FROM batches b ORDER BY b.created_at"
        ).fetchall()
        return [{"batch_id": r[0], "flow": r[1], "created_at": r[2], "n_rows": r[3], "finished": r[4]} for r in rows]

    # --- rows --------------------------------------------------------------------------------------
    def write_row(
        self,
        batch_id: str,
        index: int,
        run_id: str | None,
        status: str,
        data: Mapping[str, Any],
        *,
        secret_columns: Iterable[str] = (),
        secrets: Iterable[str] = (),
        run: Run | None = None,
    ) -> None:
        """Write one finished row in its own transaction (replacing an earlier try of the same row).

        ``secrets``: the texts of the row's secret values; they are redacted wherever they appear
        (an output built from a key, an error message, a traceback). With ``run``, its whole record goes
        in the same transaction (``nf.load_run(path, run_id)`` reads it).
        """
        secret = set(secret_columns)
        red = Redactor(secrets)
        encoded = {k: ({_REDACTED: True} if k in secret else _encode(red.scrub(v), red)) for k, v in data.items()}
        text = json.dumps(encoded, allow_nan=True)
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO batch_rows(batch_id, row_index, run_id, status, finished_at, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (batch_id, index, run_id, status, time.time(), text),
            )
            if run is not None:
                if not self._runs_ready:
                    ensure_schema(self._db, self.path)
                    self._runs_ready = True
                write_whole_run(self._db, run)

    def rows(self, batch_id: str, *, unpickle: bool = True, skip_unreadable: bool = False) -> dict[int, StoredRow]:
        """The finished rows of a batch, by row index. Pickled values are decoded only if ``unpickle``.

        A row that cannot be decoded (e.g. a pickled object whose class no longer exists) raises
        StoreError, or is left out with ``skip_unreadable=True`` (its index is in ``self.unreadable``).
        """
        out: dict[int, StoredRow] = {}
        self.unreadable = {}
        for index, run_id, status, finished_at, text in self._db.execute(
            "SELECT row_index, run_id, status, finished_at, data FROM batch_rows WHERE batch_id = ? ORDER BY row_index",
            (batch_id,),
        ):
            try:
                raw = json.loads(text)
                data = {k: _decode(v, unpickle) for k, v in raw.items()}
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
                if not skip_unreadable:
                    raise StoreError(
                        f"store {self.path!r}, batch {batch_id!r}, row {index}: cannot decode the stored row ({why}); "
                        f"define the classes its outputs use before loading, or pass unpickle=False"
                    ) from exc
                self.unreadable[index] = why
                continue
            out[index] = StoredRow(index, run_id, status, finished_at, data)
        return out

    def load(self, batch_id: str, *, unpickle: bool = True) -> pd.DataFrame:
        """The finished rows of a batch as a DataFrame (index: row index; secret columns hold a marker)."""
        import pandas as pd

        info = self.batch_info(batch_id)
        if info is None:
            known = ", ".join(repr(b["batch_id"]) for b in self.batches()) or "(none)"
            raise StoreError(f"store {self.path!r} has no batch {batch_id!r}; batches: {known}")
        rows = self.rows(batch_id, unpickle=unpickle)
        frame = pd.DataFrame([r.data for r in rows.values()], index=list(rows), columns=info["columns"])
        frame.index.name = "row"
        return frame

    # --- plumbing ----------------------------------------------------------------------------------
    def _transaction(self) -> Transaction:
        return Transaction(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> BatchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<nbflow BatchStore {self.path!r}>"


def _json_exact(value: Any) -> bool:
    """True if JSON gives ``value`` back with the same types (tuples, int keys, objects do not)."""
    t = type(value)
    if value is None or t in (str, int, bool):
        return True
    if t is float:
        return True  # NaN and infinities round-trip through Python's json (allow_nan)
    if t is list:
        return all(_json_exact(v) for v in value)
    if t is dict:
        return all(type(k) is str and k not in (_PICKLED, _REDACTED) and _json_exact(v) for k, v in value.items())
    return False


def _encode(value: Any, red: Redactor | None = None) -> Any:
    if _json_exact(value):
        return value
    if _is_secret_value(value):
        return {_REDACTED: True}
    if red:  # an object holding a secret's text (an attribute, an exception): the store pickler redacts it
        return {_PICKLED: base64.b64encode(dumps(value, red)).decode("ascii")}
    return {_PICKLED: base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")}


def _decode(value: Any, unpickle: bool) -> Any:
    if type(value) is dict and len(value) == 1:
        if _PICKLED in value:
            if not unpickle:
                return {_PICKLED: "(not unpickled)"}
            return loads(base64.b64decode(value[_PICKLED]))
        if _REDACTED in value:
            return "<redacted: secret not stored>"
    if type(value) is float and math.isnan(value):
        return float("nan")
    return value


def _is_secret_value(value: Any) -> bool:
    # nf.Secret, and pydantic's SecretStr/SecretBytes, mark a value as a secret: never write it.
    if isinstance(value, Secret):
        return True
    return type(value).__name__ in ("SecretStr", "SecretBytes") and type(value).__module__.startswith("pydantic")
