"""SQLite persistence (stdlib ``sqlite3``): finished batch rows, written as they finish.

One file, WAL journal; every finished row is committed (with its run record when the batch keeps it)
before its worker takes another row, the rows that finish together in one transaction (``write_rows``,
group commit), so a process killed mid-batch loses at most the rows that were in flight. The same file can hold run checkpoints (``checkpoint.py``):
the tables do not overlap and both record their schema version in ``nbflow_meta``.

Schema (version 4; the file may also hold run checkpoints, see ``nbflow/_store/checkpoint.py``)::

    nbflow_meta(key TEXT PK, value TEXT)               key 'batch_schema' -> '4' (shared with checkpoints)
    batches(batch_id TEXT PK, flow TEXT, created_at REAL, n_rows INTEGER, columns TEXT, meta TEXT)
    batch_rows(batch_id TEXT, case_key TEXT, row_index INTEGER, run_id TEXT, status TEXT,
               finished_at REAL, fingerprint TEXT, data TEXT, lineage TEXT)     INDEX batch_rows_batch(batch_id)
    flow_fingerprints(fingerprint TEXT PK, nodes TEXT)   node -> fingerprint (JSON), shared by rows

The runs a batch keeps are checkpoint runs of the same file, their large values stored once, shared by
every row and batch (``values.py``); ``delete_batch`` takes a batch's runs with it and ``gc()`` then
deletes the values no run refers to any more.

One row per (batch_id, case_key): version 2 had that as the table's primary key, so every row went into
a second b-tree at a place its hash chose (most of a row's SQLite cost, growing with the batch: 4.9 µs
a row at 3,000 rows, 7.1 at 20,000). Version 3 appends rows (their rowid) and indexes the batch alone;
``write_rows`` keeps the one-row-per-key rule itself, knowing each stored key's rowid (read once per
batch; after another connection changed the file, ``PRAGMA data_version``, the rows it added are read).

A row is found by ``case_key``, a digest of its content (row values + grid combination + repeat),
never by its position; ``fingerprint`` names the flow's per-node fingerprints it was computed with,
so a resume re-runs exactly the rows that depend on an edited node; ``lineage`` (added to version 3 files on
open) each node's output data version and inputs, defaults included, for every row (a kept run's record has no
lineage of its own: loaded, it reads its row's; ``checkpoint.stored_row_lineage``, ``df.nbflow.lineage(i)``;
rows written before that left it to their kept run's record). ``meta`` is the experiment
record (name, notes, grid, counts, summary...). Version 1 and 2 files are migrated in place when
opened writable (a read-only version 2 copy is read as it is: same columns); version 1 rows keep a
``row:<index>`` key and no fingerprint (a resume re-keys them from their values).

Version 4: a cell JSON does not hold (a frame passed to every row, an array...) whose encoding is not small is
stored once in ``nbflow_values`` (``values.py``), referenced by its batch, and the row holds ``{"__nbflow_value__":
key}``: 24 rows sharing one input frame hold it once, as do their kept runs. Version 3 files are migrated by
their version number alone (their rows are read as they are).

``data`` is a JSON object, column -> value. Values JSON keeps exactly (str, int, float, bool,
None, and lists / str-keyed dicts of those) are stored as JSON; plain data JSON cannot hold (tuples,
DataFrames, numpy arrays, pydantic models, datetimes, Decimal, bytes, sets...) as
``{"__nbflow_plain__": tagged JSON}`` (``plain.py``: reading it runs no code); anything else
(dataclasses, arbitrary objects) is pickled, tagged with the writer's store key, and stored as
``{"__nbflow_signed__": base64}``.

Security: unpickling runs code chosen by whoever wrote the file, so a pickle without a valid tag of
your key is refused (``UntrustedData``) unless ``allow_pickle=True``; ``load(..., unpickle=False)``
leaves pickled values as an opaque marker.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial
from operator import countOf
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from nbflow._core.errors import StoreError
from nbflow._core.records import record
from nbflow._core.secrets import Redactor, Secret, gate, json_holds_no_secret, redactor
from nbflow._store.checkpoint import ensure_schema, stored_row_lineage, write_whole_runs
from nbflow._store.pickling import (
    _ORJSON,
    NOT_OPENED,
    UntrustedData,
    dumps,
    json_exact,
    json_text,
    load_orjson,
    loads,
    peek,
    pickled,
    sign_pickle,
)
from nbflow._store.sqlite import FileIdentity, Transaction, garbled, open_db, schema_version, store_error
from nbflow._store.values import MIN_SHARED, REF, Collected, Shared, Values, batch_owner, collect, read_from, stored_key

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._record.run import Run

T = TypeVar("T")

__all__ = [
    "LEGACY_KEY",
    "SCHEMA_VERSION",
    "BatchStore",
    "KeptOutputs",
    "NoBatchYet",
    "PreparedRow",
    "StoredRow",
    "UnstorableValue",
    "holds_redaction",
]

SCHEMA_VERSION = 4
LEGACY_KEY = "row:"  # case_key prefix of rows migrated from version 1 (no content key yet)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nbflow_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    batch_id   TEXT PRIMARY KEY,
    flow       TEXT NOT NULL,
    created_at REAL NOT NULL,
    n_rows     INTEGER NOT NULL,
    columns    TEXT NOT NULL,
    meta       TEXT
);
CREATE TABLE IF NOT EXISTS batch_rows (
    batch_id    TEXT NOT NULL REFERENCES batches(batch_id),
    case_key    TEXT NOT NULL,
    row_index   INTEGER NOT NULL,
    run_id      TEXT,
    status      TEXT NOT NULL,
    finished_at REAL NOT NULL,
    fingerprint TEXT,
    data        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS batch_rows_batch ON batch_rows(batch_id);
CREATE TABLE IF NOT EXISTS flow_fingerprints (fingerprint TEXT PRIMARY KEY, nodes TEXT NOT NULL);
"""

# Version 1 -> 2: rows keyed by content (old rows get "row:<index>"), per-node fingerprints, experiment meta.
_MIGRATE_1 = """
ALTER TABLE batches ADD COLUMN meta TEXT;
ALTER TABLE batch_rows RENAME TO batch_rows_v1;
CREATE TABLE batch_rows (
    batch_id    TEXT NOT NULL REFERENCES batches(batch_id),
    case_key    TEXT NOT NULL,
    row_index   INTEGER NOT NULL,
    run_id      TEXT,
    status      TEXT NOT NULL,
    finished_at REAL NOT NULL,
    fingerprint TEXT,
    data        TEXT NOT NULL,
    PRIMARY KEY (batch_id, case_key)
);
INSERT INTO batch_rows SELECT batch_id, 'row:' || row_index, row_index, run_id, status, finished_at, NULL, data
    FROM batch_rows_v1;
DROP TABLE batch_rows_v1;
CREATE TABLE IF NOT EXISTS flow_fingerprints (fingerprint TEXT PRIMARY KEY, nodes TEXT NOT NULL);
UPDATE nbflow_meta SET value = '2' WHERE key = 'batch_schema';
"""

# Version 2 -> 3: the same rows, appended by rowid; one index on the batch instead of the (batch_id, case_key) key.
_MIGRATE_2 = """
ALTER TABLE batch_rows RENAME TO batch_rows_v2;
CREATE TABLE batch_rows (
    batch_id    TEXT NOT NULL REFERENCES batches(batch_id),
    case_key    TEXT NOT NULL,
    row_index   INTEGER NOT NULL,
    run_id      TEXT,
    status      TEXT NOT NULL,
    finished_at REAL NOT NULL,
    fingerprint TEXT,
    data        TEXT NOT NULL
);
INSERT INTO batch_rows(batch_id, case_key, row_index, run_id, status, finished_at, fingerprint, data)
    SELECT batch_id, case_key, row_index, run_id, status, finished_at, fingerprint, data FROM batch_rows_v2
    ORDER BY batch_id, row_index;
DROP TABLE batch_rows_v2;
CREATE INDEX IF NOT EXISTS batch_rows_batch ON batch_rows(batch_id);
UPDATE nbflow_meta SET value = '3' WHERE key = 'batch_schema';
"""

# Version 3 -> 4: the same tables; a row's large cell may be a reference to a value stored once ({_VALUE: key}),
# which an older nbflow would misread as a dict: it refuses a version 4 file.
_MIGRATE_3 = f"UPDATE nbflow_meta SET value = '{SCHEMA_VERSION}' WHERE key = 'batch_schema';"
_MIGRATIONS = {"1": (_MIGRATE_1, _MIGRATE_2, _MIGRATE_3), "2": (_MIGRATE_2, _MIGRATE_3), "3": (_MIGRATE_3,)}
_READ_AS_IS = ("2", "3")  # versions a read-only copy is read as it is (their columns are this version's)

_ROW_SQL = (
    "INSERT INTO batch_rows(rowid, batch_id, case_key, row_index, run_id, status, finished_at, "
    "fingerprint, data, lineage) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Columns added after version 3 was released (files without them get them on open; older readers ignore them):
# lineage: the row's lineage (``nbflow._record.lineage.compact``: per node its output's data version and its
# inputs, defaults included), also for a row whose run is kept (that run's record then has none: it reads the row's).
_ROW_COLUMNS = {"lineage": "TEXT"}
_DELETE_SQL = "DELETE FROM batch_rows WHERE rowid = ? AND batch_id = ? AND case_key = ?"
_KEYS_KEPT = 4  # batches whose stored keys a store object remembers (read again when needed)


class PreparedRow(NamedTuple):
    """A finished row encoded for ``BatchStore.write_rows`` (with the run record to write beside it, if any).

    (A named tuple: made once per stored row, ~0.1 µs where a frozen dataclass took ~0.6.)"""

    args: tuple[Any, ...]
    run: Run | None = None
    cells: tuple[tuple[str, Any, bytes | None], ...] | None = None
    """The row's values stored once (``values.py``): (key, value, its bytes if just encoded), written with it."""


_PICKLED = "__nbflow_pickle__"  # nbflow 0.1: an unsigned pickle (opened only with allow_pickle=True)
_SIGNED = "__nbflow_signed__"  # a pickle tagged with the writer's store key (nbflow/_store/trust.py)
_REDACTED = "__nbflow_redacted__"
_PLAIN = "__nbflow_plain__"  # code-free tagged JSON (nbflow/_store/plain.py): no code runs on load
_VALUE = "__nbflow_value__"  # a large cell stored once (schema 4): {_VALUE: its key in nbflow_values}


class NoBatchYet(StoreError):
    """A store opened ``read_only`` holds no batch yet: an empty file, or one a batch is still creating (its tables
    are made one after another; the viewer waits for them)."""


class UnstorableValue(StoreError):
    """A row's value (``column``) the store cannot write; the batch fails that row and goes on."""

    def __init__(self, column: str, why: str) -> None:
        self.column = column
        super().__init__(f"the value of {column!r} cannot be stored ({why})")


class KeptOutputs(NamedTuple):
    """A stored run's nodes as ``BatchStore.kept_outputs`` reads them back: status by node, usable outputs by node."""

    statuses: dict[str, str]
    outputs: dict[str, Any]
    redacted: frozenset[str] = frozenset()
    """Succeeded nodes whose stored output holds a redaction (left out of ``outputs``)."""


def holds_redaction(value: Any) -> bool:
    """Does a value read back from a store hold a redaction (``REDACTED``, ``[REDACTED]``, ``<redacted: ...>``)?

    Judged on its pickle, so text inside any object counts; a value that cannot be pickled counts as holding one
    (it cannot be checked). A value that merely contains the word ``REDACTED`` counts too: re-running its node
    costs a call, feeding a scrubbed value would give a silently wrong result."""
    import pickle

    if type(value) in _AS_IS:
        return isinstance(value, str) and ("REDACTED" in value or "<redacted" in value)
    try:
        data = pickle.dumps(value, protocol=5)
    except Exception:
        return True
    return b"REDACTED" in data or b"<redacted" in data


@record(frozen=True)
class StoredRow:
    """A finished row as read back from the store."""

    index: int
    run_id: str | None
    status: str
    finished_at: float
    data: dict[str, Any]
    key: str = ""
    """The row's content key (``row:<index>`` for a row stored by nbflow < 0.2, before keys)."""
    fingerprints: dict[str, str | None] | None = None
    """Each node's fingerprint when the row ran (None: not recorded, a row of an older store)."""


class BatchStore:
    """An nbflow SQLite store at ``path`` (created if needed). Use as a context manager or ``close()``.

    The connection may be used from the thread that runs the batch (``check_same_thread=False``);
    nbflow itself only writes from one thread at a time.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 5.0,
        lock_wait: float = 30.0,
        allow_pickle: bool = False,
        read_only: bool = False,
    ) -> None:
        """``timeout``: SQLite's wait for a lock per try; ``lock_wait``: how long a row write keeps
        retrying a locked file in all before it fails (the batch then stops, see docs/batch.md).
        ``allow_pickle=True``: unpickle values that carry no valid tag of your store key (a file
        someone else wrote, or nbflow 0.1's) - only for a file you trust. ``read_only=True``: the file is
        opened ``mode=ro`` (SQLite refuses every write; what another process writes meanwhile is read)."""
        self.path = os.fspath(path)
        self.allow_pickle = allow_pickle
        self.timeout = timeout
        self.lock_wait = lock_wait
        self.unreadable: dict[int, str] = {}  # row index -> why, from the last rows(skip_unreadable=True)
        self._runs_ready = False  # the checkpoint tables exist (created with the first run written)
        self._fingerprints: dict[str, dict[str, str | None]] = {}  # fingerprint -> nodes, read back once
        self._cursor: sqlite3.Cursor | None = None  # the row writes' plain cursor (``_write_cursor``)
        # One row per (batch_id, case_key), kept by write_rows: batch_id -> {stored key: its rowid}, read on a
        # batch's first write; once another connection changed the file (``_seen``: data_version; a claim's
        # heartbeat does, every 10 s) the rows it added to the batch are read (``_refresh``), not every key.
        self._keys: dict[str, dict[str, int]] = {}
        self._top: dict[str, int] = {}  # batch_id -> the highest rowid in its ``_keys``
        self._stale: set[str] = set()  # batches to refresh before their next write
        self._seen: int | None = None
        self._last = 0  # the highest rowid this connection wrote (valid while ``_seen`` is: no other writer since)
        self._cell_sizes: dict[str, int] = {}  # key -> encoded bytes of the cells met (``_share_cell``)
        self._db = open_db(self.path, timeout=timeout, read_only=read_only)
        if read_only:
            self._check_read_only()
            self.identity = FileIdentity(self.path)
            return
        try:
            self._db.execute("CREATE TABLE IF NOT EXISTS nbflow_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = self._db.execute("SELECT value FROM nbflow_meta WHERE key = 'batch_schema'").fetchone()
            if row is not None and row[0] in _READ_AS_IS and getattr(self._db, "read_only", False):
                pass  # a read-only copy is read as it is (nothing can be migrated): its columns are version 4's
            elif row is not None and row[0] in _MIGRATIONS:
                with self._transaction():  # all or nothing: a failed migration leaves the file as it was
                    for script in _MIGRATIONS[row[0]]:
                        for statement in script.split(";"):
                            if statement.strip():
                                self._db.execute(statement)
                row = (str(SCHEMA_VERSION),)
            if row is None or row[0] == str(SCHEMA_VERSION):
                self._db.executescript(_SCHEMA)
                _add_columns(self._db)
        except sqlite3.Error as exc:
            self._db.close()
            raise store_error(exc, self.path, 5.0) from None
        if row is None:
            self._db.execute("INSERT INTO nbflow_meta(key, value) VALUES ('batch_schema', ?)", (str(SCHEMA_VERSION),))
        elif row[0] in _READ_AS_IS and getattr(self._db, "read_only", False):
            pass
        elif schema_version(self.path, "batch_schema", row[0]) != SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path!r} has batch schema version {row[0]}, this nbflow reads version {SCHEMA_VERSION}; "
                f"use a matching nbflow version or a new store file"
            )
        self.identity = FileIdentity(self.path)

    def _check_read_only(self) -> None:
        """A store opened ``read_only``: its version must be one this nbflow reads as it is (nothing migrates)."""
        try:
            found = self._db.execute("SELECT value FROM nbflow_meta WHERE key = 'batch_schema'").fetchone()
        except sqlite3.Error as exc:
            self._db.close()
            if "no such table" in str(exc):
                raise NoBatchYet(f"{self.path!r} holds no nbflow batches (no batch written to it yet)") from None
            raise store_error(exc, self.path, self.timeout) from None
        if found is None:  # (a batch creating the file writes its schema's version last)
            self._db.close()
            raise NoBatchYet(f"{self.path!r} holds no nbflow batches (no batch written to it yet)")
        if found[0] not in (*_READ_AS_IS, str(SCHEMA_VERSION)):
            self._db.close()
            raise StoreError(
                f"store {self.path!r} has batch schema version {found[0]}; this nbflow reads "
                f"versions {', '.join(_READ_AS_IS)} and {SCHEMA_VERSION} read-only (open it once writable to migrate it)"
            )

    # --- batches -----------------------------------------------------------------------------------
    def batch_info(self, batch_id: str) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT flow, created_at, n_rows, columns, meta FROM batches WHERE batch_id = ?", (batch_id,)
        ).fetchone()
        if row is None:
            return None
        try:
            meta = json.loads(row[4]) if row[4] else {}
            columns = json.loads(row[3])
            if not isinstance(meta, dict) or not isinstance(columns, list):
                raise TypeError(f"meta {type(meta).__name__}, columns {type(columns).__name__}")
        except (ValueError, TypeError) as exc:
            raise garbled(self.path, f"the record of batch {batch_id!r}", exc) from None
        return {"flow": row[0], "created_at": row[1], "n_rows": row[2], "columns": columns, "meta": meta}

    def begin_batch(
        self,
        batch_id: str,
        flow: str,
        n_rows: int,
        columns: Iterable[str],
        *,
        fingerprints: Mapping[str, str | None] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Record the batch (again: its rows, columns and meta are updated); returns the fingerprint id.

        ``fingerprints`` (node -> fingerprint) are kept once per distinct set; rows written with the
        returned id remember what code computed them.
        """
        self.identity.check()

        def write() -> str | None:
            fp = None
            if fingerprints is not None:
                nodes = json.dumps(dict(sorted(fingerprints.items())))
                fp = hashlib.sha256(nodes.encode()).hexdigest()[:24]
                self._db.execute(
                    "INSERT OR IGNORE INTO flow_fingerprints(fingerprint, nodes) VALUES (?, ?)", (fp, nodes)
                )
            old = self.batch_info(batch_id)
            merged = {**(old["meta"] if old else {}), **(meta or {})}
            text = _meta_text(merged) if merged else None
            if old is None:
                self._db.execute(
                    "INSERT INTO batches(batch_id, flow, created_at, n_rows, columns, meta) VALUES (?, ?, ?, ?, ?, ?)",
                    (batch_id, flow, time.time(), n_rows, json.dumps(list(columns)), text),
                )
            else:
                self._db.execute(
                    "UPDATE batches SET n_rows = ?, columns = ?, meta = ? WHERE batch_id = ?",
                    (n_rows, json.dumps(list(columns)), text, batch_id),
                )
            return fp

        return self._retry_tx(write)

    def update_meta(self, batch_id: str, meta: Mapping[str, Any], columns: Iterable[str] | None = None) -> None:
        """Merge ``meta`` into the batch's experiment record (and replace its columns, if given)."""
        with self._transaction():
            old = self.batch_info(batch_id)
            if old is None:
                raise StoreError(f"store {self.path!r} has no batch {batch_id!r}")
            text = _meta_text({**old["meta"], **meta})
            cols = json.dumps(list(columns)) if columns is not None else json.dumps(old["columns"])
            self._db.execute("UPDATE batches SET meta = ?, columns = ? WHERE batch_id = ?", (text, cols, batch_id))

    def fingerprints(self, fingerprint: str | None) -> dict[str, str | None] | None:
        """The per-node fingerprints stored under ``fingerprint`` (None if unknown)."""
        if fingerprint is None:
            return None
        found = self._fingerprints.get(fingerprint)
        if found is None:
            row = self._db.execute(
                "SELECT nodes FROM flow_fingerprints WHERE fingerprint = ?", (fingerprint,)
            ).fetchone()
            if row is None:
                return None
            found = self._fingerprints[fingerprint] = json.loads(row[0])
        return found

    def delete_batch(self, batch_id: str) -> None:
        """Forget the batch, its rows and the runs its rows kept (``gc()`` then frees the values only they held)."""
        self._forget(batch_id)
        with self._transaction():
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            # (a run another batch's row also names stays)
            runs = (
                "SELECT run_id FROM batch_rows WHERE batch_id = ? AND run_id IS NOT NULL AND run_id NOT IN "
                "(SELECT run_id FROM batch_rows WHERE batch_id != ? AND run_id IS NOT NULL)"
            )
            for table in ("checkpoint_nodes", "checkpoint_questions", "nbflow_value_refs", "checkpoint_runs"):
                if table in tables:
                    self._db.execute(f"DELETE FROM {table} WHERE run_id IN ({runs})", (batch_id, batch_id))
            if "nbflow_value_refs" in tables:  # the values its rows' cells refer to
                self._db.execute("DELETE FROM nbflow_value_refs WHERE run_id = ?", (batch_owner(batch_id),))
            self._db.execute("DELETE FROM batch_rows WHERE batch_id = ?", (batch_id,))
            self._db.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))

    def values(self) -> pd.DataFrame:
        """The values stored once (``nbflow/_store/values.py``): ``key`` (its data version), ``bytes`` (as
        stored) and ``runs`` (how many stored runs, and batches whose rows hold it, refer to it; 0: ``gc()``
        deletes it), largest first."""
        import pandas as pd

        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = []
        if "nbflow_values" in tables:
            rows = self._db.execute(
                "SELECT v.key, v.size, (SELECT count(*) FROM nbflow_value_refs r WHERE r.key = v.key) "
                "FROM nbflow_values v ORDER BY v.size DESC, v.key"
            ).fetchall()
        return pd.DataFrame(rows, columns=["key", "bytes", "runs"])

    def gc(self, *, vacuum: bool = True) -> Collected:
        """Delete the stored values no run refers to any more (those of deleted batches and runs), then VACUUM
        the file (``vacuum=False``: leave its size as it is). Returns what was freed (``.freed``: bytes the
        file shrank by; ``.values``, ``.value_bytes``: the values deleted). The CLI's ``nbflow gc RUNS.db``.

        Safe while another process writes the store: a writer checks a value is there inside its own
        transaction. Raises StoreError if the file is locked for longer than ``timeout`` or read-only."""
        self.identity.check()
        try:
            return collect(self._db, self.path, vacuum=vacuum)
        except sqlite3.Error as exc:
            raise store_error(exc, self.path, self.timeout) from None

    def batches(self) -> list[dict[str, Any]]:
        """Every batch in the store with its number of finished rows."""
        rows = self._db.execute(
            "SELECT b.batch_id, b.flow, b.created_at, b.n_rows, "
            "(SELECT COUNT(*) FROM batch_rows r WHERE r.batch_id = b.batch_id) "
            "FROM batches b ORDER BY b.created_at"
        ).fetchall()
        return [{"batch_id": r[0], "flow": r[1], "created_at": r[2], "n_rows": r[3], "finished": r[4]} for r in rows]

    def status_counts(self, batch_id: str) -> dict[str, int]:
        """How many finished rows of a batch have each status, counted by SQLite (no row is read into Python: a
        running 100,000-row batch counts in milliseconds)."""
        return {
            str(status): int(n)
            for status, n in self._db.execute(
                "SELECT status, COUNT(*) FROM batch_rows WHERE batch_id = ? GROUP BY status", (batch_id,)
            )
        }

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
        key: str | None = None,
        fingerprint: str | None = None,
        lineage: str | None = None,
    ) -> None:
        """Write one finished row in its own transaction (replacing an earlier try of the same row).

        ``secrets``: the texts of the row's secret values; they are redacted wherever they appear
        (an output built from a key, an error message, a traceback). With ``run``, its whole record goes
        in the same transaction (``nf.load_run(path, run_id)`` reads it). ``key`` identifies the row by
        content (default ``row:<index>``, by position); ``fingerprint`` is the id ``begin_batch`` returned
        for the flow that computed it; ``lineage`` the row's (``nbflow._engine.lineage.row_lineage``).

        Raises UnstorableValue (nothing written) for a value that cannot be encoded, StoreError when
        the file cannot be written: locked for longer than ``lock_wait`` (retried until then), disk
        full, deleted or replaced.
        """
        row = self.prepare_row(
            batch_id,
            index,
            run_id,
            status,
            data,
            secret_columns=secret_columns,
            secrets=secrets,
            run=run,
            key=key,
            fingerprint=fingerprint,
            lineage=lineage,
        )
        self.write_rows([row])

    def prepare_row(
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
        key: str | None = None,
        fingerprint: str | None = None,
        lineage: str | None = None,
        own: Collection[str] = (),
    ) -> PreparedRow:
        """Encode a row as ``write_row`` would, writing nothing yet (``write_rows`` writes it).

        ``own``: the columns whose text nbflow wrote itself (a status, a node's name, an exception's type, an id):
        written as they are, never redacted, so a secret whose text is also such a word cannot garble the row.
        Raises UnstorableValue for a value that cannot be encoded.
        """
        if not secret_columns and not secrets:
            row = self.plain_row(batch_id, index, run_id, status, data, key, fingerprint, run, lineage)
            if row is not None:
                return row
        red = redactor(secrets)
        cells: list[tuple[str, Any, bytes | None]] = []
        # A large cell is stored once (``values.py``), unless the row has secrets of its own: then its cells are
        # written redacted in the row, as before (a digest of the value would vary with the secret).
        share = None if red is not None and red.has_own() else partial(self._share_cell, red)
        text = encode_row(data, secret_columns, red, share, cells, own)
        if lineage is not None and red is not None and red.found_in(lineage):
            lineage = _redacted_lineage(lineage, red)
        return _prepared(batch_id, index, run_id, status, text, key, fingerprint, run, lineage, tuple(cells) or None)

    def _share_cell(self, red: Redactor | None, value: Any) -> tuple[str, bytes | None] | None:
        """(key, its bytes if encoded now) for a cell stored once by reference, None for a cell kept in the row
        (small once encoded). Keyed like a node's output (``values.py``): by its data version, or by where it
        was read from; a key met before (``_cell_sizes``) is not encoded again."""
        from nbflow._engine.caching import data_version

        key = stored_key(value) or data_version(value)
        if key is not None:
            size = self._cell_sizes.get(key)
            if size is not None:
                return (key, None) if size >= MIN_SHARED else None
        data = dumps(value, red)
        if key is None:
            key = "b:" + hashlib.sha256(data).hexdigest()
        if len(self._cell_sizes) >= 4096:
            self._cell_sizes.clear()
        self._cell_sizes[key] = len(data)
        return (key, data) if len(data) >= MIN_SHARED else None

    @staticmethod
    def plain_row(
        batch_id: str,
        index: int,
        run_id: str | None,
        status: str,
        data: Mapping[str, Any],
        key: str | None = None,
        fingerprint: str | None = None,
        run: Run | None = None,
        lineage: str | None = None,
    ) -> PreparedRow | None:
        """``prepare_row`` of a row with no secret (no secret column, no secret text to redact) whose every cell
        is a plain scalar (the common row: its JSON is the row itself); None for any other row (``prepare_row``
        encodes it). The group commit's fast path: positional, no encoder call per cell."""
        if type(data) is not dict or not _AS_IS.issuperset(map(type, data.values())):
            return None
        text = _plain_json(data)
        if not json_holds_no_secret(text) or (lineage is not None and not json_holds_no_secret(lineage)):
            return None  # a secret known by value (the environment, an nf.Secret) is in it
        return _prepared(batch_id, index, run_id, status, text, key, fingerprint, run, lineage)

    def write_rows(self, rows: Iterable[PreparedRow]) -> set[str]:
        """Write prepared rows (and their run records) in ONE transaction: all of them are on disk, or none.

        Group commit (``flow.batch``): the rows that finished together share a transaction. Raises
        StoreError as ``write_row`` does. Returns the ids of the runs stored with a value left out
        (``write_whole_runs``).
        """
        self.identity.check()
        rows = list(rows)

        cur = self._write_cursor()
        added: dict[str, dict[str, int]] = {}  # batch_id -> {key: rowid} written, applied once committed
        left_out: set[str] = set()

        def write() -> None:
            # A plain cursor: errors are mapped once, by _retry_tx, not per statement (sqlite.StoreConnection).
            added.clear()
            replaced = []
            args: dict[int, tuple[Any, ...]] = {}  # rowid -> the row's values, in order
            keys = self._stored_keys(cur)
            rowid = self._last or cur.execute("SELECT max(rowid) FROM batch_rows").fetchone()[0] or 0
            last = None  # the batch of the row before (a group's rows are one batch's): its keys are at hand
            stored: dict[str, int] = {}
            new: dict[str, int] = {}
            for row in rows:
                a = row[0]
                batch_id, key = a[0], a[1]
                if batch_id != last:
                    last = batch_id
                    found = keys.get(batch_id)
                    if found is None:
                        if len(keys) >= _KEYS_KEPT:  # a long-lived store object: the keys of a few batches at most
                            keys.clear()
                            self._top.clear()
                            self._stale.clear()
                        found = self._load_keys(cur, batch_id)
                    elif batch_id in self._stale:
                        found = self._refresh(cur, batch_id, found)
                    stored = found
                    new = added.setdefault(batch_id, {})
                if key in new:  # the same row twice in one group: the later try wins
                    args[new[key]] = (new[key], *a)
                    continue
                old = stored.get(key)
                if old is not None:  # a later try of the row replaces the earlier one (one row per key)
                    replaced.append((old, batch_id, key))
                rowid += 1
                new[key] = rowid
                args[rowid] = (rowid, *a)
            if replaced:
                cur.executemany(_DELETE_SQL, replaced)
            cur.executemany(_ROW_SQL, args.values())
            runs = [row[1] for row in rows if row[1] is not None]
            shared = None
            if runs or any(row[2] for row in rows):
                if not self._runs_ready:  # (the values tables are the checkpoint schema's)
                    ensure_schema(self._db, self.path)
                    self._runs_ready = True
                shared = Shared(cur.connection)  # (not ``cur``: runs' values are looked up while it inserts)
                for row in rows:
                    if row[2]:
                        owner = batch_owner(row[0][0])
                        for key, value, data in row[2]:
                            shared.put(owner, key, value, data, _encode_cell)
            if runs:
                left_out.clear()  # (a retried transaction writes them again)
                left_out.update(write_whole_runs(cur, runs, shared))
            if shared is not None:
                shared.flush()

        self._retry_tx(write, cur)
        for batch_id, new in added.items():
            known = self._keys.get(batch_id)
            top = max(new.values())
            if known is not None:  # (else read again at its next write, with these rows)
                known.update(new)
                self._top[batch_id] = max(self._top.get(batch_id, 0), top)
            self._last = max(self._last, top)
        return left_out

    def _stored_keys(self, cur: sqlite3.Cursor) -> dict[str, dict[str, int]]:
        """The stored keys known per batch; marked for ``_refresh`` when another connection changed the file since."""
        version = cur.execute("PRAGMA data_version").fetchone()[0]
        if version != self._seen:
            self._stale.update(self._keys)
            self._last = 0
            self._seen = version
        return self._keys

    def _load_keys(self, cur: sqlite3.Cursor, batch_id: str) -> dict[str, int]:
        stored = self._keys[batch_id] = self._read_keys(cur, batch_id)
        self._top[batch_id] = max(stored.values(), default=0)
        self._stale.discard(batch_id)
        return stored

    def _refresh(self, cur: sqlite3.Cursor, batch_id: str, stored: dict[str, int]) -> dict[str, int]:
        """Bring a batch's known keys up to date after another connection wrote: the rows added since its newest
        known row (a rowid is never below the table's highest, which that row still is or was), or all of
        them again if that row is gone (the batch was deleted or that row replaced). A known row deleted
        otherwise leaves a stale rowid, harmless: deleting it again matches nothing."""
        self._stale.discard(batch_id)
        top = self._top.get(batch_id, 0)
        if top:
            found = cur.execute(
                "SELECT case_key FROM batch_rows WHERE rowid = ? AND batch_id = ?", (top, batch_id)
            ).fetchone()
            if found is None or stored.get(found[0]) != top:
                return self._load_keys(cur, batch_id)
        for key, rowid in cur.execute(
            "SELECT case_key, rowid FROM batch_rows WHERE batch_id = ? AND rowid > ?", (batch_id, top)
        ):
            stored[key] = rowid
            top = max(top, rowid)
        self._top[batch_id] = top
        return stored

    def _forget(self, batch_id: str) -> None:
        self._keys.pop(batch_id, None)
        self._top.pop(batch_id, None)
        self._stale.discard(batch_id)

    @staticmethod
    def _read_keys(cur: sqlite3.Cursor | sqlite3.Connection, batch_id: str) -> dict[str, int]:
        return dict(cur.execute("SELECT case_key, rowid FROM batch_rows WHERE batch_id = ?", (batch_id,)).fetchall())

    def _write_cursor(self) -> sqlite3.Cursor:
        cur = self._cursor
        if cur is None:
            cur = self._cursor = sqlite3.Cursor(self._db)
        return cur

    def _retry_tx(self, body: Callable[[], T], cur: sqlite3.Cursor | None = None) -> T:
        """``body()`` in its own transaction; a locked file is retried with backoff until ``lock_wait`` has passed.

        ``cur``: a plain cursor to begin and end the transaction with (the row writes' fast path).
        """
        deadline = time.monotonic() + self.lock_wait
        pause = 0.05
        while True:
            try:
                with self._transaction() if cur is None else Transaction(cur):
                    return body()
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if ("locked" in text or "busy" in text) and time.monotonic() < deadline:
                    time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                    pause = min(pause * 2, 1.0)
                    continue
                raise store_error(exc, self.path, self.lock_wait) from None
            except sqlite3.Error as exc:
                raise store_error(exc, self.path, self.timeout) from None

    def reindex(self, batch_id: str, positions: Mapping[str, int]) -> None:
        """Move rows (content key -> row index) to their position in the latest call of the batch."""
        with self._transaction():
            stored = self._read_keys(self._db, batch_id)
            self._db.executemany(
                "UPDATE batch_rows SET row_index = ? WHERE rowid = ?",
                [(index, stored[key]) for key, index in positions.items() if key in stored],
            )

    def rekey(self, batch_id: str, keys: Mapping[str, str]) -> None:
        """Give rows new content keys (old key -> new), e.g. rows migrated from a version 1 store.

        A row whose new key another row of the batch has already is left as it was."""
        self._forget(batch_id)
        with self._transaction():
            stored = self._read_keys(self._db, batch_id)
            moves = []
            for old, new in keys.items():
                if old in stored and new not in stored:
                    stored[new] = stored.pop(old)
                    moves.append((new, stored[new]))
            self._db.executemany("UPDATE batch_rows SET case_key = ? WHERE rowid = ?", moves)

    def rows(self, batch_id: str, *, unpickle: bool = True, skip_unreadable: bool = False) -> dict[int, StoredRow]:
        """The finished rows of a batch, by row index. Pickled values are decoded only if ``unpickle``.

        A row that cannot be decoded (e.g. a pickled object whose class no longer exists) raises
        StoreError, or is left out with ``skip_unreadable=True`` (its index is in ``self.unreadable``).
        """
        return {r.index: r for r in self.stored_rows(batch_id, unpickle=unpickle, skip_unreadable=skip_unreadable)}

    def rows_page(
        self,
        batch_id: str,
        *,
        where: Iterable[tuple[str, tuple[Any, ...]]] = (),
        order: str = "row_index, finished_at",
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[int, list[StoredRow]]:
        """One page of a batch's finished rows and how many match, without reading the others (a viewer's page of
        a 100,000-row batch). ``where``: SQL conditions with their parameters over the columns of ``batch_rows``
        (``data`` through SQLite's ``json_extract``), written by nbflow, never by a user; ``order`` likewise.
        Pickled values are never unpickled (an opaque marker, as ``unpickle=False``)."""
        conditions = ["batch_id = ?", *(c for c, _ in where)]
        params: list[Any] = [batch_id, *(p for _, ps in where for p in ps)]
        sql = " AND ".join(conditions)
        cell = self._cell_reader(False)
        total = self._db.execute(f"SELECT COUNT(*) FROM batch_rows WHERE {sql}", params).fetchone()[0]
        out = []
        for index, run_id, status, finished_at, text, key in self._db.execute(
            f"SELECT row_index, run_id, status, finished_at, data, case_key FROM batch_rows WHERE {sql} "
            f"ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, int(limit), int(offset)],
        ):
            try:
                data = {k: _decode(v, False, False, cell) for k, v in json.loads(text).items()}
            except Exception as exc:  # a row the viewer cannot read is shown as such, never raised mid-page
                data = {"status": status, "error_message": f"(unreadable stored row: {type(exc).__name__})"}
            out.append(StoredRow(index, run_id, status, finished_at, data, key))
        return int(total), out

    def row_key(self, batch_id: str, run_id: str) -> tuple[str, int, str | None] | None:
        """(content key, row index, fingerprint id) of the stored row that ``run_id`` wrote, if any."""
        row = self._db.execute(
            "SELECT case_key, row_index, fingerprint FROM batch_rows WHERE batch_id = ? AND run_id = ?",
            (batch_id, run_id),
        ).fetchone()
        return None if row is None else (row[0], int(row[1]), row[2])

    def run_at(self, batch_id: str, index: int) -> str | None:
        """The run id of the stored row at ``index`` of a batch, if any."""
        row = self._db.execute(
            "SELECT run_id FROM batch_rows WHERE batch_id = ? AND row_index = ?", (batch_id, index)
        ).fetchone()
        return None if row is None else row[0]

    def row_lineages(self, batch_id: str, run_ids: Sequence[str]) -> dict[str, str]:
        """The lineage text stored with the rows of ``batch_id`` that ran ``run_ids``, by run id (rows without one
        left out)."""
        found: dict[str, str] = {}
        for k in range(0, len(run_ids), 500):
            chunk = run_ids[k : k + 500]
            found.update(
                self._db.execute(
                    "SELECT run_id, lineage FROM batch_rows WHERE batch_id = ? AND lineage IS NOT NULL "
                    f"AND run_id IN ({','.join('?' * len(chunk))})",
                    (batch_id, *chunk),
                )
            )
        return found

    def stored_lineage(
        self, batch_id: str, run_id: str
    ) -> tuple[str | None, dict[str, str | None] | None, dict[str, Any] | None] | None:
        """(the row's lineage text, its nodes' code versions, its experiment's environment) of the row ``run_id``
        wrote in ``batch_id`` (``stored_row_lineage``: each None when not recorded); None when there is no such row."""
        return stored_row_lineage(self._db, self.path, run_id, batch_id)

    def stored_rows(self, batch_id: str, *, unpickle: bool = True, skip_unreadable: bool = False) -> list[StoredRow]:
        """Every finished row of a batch with its content key and fingerprints, in row order (see ``rows``)."""
        out: list[StoredRow] = []
        self.unreadable = {}
        cell = self._cell_reader(unpickle)
        for index, run_id, status, finished_at, text, key, fp in self._db.execute(
            "SELECT row_index, run_id, status, finished_at, data, case_key, fingerprint FROM batch_rows "
            "WHERE batch_id = ? ORDER BY row_index, finished_at",
            (batch_id,),
        ):
            try:
                raw = json.loads(text)
                data = {k: _decode(v, unpickle, self.allow_pickle, cell) for k, v in raw.items()}
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, UntrustedData) and not skip_unreadable:
                    raise UntrustedData(f"store {self.path!r}, batch {batch_id!r}, row {index}: {exc}") from None
                if not skip_unreadable:
                    raise StoreError(
                        f"store {self.path!r}, batch {batch_id!r}, row {index}: cannot decode the stored row ({why}); "
                        f"define the classes its outputs use before loading, or pass unpickle=False"
                    ) from exc
                self.unreadable[index] = why
                continue
            out.append(StoredRow(index, run_id, status, finished_at, data, key, self.fingerprints(fp)))
        return out

    def _cell_reader(self, unpickle: bool) -> Callable[[str], Any]:
        """Reads the cells stored once (``{_VALUE: key}``) by key, each once per call (the rows that share a value
        get one object, as the batch that wrote them had). Without ``unpickle`` a pickle is a marker."""
        seen: dict[str, Any] = {}
        values = Values(self._db, self.path)

        def cell(key: str) -> Any:
            if key not in seen:
                data = values.get(key)
                if unpickle:
                    seen[key] = read_from(loads(data, allow_pickle=self.allow_pickle), REF + key.encode())
                else:
                    found = peek(data)
                    seen[key] = {_SIGNED: "(not unpickled)"} if found is NOT_OPENED else found
            return seen[key]

        return cell

    def kept_outputs(self, run_id: str) -> KeptOutputs | None:
        """What the stored run of a row (kept with it: ``keep="all"``) holds for re-use: each node's final status,
        and the outputs of its succeeded nodes that stand for the real value. Left out: a value the store could
        not keep or ``keep=`` dropped, and one holding a redaction (a secret's text, or the word ``REDACTED``
        itself: such a node runs again rather than being fed a changed value). None when the store has no such
        run or cannot read it back (another user's pickles without ``allow_pickle``)."""
        from nbflow._core.missing import MISSING
        from nbflow._record.run import DROPPED
        from nbflow._store.checkpoint import load_run

        try:
            run = load_run(self.path, run_id, allow_pickle=self.allow_pickle)
        except StoreError:
            return None
        statuses: dict[str, str] = {}
        outputs: dict[str, Any] = {}
        redacted: set[str] = set()
        for name, rec in run.nodes.items():
            statuses[name] = rec.status.value
            value = rec.output
            if rec.status.value != "succeeded" or value is MISSING or value is DROPPED:
                continue
            if holds_redaction(value):
                redacted.add(name)
            else:
                outputs[name] = value
        return KeptOutputs(statuses, outputs, frozenset(redacted))

    def load(self, batch_id: str, *, unpickle: bool = True) -> pd.DataFrame:
        """The finished rows of a batch as a DataFrame (index: row index; secret columns hold a marker)."""
        import pandas as pd

        info = self.batch_info(batch_id)
        if info is None:
            known = ", ".join(repr(b["batch_id"]) for b in self.batches()) or "(none)"
            raise StoreError(f"store {self.path!r} has no batch {batch_id!r}; batches: {known}")
        rows = self.stored_rows(batch_id, unpickle=unpickle)  # every row, even two at one index
        columns = list(info["columns"])
        for r in rows:  # columns a row added (usage) that the batch did not list up front
            columns.extend(k for k in r.data if k not in columns)
        frame = pd.DataFrame([r.data for r in rows], index=[r.index for r in rows], columns=columns)
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


def _prepared(
    batch_id: str,
    index: int,
    run_id: str | None,
    status: str,
    text: str,
    key: str | None,
    fingerprint: str | None,
    run: Run | None,
    lineage: str | None = None,
    cells: tuple[tuple[str, Any, bytes | None], ...] | None = None,
) -> PreparedRow:
    """The row's values in ``_ROW_SQL``'s order (after its rowid), ``text`` its encoded data."""
    args = (batch_id, key or f"{LEGACY_KEY}{index}", index, run_id, status, time.time(), fingerprint, text, lineage)
    return _new_prepared(PreparedRow, (args, run, cells))


_new_prepared = tuple.__new__  # (PreparedRow(args, run) runs a Python-level __new__: ~0.3 µs a row)


def _add_columns(db: sqlite3.Connection) -> None:
    """Add ``_ROW_COLUMNS`` a file lacks (written by an nbflow before them); another process may add them first."""
    have = {r[1] for r in db.execute("PRAGMA table_info(batch_rows)")}
    for name, kind in _ROW_COLUMNS.items():
        if name not in have:
            try:
                db.execute(f"ALTER TABLE batch_rows ADD COLUMN {name} {kind}")
            except sqlite3.OperationalError as exc:
                if "duplicate column" not in str(exc):
                    raise


def _redacted_lineage(text: str, red: Redactor) -> str:
    """A row's lineage (JSON) with a secret's text redacted in its values, not in its node names (``redacted``)."""
    from nbflow._record.lineage import lineage_json, redacted

    try:
        data = json.loads(text)
    except ValueError:  # (not a lineage nbflow wrote: redacted as a text)
        return red(text)
    return lineage_json(redacted(data, red)) if isinstance(data, dict) else red(text)


def _meta_text(meta: Mapping[str, Any]) -> str:
    """An experiment record as stored: JSON, every known secret's text redacted (a stop reason, a cool-down's
    last error, a summary keyed by grid values may quote one)."""
    return json.dumps(gate(dict(meta)), default=lambda v: gate(repr(v)))


def encode_row(
    data: Mapping[str, Any],
    secret_columns: Iterable[str] = (),
    red: Redactor | None = None,
    share: Callable[[Any], tuple[str, bytes | None] | None] | None = None,
    cells: list[tuple[str, Any, bytes | None]] | None = None,
    own: Collection[str] = (),
) -> str:
    """The JSON text of a row (secrets' texts redacted); UnstorableValue naming the column that cannot be stored.

    ``share``: decides whether a cell that is not JSON (a frame, an array...) is stored once by reference
    (``BatchStore._share_cell``); such a cell is ``{_VALUE: key}`` in the text and (key, value, bytes) in
    ``cells``. ``own``: columns written as they are, never redacted (``BatchStore.prepare_row``)."""
    if not secret_columns and not red and type(data) is dict and _AS_IS.issuperset(map(type, data.values())):
        return _plain_json(data)  # every cell a plain scalar (the common row): the row is its own JSON
    secret = set(secret_columns) if secret_columns else ()
    encoded: dict[str, Any] = {}
    for k, v in data.items():
        if secret and k in secret:
            encoded[k] = {_REDACTED: True}
            continue
        t = type(v)
        if t is int or t is float or t is bool or v is None or (t is str and (not red or k in own)):
            encoded[k] = v  # stored as is (most cells): no text to redact, nothing to pickle
            continue
        if _is_secret_value(v):  # (before the redactor, which would make it REDACTED, a pickled object)
            encoded[k] = {_REDACTED: True}
            continue
        try:
            if share is not None and not _json_exact(v):
                found = share(v)
                if found is not None:
                    encoded[k] = {_VALUE: found[0]}
                    if cells is not None:
                        cells.append((found[0], v, found[1]))
                    continue
            encoded[k] = _encode(red.scrub(v), red) if red else _encode(v)
        except Exception as exc:  # pickle: TypeError, RecursionError, PicklingError, ...
            raise UnstorableValue(k, f"{type(v).__name__}: {type(exc).__name__}: {exc}") from None
    return json_text(encoded)  # json.dumps's text (NaN allowed); every value is JSON-exact or a marker by now


_AS_IS = frozenset({int, float, bool, str, type(None)})  # cells stored as they are when nothing is redacted


def _encode_cell(value: Any) -> bytes:
    """A shared cell's bytes when the file no longer holds them (collected since they were encoded)."""
    return dumps(value, redactor())


def _plain_json(data: dict[str, Any]) -> str:
    """The JSON text of a row whose every cell is an exact built-in scalar (``_AS_IS``).

    orjson writes it in ~0.3 µs where the standard library's C encoder takes ~2.4-4 (for a 9-column row: most of
    what encoding a stored row cost). Its text differs only where JSON allows (no spaces, UTF-8 rather than
    ``\\u`` escapes): ``json.loads`` reads back the same values. Where orjson would write something else, the
    standard encoder writes the row: NaN and infinities (orjson writes ``null``; detected as more ``null``
    tokens than the row has None cells, which a text holding "null" also triggers), an int beyond 64 bits, a
    string that is not valid Unicode (a lone surrogate), a key that is not a str.
    """
    fast = _ORJSON[0] if _ORJSON else load_orjson()
    if fast is not None:
        try:
            out: bytes = fast(data)
        except TypeError:  # orjson.JSONEncodeError (a TypeError): the standard encoder takes the row
            pass
        else:
            if out.count(b"null") == countOf(data.values(), None):
                return out.decode()
    return json_text(data)


def _json_exact(value: Any) -> bool:
    return json_exact(value, (_PICKLED, _SIGNED, _REDACTED, _PLAIN, _VALUE))


def _encode(value: Any, red: Redactor | None = None) -> Any:
    if _json_exact(value):
        return value
    if _is_secret_value(value):
        return {_REDACTED: True}
    from nbflow._store import plain  # on first use: JSON-only rows never need it (import cost)

    try:
        return {_PLAIN: plain.encode(value, red)}
    except plain.NotPlain:
        pass
    data = sign_pickle(pickled(value, red))
    return {_SIGNED: base64.b64encode(data).decode("ascii")}


def _decode(value: Any, unpickle: bool, allow_pickle: bool = False, cell: Callable[[str], Any] | None = None) -> Any:
    if type(value) is dict and len(value) == 1:
        if _VALUE in value and cell is not None and type(value[_VALUE]) is str:
            return cell(value[_VALUE])
        for key in (_SIGNED, _PICKLED):
            if key in value:
                if not unpickle:
                    return {key: "(not unpickled)"}
                return loads(base64.b64decode(value[key]), allow_pickle=allow_pickle)
        if _PLAIN in value:
            from nbflow._store import plain

            return plain.decode(value[_PLAIN])
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
