"""SQLite plumbing shared by the batch store and the checkpoint store: opening, errors, transactions."""

from __future__ import annotations

import os
import sqlite3
import threading
from types import TracebackType

from nbflow._core.errors import StoreError

__all__ = ["Transaction", "open_db", "store_error"]


def store_error(exc: sqlite3.Error, path: str | os.PathLike[str], timeout: float) -> StoreError:
    """A StoreError that says what went wrong with the file at ``path`` and what to do."""
    shown = os.fspath(path)
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreError(
            f"store {shown!r} is locked by another process (waited {timeout:g}s); close the other "
            f"notebook/process using it, or use another file; nothing was written"
        )
    if "not a database" in text or "malformed" in text or "file is encrypted" in text:
        return StoreError(
            f"{shown!r} is not a readable nbflow store ({text}); it was left untouched - use another path"
        )
    return StoreError(f"store {shown!r}: {text}")


def open_db(path: str | os.PathLike[str], timeout: float = 5.0) -> sqlite3.Connection:
    """A connection in WAL mode (autocommit; use ``Transaction``); StoreError if the file is unusable."""
    try:
        db = sqlite3.connect(os.fspath(path), timeout=timeout, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the store {os.fspath(path)!r}: {exc}; check the path and permissions") from None
    try:
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives a process crash (not a power cut).
        db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as exc:
        db.close()
        raise store_error(exc, path, timeout) from None
    return db


class Transaction:
    """``with Transaction(db, lock):`` one IMMEDIATE transaction, committed or rolled back."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock | None = None) -> None:
        self._db = db
        self._lock = lock

    def __enter__(self) -> None:
        if self._lock is not None:
            self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self._db.execute("COMMIT" if kind is None else "ROLLBACK")
        finally:
            if self._lock is not None:
                self._lock.release()
