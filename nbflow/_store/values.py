"""Values stored once: node outputs and recorded inputs by content, shared by every run of a store file.

A 24-row grid sweep over one ``raw`` frame used to write the frame (and its ``X_train``/``X_test`` splits) into
every row's run record, and again as each dependent node's recorded input. Now a stored node's output, and a
recorded input that is not a small scalar, goes into ``nbflow_values`` once, under its **data version**: the
content digest the node cache already keys results by (``nbflow._engine.caching.data_version``), and the
record holds a reference (``REF`` + key). The same frame in 24 rows, in two experiments, or as the next node's
input is one row of that table. Values keep the store's one codec (``pickling.dumps``: JSON, code-free plain
data with frames as parquet where parquet keeps them exactly, else a pickle signed with the user's key), so
loading a shared value runs no code the file chose, as before.

A run with secret inputs: its values are encoded redacted, so their key is the digest of the stored bytes
(``b:`` + SHA-256), never the digest of the value (which would vary with the secret). A value that cannot be
encoded is left out as before (the caller's rule).

Schema (in the file's checkpoint tables, checkpoint schema 4)::

    nbflow_values(key TEXT PK, data BLOB, size INTEGER, created_at REAL)      the values, once
    nbflow_value_refs(run_id TEXT, key TEXT, PK(run_id, key)) WITHOUT ROWID   which run holds which value

A batch row's large cells (a frame passed to every row as a flow input, a row's case cells) are stored the same
way: the row's JSON holds ``{"__nbflow_value__": key}`` and the batch holds the reference (``batch_owner``: the
``run_id`` column says ``batch:<batch_id>``), so a value stays while a batch that stored it does.

``collect`` (``nbflow gc``, ``BatchStore.gc()``) forgets the references of runs and batches that are gone (a
deleted batch takes its runs with it) and deletes the values nothing references, then VACUUMs. A reference is written in the
same transaction as the record that holds it, and a writer checks a value's presence inside its own write
transaction, so a collection in another process can never leave a record pointing at nothing.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nbflow._core.errors import StoreError
from nbflow._core.secrets import Redactor

__all__ = [
    "MIN_SHARED",
    "REF",
    "SCHEMA",
    "Collected",
    "Shared",
    "Values",
    "batch_owner",
    "collect",
    "is_ref",
    "shared_value",
    "stored_key",
]

REF = b"NBR1"  # a stored column holding a reference: REF + key (utf-8)
MIN_SHARED = 1024  # encoded bytes below which a value stays in its record (a reference would not pay)

SCHEMA = """
CREATE TABLE IF NOT EXISTS nbflow_values (
    key TEXT PRIMARY KEY, data BLOB NOT NULL, size INTEGER NOT NULL, created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS nbflow_value_refs (
    run_id TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nbflow_value_refs_key ON nbflow_value_refs(key);
"""

_INLINE = frozenset({int, float, bool, type(None)})
_BATCH = "batch:"  # the owner of a batch row's values in nbflow_value_refs: "batch:" + batch_id


def batch_owner(batch_id: str) -> str:
    """The ``run_id`` under which the values a batch's rows refer to are referenced (kept while the batch is)."""
    return _BATCH + batch_id


def is_ref(data: Any) -> bool:
    return type(data) is bytes and data[:4] == REF


# Values read back from a store, by id: the key they were stored under. A value fed back into a run (a re-scored
# row reuses its stored outputs) is stored again under that key: a frame read back from parquet can digest
# differently from the one first written (its index, its text dtype), although it holds the same data.
_READ: dict[int, tuple[weakref.ref[Any], str]] = {}


def read_from(value: Any, ref: bytes) -> Any:
    """``value``, remembered as read from the stored value ``ref`` names (values that take weak references)."""
    i = id(value)

    def forget(gone: weakref.ref[Any]) -> None:  # (only its own entry: the id may name a newer value by now)
        found = _READ.get(i)
        if found is not None and found[0] is gone:
            del _READ[i]

    try:
        _READ[i] = (weakref.ref(value, forget), bytes(ref[4:]).decode())
    except TypeError:  # (no weak reference to an int, a str, a tuple...: small values stay inline anyway)
        pass
    return value


def stored_key(value: Any) -> str | None:
    """The key ``value`` was read back from (``read_from``), if it was."""
    found = _READ.get(id(value))
    return found[1] if found is not None and found[0]() is value else None


def _version(value: Any) -> str | None:
    from nbflow._engine.caching import data_version  # the node cache's rule: one digest of a value

    return data_version(value)


def _own(red: Redactor | None) -> Redactor | None:
    """``red`` if the run has secrets of its own (its ``nf.Secret`` values, secret-named inputs): its values are
    then keyed by their redacted bytes. The secrets every run of the process knows (the environment's keys)
    leave the key to the value's data version, so that processes knowing other keys store the same value once."""
    return red if red is not None and red.has_own() else None


class Shared:
    """The values one write transaction stores by reference (``cur``: inside that transaction).

    ``output`` / ``input_key`` decide per value; ``flush()`` writes the new values and the references of the
    runs, in the same transaction, before it commits. A value object seen twice (a node's output and the next
    node's input) is digested once.
    """

    def __init__(self, cur: sqlite3.Cursor | sqlite3.Connection, red: Redactor | None = None) -> None:
        self.cur = cur
        self.red = _own(red)
        self._ids: dict[int, tuple[Any, str | None]] = {}  # id(value) -> (value, its key or None: inline)
        self._new: dict[str, bytes] = {}
        self._known: set[str] = set()
        self._refs: set[tuple[str, str]] = set()

    def for_run(self, red: Redactor | None) -> Shared:
        """This transaction's writer for a run with redactor ``red`` (digests of redacted values differ)."""
        red = _own(red)
        if red is self.red:
            return self
        other = Shared(self.cur, red)
        other._new, other._known, other._refs = self._new, self._known, self._refs
        return other

    def _has(self, key: str) -> bool:
        if key in self._new or key in self._known:
            return True
        found = self.cur.execute("SELECT 1 FROM nbflow_values WHERE key = ?", (key,)).fetchone() is not None
        if found:
            self._known.add(key)
        return found

    def key(
        self, run_id: str, value: Any, encode: Callable[[Any], bytes | None], hint: str | None = None
    ) -> str | None:
        """The key ``value`` is stored under (new or already there), or None: it stays inline (small, or a scalar,
        or it cannot be encoded: ``encode`` returned None). ``hint``: its data version, if known (a cache hit)."""
        t = type(value)
        if t in _INLINE or (t is str and len(value) < MIN_SHARED):
            return None
        seen = self._ids.get(id(value))
        if seen is not None and seen[0] is value:
            key = seen[1]
            if key is not None:
                self._refs.add((run_id, key))
            return key
        key = stored_key(value)
        if key is not None and self._has(key):  # read back from this file and fed to the run again
            self._ids[id(value)] = (value, key)
            self._refs.add((run_id, key))
            return key
        key = None
        if self.red is None and t not in (str, list, dict, tuple):
            key = hint if hint and hint.startswith("v:") else _version(value)
            if key is not None and self._has(key):
                self._ids[id(value)] = (value, key)
                self._refs.add((run_id, key))
                return key
        data = encode(value)
        if data is None or len(data) < MIN_SHARED:
            self._ids[id(value)] = (value, None)
            return None
        if key is None:  # built-in data, or encoded redacted: keyed by the stored bytes
            key = "b:" + hashlib.sha256(data).hexdigest()
        if not self._has(key):
            self._new[key] = data
        self._ids[id(value)] = (value, key)
        self._refs.add((run_id, key))
        return key

    def put(self, owner: str, key: str, value: Any, data: bytes | None, encode: Callable[[Any], bytes]) -> None:
        """Store ``value`` under ``key`` (already decided: ``data``, its bytes, if at hand; else ``encode(value)``
        if the file does not hold it yet), referenced by ``owner``."""
        if not self._has(key):
            self._new[key] = data if data is not None else encode(value)
        if self.red is None:  # (the same object met again in this transaction, e.g. a run's input: no digest)
            self._ids[id(value)] = (value, key)
        self._refs.add((owner, key))

    def flush(self) -> None:
        """Write the new values and the references (inside the caller's transaction)."""
        if self._new:
            now = time.time()
            self.cur.executemany(
                "INSERT OR IGNORE INTO nbflow_values(key, data, size, created_at) VALUES (?, ?, ?, ?)",
                [(k, d, len(d), now) for k, d in self._new.items()],
            )
            self._known.update(self._new)
            self._new.clear()
        if self._refs:
            self.cur.executemany("INSERT OR IGNORE INTO nbflow_value_refs(run_id, key) VALUES (?, ?)", self._refs)
            self._refs.clear()


class Values:
    """Reads stored values back by key (``resolve``), each read once per reader while it is in use."""

    def __init__(self, db: sqlite3.Connection, path: Any) -> None:
        self.db = db
        self.path = path

    def resolve(self, data: Any) -> Any:
        """``data`` itself, or the stored bytes it refers to (StoreError if the value is gone)."""
        if not is_ref(data):
            return data
        return self.get(bytes(data[4:]).decode())

    def get(self, key: str) -> bytes:
        try:
            row = self.db.execute("SELECT data FROM nbflow_values WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError as exc:  # no such table: a damaged or hand-edited file
            row = None
            why = str(exc)
        else:
            why = "no such value"
        if row is None:
            raise StoreError(
                f"store {str(self.path)!r}: a run refers to stored value {key[:14]}... which the file does not "
                f"hold ({why}); the file was edited or damaged outside nbflow"
            )
        return bytes(row[0])


def shared_value(
    store: Shared | None, run_id: str, value: Any, encode: Callable[[Any], bytes | None], hint: str | None = None
) -> bytes | None:
    """``encode(value)``, or a reference to it in ``store`` (see ``Shared.key``)."""
    if store is not None:
        key = store.key(run_id, value, encode, hint)
        if key is not None:
            return REF + key.encode()
    return encode(value)


@dataclass(frozen=True)
class Collected:
    """What ``collect`` did: values deleted, their bytes, and the file's bytes before and after."""

    values: int
    value_bytes: int
    file_before: int
    file_after: int

    @property
    def freed(self) -> int:
        """Bytes the file (and its write-ahead log) shrank by."""
        return max(0, self.file_before - self.file_after)


def _file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def collect(db: sqlite3.Connection, path: str, *, vacuum: bool = True) -> Collected:
    """Delete the values no stored run refers to (and the references of runs that are gone), then VACUUM."""
    from nbflow._store.sqlite import Transaction

    before = _file_bytes(path)
    has = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    count = size = 0
    if "nbflow_values" in has:
        with Transaction(db):
            runs = "SELECT run_id FROM checkpoint_runs" if "checkpoint_runs" in has else "SELECT '' WHERE 0"
            batches = f"SELECT '{_BATCH}' || batch_id FROM batches" if "batches" in has else "SELECT '' WHERE 0"
            db.execute(f"DELETE FROM nbflow_value_refs WHERE run_id NOT IN ({runs}) AND run_id NOT IN ({batches})")
            count, size = db.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM nbflow_values "
                "WHERE key NOT IN (SELECT key FROM nbflow_value_refs)"
            ).fetchone()
            db.execute("DELETE FROM nbflow_values WHERE key NOT IN (SELECT key FROM nbflow_value_refs)")
    if vacuum:
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Collected(int(count), int(size), before, _file_bytes(path))
