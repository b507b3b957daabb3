"""``nf.NodeCache``: where a flow keeps node results, in memory or in a SQLite file (docs/caching.md).

A persistent cache stores DataFrames as parquet (when parquet keeps them exactly and pyarrow is
installed) and other values with ``pickle``: **only open a cache file you trust**, unpickling can
run arbitrary code. A value holding an ``nf.Secret`` is never written to a file (that node is
then not cached); exceptions inside values are stored as ``StoredError``. Keys are SHA-256 digests:
a secret input changes the key, but only its hash is ever written.
"""

from __future__ import annotations

import io
import os
import pickle
import sqlite3
import sys
import threading
import time
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nbflow._core.errors import FlowDefinitionError, NbflowWarning, StoreError
from nbflow._core.secrets import Redactor, Secret
from nbflow._engine.caching import Unstorable
from nbflow._store.pickling import StorePickler, loads, sign_pickle
from nbflow._store.sqlite import FileIdentity, Transaction, open_db, store_error

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


_PARQUET = b"NBPQ1\0"  # a parquet entry (a pickle starts with b"\x80")


def _parquet(value: Any, secrets: tuple[str, ...]) -> bytes | None:
    """A DataFrame as parquet bytes (smaller and faster than its pickle), or None to pickle it.

    Only frames parquet keeps exactly: string column names, columns of numbers, booleans, dates,
    categories or strings (an object column of anything else is pickled).
    """
    kind = type(value)
    if kind.__name__ != "DataFrame" or kind.__module__.split(".")[0] != "pandas":
        return None
    from nbflow._store import plain  # on first use (import cost of `import nbflow`)

    if not plain.frame_is_parquet_exact(value):  # the one rule of when parquet keeps a frame exactly
        return None
    import pandas as pd

    texts = [value[c] for c in value.columns if pd.api.types.is_string_dtype(value[c].dtype)]
    if secrets:  # parquet compresses: look for a secret in the text itself
        found = [*value.columns, *map(str, value.index[:0])]
        for series in texts:
            joined = "\n".join(series.dropna().astype(str))
            if any(s in joined for s in secrets):
                raise Unstorable(_SECRET_WHY)
        if any(s in c for c in found for s in secrets):
            raise Unstorable(_SECRET_WHY)
    buf = io.BytesIO()
    try:
        value.to_parquet(buf)
    except Exception:
        return None
    return _PARQUET + buf.getvalue()


def _loads(data: bytes, allow_pickle: bool = False) -> Any:
    if data[: len(_PARQUET)] == _PARQUET:  # parquet runs no code when read
        import pandas as pd

        return pd.read_parquet(io.BytesIO(data[len(_PARQUET) :]))
    return loads(data, allow_pickle=allow_pickle)  # JSON and plain.py's form run no code either


def _dumps(value: Any, secrets: tuple[str, ...] = ()) -> bytes:
    table = _parquet(value, secrets)
    if table is not None:
        return table
    from nbflow._store import plain

    try:  # plain data (arrays, models, tuples, datetimes, frames inside containers...): no pickle
        data = plain.to_bytes(value, Redactor(secrets), refuse_secrets=True)
    except plain.SecretInValue:
        raise Unstorable(_SECRET_WHY) from None
    except plain.NotPlain:
        pass
    else:
        if any(s.encode() in data for s in secrets):  # a secret too short for the Redactor
            raise Unstorable(_SECRET_WHY)
        return data
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
    return sign_pickle(data)


class NodeCache:
    """Node results by key: in memory (``path=None``) or in a SQLite file that outlives the process.

    Flows make one for you (``nf.Flow(..., cache=True)`` or ``cache="cache.db"``); make one yourself
    to share it between flows (``cache=nf.NodeCache("cache.db")``). ``len(cache)`` counts entries;
    ``cache.clear()`` empties it (``flow.clear_cache()`` clears one flow's entries).

    An in-memory cache keeps the very objects nodes returned (nothing is copied; nodes receive
    copy-on-write copies of DataFrames and read-only views of arrays). It is bounded: at most
    ``max_bytes`` (default 1 GiB; None: no bound) of values, the least recently used dropped first,
    and a node's entries made by code that has since been replaced are dropped when the new code
    stores its first result (one mechanism, here). A file cache raises StoreError if the file is unusable.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 5.0,
        max_bytes: int | None = 1 << 30,
        allow_pickle: bool = False,
    ) -> None:
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0):
            raise FlowDefinitionError(
                f"NodeCache(max_bytes={max_bytes!r}): give a positive number of bytes (e.g. 2 << 30 for 2 GiB) or None"
            )
        self.path = Path(path) if path is not None else None
        self.allow_pickle = allow_pickle  # unpickle entries without a valid tag of your key (trusted files only)
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._reopen_lock = threading.Lock()
        # memory: key -> (flow, node, entry id, value, code, size), least recently used first
        self._entries: OrderedDict[str, tuple[str, str, str, Any, str, int]] = OrderedDict()
        self.nbytes = 0
        """Bytes of the values held in memory (estimated: DataFrames deep, arrays by nbytes)."""
        self._db: sqlite3.Connection | None = None
        self._warned = False
        if self.path is None:
            return
        self._open()

    def _open(self) -> None:
        assert self.path is not None
        timeout = self.timeout
        if not self.path.parent.exists():
            raise StoreError(
                f"cannot create a cache at {str(self.path)!r}: folder {str(self.path.parent)!r} does not exist"
            )
        self._db = open_db(self.path, timeout)
        self.identity = FileIdentity(self.path)
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

    def _current(self) -> sqlite3.Connection:
        """The connection to the file at the path now: a cache file deleted or replaced while open is opened again
        (a connection to the old inode would go on reading entries nobody can see and writing them into a file
        nobody can open: deleting the file is how a user empties a cache). One ``stat`` per call."""
        assert self._db is not None
        if self.identity.changed():
            with self._reopen_lock:  # (not ``_lock``: opening takes it for its transaction)
                if self.identity.changed():
                    self._db.close()
                    self._open()
        assert self._db is not None
        return self._db

    # --- the engine's side (engine/caching.py) ---------------------------------------------------
    def get(self, key: str) -> tuple[str, Any] | None:
        """(entry id, value) stored under ``key``, or None. A file that fails to read is a miss."""
        if self._db is None:
            with self._lock:
                found = self._entries.get(key)
                if found is None:
                    return None
                self._entries.move_to_end(key)
            return found[2], found[3]
        try:
            row = self._current().execute("SELECT entry, value FROM node_cache WHERE key=?", (key,)).fetchone()
            return None if row is None else (row[0], _loads(row[1], self.allow_pickle))
        except Exception as exc:  # locked, or a value whose class is gone: run the node instead
            self._warn(f"cannot read an entry ({type(exc).__name__}: {exc})")
            return None

    def put(
        self,
        key: str,
        flow: str,
        node: str,
        value: Any,
        secrets: tuple[str, ...] = (),
        entry: str | None = None,
        code: str = "",
    ) -> str:
        """Store ``value``; returns its entry id (``entry``: its data version, else a new id).

        ``secrets``: texts a file must never hold (the run's secret inputs); memory ignores them.
        ``code``: the fingerprint of the code that made it; in memory, entries of the same node made
        by other code are dropped (the cell was edited). Unstorable if a file cannot hold it.
        """
        entry = entry or uuid.uuid4().hex
        if self._db is None:
            self._put_memory(key, (flow, node, entry, value, code, sizeof(value)))
            return entry
        data = _dumps(value, secrets)
        try:
            db = self._current()
            with Transaction(db, self._lock):
                db.execute(
                    "INSERT OR REPLACE INTO node_cache VALUES (?,?,?,?,?,?)",
                    (key, flow, node, entry, data, time.time()),
                )
        except (sqlite3.Error, StoreError) as exc:  # a cache that cannot be written must not fail the run
            why = exc if isinstance(exc, StoreError) else store_error(exc, self.path or "", self.timeout)
            raise Unstorable(str(why)) from None
        return entry

    def _put_memory(self, key: str, item: tuple[str, str, str, Any, str, int]) -> None:
        flow, node, _, _, code, size = item
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old[5]
            if code:  # replaced code: its results can never be hit again
                stale = [k for k, e in self._entries.items() if e[0] == flow and e[1] == node and e[4] and e[4] != code]
                for k in stale:
                    self.nbytes -= self._entries.pop(k)[5]
            self._entries[key] = item
            self.nbytes += size
            bound = self.max_bytes
            while bound is not None and self.nbytes > bound and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)  # least recently used
                self.nbytes -= dropped[5]

    def _warn(self, why: str) -> None:
        from nbflow._engine.logs import STORE

        STORE.warning("node cache %r: %s; the node runs instead", str(self.path), why)  # (every time, not once)
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
                gone = [k for k, e in self._entries.items() if match(e[0], e[1])]
                for k in gone:
                    self.nbytes -= self._entries.pop(k)[5]
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
            db = self._current()
            with Transaction(db, self._lock):
                return db.execute(sql, args).rowcount
        except sqlite3.Error as exc:
            raise store_error(exc, self.path or "", self.timeout) from None

    def __len__(self) -> int:
        if self._db is None:
            return len(self._entries)
        try:
            return int(self._current().execute("SELECT COUNT(*) FROM node_cache").fetchone()[0])
        except sqlite3.Error as exc:
            raise store_error(exc, self.path or "", self.timeout) from None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    def __repr__(self) -> str:
        where = "in memory" if self.path is None else repr(str(self.path))
        return f"<NodeCache {where}: {len(self)} entries>"


def sizeof(value: Any, depth: int = 0) -> int:
    """Bytes ``value`` holds, estimated: DataFrames/Series deep, arrays by nbytes, containers by their items."""
    kind = type(value)
    module = kind.__module__
    try:
        if (module == "pandas" or module.startswith("pandas.")) and kind.__name__ in ("DataFrame", "Series"):
            usage = value.memory_usage(deep=True)
            return int(usage.sum() if hasattr(usage, "sum") else usage)
        if module == "numpy" and kind.__name__ == "ndarray":
            return int(value.nbytes)
    except Exception:
        pass
    size = sys.getsizeof(value, 64)
    if depth < 3:
        if kind is dict:
            size += sum(sizeof(k, depth + 1) + sizeof(v, depth + 1) for k, v in value.items())
        elif kind in (list, tuple, set, frozenset):
            size += sum(sizeof(v, depth + 1) for v in value)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            size += sizeof(vars(value), depth + 1)
    return size


_FILES: dict[str, NodeCache] = {}
_FILES_LOCK = threading.Lock()


def open_cache(value: object, flow: str) -> NodeCache:
    """The cache ``Flow(cache=...)`` asks for when it is on: a new in-memory one (True), a file's (path).

    One NodeCache per file per process, so flows (and re-run cells) share its connection. "Off" (None,
    False) is decided by the caller, ``nbflow._flow.flow._open_cache``, so that a flow without a cache
    never imports this module.
    """
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
