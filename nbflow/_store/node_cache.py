"""``nf.NodeCache``: where a flow keeps node results, in memory or in a SQLite file (docs/caching.md).

A persistent cache stores values with ``pickle``: **only open a cache file you trust**, unpickling
can run arbitrary code. A value holding an ``nf.Secret`` is never written to a file (that node is
then not cached); exceptions inside values are stored as ``StoredError``. Keys are SHA-256 digests:
a secret input changes the key, but only its hash is ever written.
"""

from __future__ import annotations

import io
import os
import pickle
import sqlite3
import threading
import time
import uuid
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nbflow._core.errors import FlowDefinitionError, NbflowWarning, StoreError
from nbflow._core.secrets import Secret
from nbflow._engine.caching import Unstorable
from nbflow._store.pickling import StorePickler, loads
from nbflow._store.sqlite import Transaction, open_db, store_error

__all__ = ["NodeCache", "open_cache"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nbflow_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS node_cache (
    key TEXT PRIMARY KEY, flow TEXT NOT NULL, node TEXT NOT NULL, entry TEXT NOT NULL, value BLOB NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS node_cache_node ON node_cache (flow, node);
"""


class _SecretInValue(Exception):
    pass


class _CachePickler(StorePickler):
    """The checkpoint pickler (exceptions as StoredError), but a secret makes the value unstorable.

    The checkpoint pickler writes a redaction marker instead; read back from a cache, that marker
    would silently replace the secret in a later run's data.
    """

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Secret):
            raise _SecretInValue
        return super().reducer_override(obj)


_SECRET_WHY = "it holds the value of a secret input (nf.Secret), which is never written to a cache file"


def _dumps(value: Any, secrets: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    try:
        _CachePickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except _SecretInValue:
        raise Unstorable(_SECRET_WHY) from None
    except Exception as exc:
        raise Unstorable(f"a cache file needs picklable values ({type(exc).__name__}: {exc})") from None
    data = buf.getvalue()
    if any(s.encode() in data for s in secrets):  # a secret that validation turned into a plain str
        raise Unstorable(_SECRET_WHY)
    return data


class NodeCache:
    """Node results by key: in memory (``path=None``) or in a SQLite file that outlives the process.

    Flows make one for you (``nf.Flow(..., cache=True)`` or ``cache="cache.db"``); make one yourself
    to share it between flows (``cache=nf.NodeCache("cache.db")``). ``len(cache)`` counts entries;
    ``cache.clear()`` empties it (``flow.clear_cache()`` clears one flow's entries).

    An in-memory cache keeps the very objects nodes returned (nothing is copied): do not mutate a
    node's output in place. A file cache raises StoreError if the file is unusable.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 5.0) -> None:
        self.path = Path(path) if path is not None else None
        self.timeout = timeout
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[str, str, str, Any]] = {}  # memory: key -> (flow, node, entry id, value)
        self._db: sqlite3.Connection | None = None
        self._warned = False
        if self.path is None:
            return
        if not self.path.parent.exists():
            raise StoreError(
                f"cannot create a cache at {str(self.path)!r}: folder {str(self.path.parent)!r} does not exist"
            )
        self._db = open_db(self.path, timeout)
        try:
            with Transaction(self._db, self._lock):
                for stmt in filter(str.strip, _SCHEMA.split(";")):
                    self._db.execute(stmt)
                row = self._db.execute("SELECT value FROM nbflow_meta WHERE key='cache_schema'").fetchone()
                if row is None:
                    self._db.execute("INSERT INTO nbflow_meta VALUES ('cache_schema', ?)", (str(SCHEMA_VERSION),))
                elif int(row[0]) > SCHEMA_VERSION:
                    raise StoreError(
                        f"cache {str(self.path)!r} was written by a newer nbflow (cache schema {row[0]}); "
                        f"upgrade nbflow or use another file"
                    )
        except sqlite3.DatabaseError as exc:
            raise store_error(exc, self.path, timeout) from None

    # --- the engine's side (engine/caching.py) ---------------------------------------------------
    def get(self, key: str) -> tuple[str, Any] | None:
        """(entry id, value) stored under ``key``, or None. A file that fails to read is a miss."""
        if self._db is None:
            found = self._entries.get(key)
            return None if found is None else (found[2], found[3])
        try:
            row = self._db.execute("SELECT entry, value FROM node_cache WHERE key=?", (key,)).fetchone()
            return None if row is None else (row[0], loads(row[1]))
        except Exception as exc:  # locked, or a value whose class is gone: run the node instead
            self._warn(f"cannot read an entry ({type(exc).__name__}: {exc})")
            return None

    def put(self, key: str, flow: str, node: str, value: Any, secrets: tuple[str, ...] = ()) -> str:
        """Store ``value``; returns its new entry id. Unstorable if a file cannot hold it.

        ``secrets``: texts a file must never hold (the run's secret inputs); memory ignores them.
        """
        entry = uuid.uuid4().hex
        if self._db is None:
            self._entries[key] = (flow, node, entry, value)
            return entry
        data = _dumps(value, secrets)
        try:
            with Transaction(self._db, self._lock):
                self._db.execute(
                    "INSERT OR REPLACE INTO node_cache VALUES (?,?,?,?,?,?)",
                    (key, flow, node, entry, data, time.time()),
                )
        except sqlite3.Error as exc:  # a cache that cannot be written must not fail the run
            raise Unstorable(str(store_error(exc, self.path or "", self.timeout))) from None
        return entry

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"node cache {str(self.path)!r}: {why}; the node runs instead", NbflowWarning, stacklevel=3)

    # --- the user's side -------------------------------------------------------------------------
    def clear(self, flow: str | None = None, nodes: Iterable[str] = ()) -> int:
        """Remove entries (of ``flow``, of its ``nodes``; default: all); returns how many."""
        names = set(nodes)

        def match(f: str, n: str) -> bool:
            return (flow is None or f == flow) and (not names or n in names)

        if self._db is None:
            with self._lock:
                gone = [k for k, (f, n, _, _) in self._entries.items() if match(f, n)]
                for k in gone:
                    del self._entries[k]
            return len(gone)
        where, args = [], []
        if flow is not None:
            where.append("flow=?")
            args.append(flow)
        if names:
            where.append(f"node IN ({','.join('?' * len(names))})")
            args.extend(sorted(names))
        sql = "DELETE FROM node_cache" + (" WHERE " + " AND ".join(where) if where else "")
        try:
            with Transaction(self._db, self._lock):
                return self._db.execute(sql, args).rowcount
        except sqlite3.Error as exc:
            raise store_error(exc, self.path or "", self.timeout) from None

    def __len__(self) -> int:
        if self._db is None:
            return len(self._entries)
        try:
            return int(self._db.execute("SELECT COUNT(*) FROM node_cache").fetchone()[0])
        except sqlite3.Error as exc:
            raise store_error(exc, self.path or "", self.timeout) from None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    def __repr__(self) -> str:
        where = "in memory" if self.path is None else repr(str(self.path))
        return f"<NodeCache {where}: {len(self)} entries>"


_FILES: dict[str, NodeCache] = {}
_FILES_LOCK = threading.Lock()


def open_cache(value: object, flow: str) -> NodeCache | None:
    """The cache ``Flow(cache=...)`` asks for: None (off), a new in-memory one (True), a file's (path).

    One NodeCache per file per process, so flows (and re-run cells) share its connection.
    """
    if value is None or value is False:
        return None
    if value is True:
        return NodeCache()
    if isinstance(value, NodeCache):
        return value
    if isinstance(value, str | os.PathLike):
        key = os.path.abspath(value)
        with _FILES_LOCK:
            found = _FILES.get(key)
            if found is None:
                found = _FILES[key] = NodeCache(key)
            return found
    raise FlowDefinitionError(
        f"flow {flow!r}: cache={value!r}; give True (in memory), a path for a SQLite file "
        f"(cache='cache.db'), an nf.NodeCache, or False (off)"
    )
