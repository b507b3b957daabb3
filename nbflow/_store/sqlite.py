"""SQLite plumbing shared by the batch store and the checkpoint store: opening, errors, transactions."""

from __future__ import annotations

import os
import sqlite3
import threading
from types import TracebackType
from typing import Any

from nbflow._core.errors import StoreError

__all__ = [
    "CorruptStore",
    "FileIdentity",
    "ReadOnlyStore",
    "StoreConnection",
    "Transaction",
    "garbled",
    "open_db",
    "schema_version",
    "store_error",
]

_DAMAGED = ("malformed", "not a database", "file is encrypted", "corrupt")


class ReadOnlyStore(StoreError):
    """A write to a store that can only be read (read-only file, folder or file system)."""


class CorruptStore(StoreError):
    """SQLite found a damaged page in the store file (raised wherever it is read, never a raw sqlite3 error)."""


def damaged(exc: sqlite3.Error, path: str | os.PathLike[str]) -> CorruptStore | None:
    """A CorruptStore naming the file and the fix if ``exc`` says the file is damaged, else None."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) or not any(d in text for d in _DAMAGED):
        return None
    shown = os.fspath(path)
    if "not a database" in text or "file is encrypted" in text:
        return CorruptStore(
            f"{shown!r} is not a readable nbflow store ({text}); it was left untouched - use another path"
        )
    return CorruptStore(
        f"store {shown!r} is damaged ({text}): a page of the file is corrupt, so nbflow cannot trust what it holds "
        f"and stopped before using it. Restore the file from a backup, or copy what is still readable into a new "
        f"file with the sqlite3 shell (`sqlite3 {shown} .recover | sqlite3 recovered.db`) and use that one; or "
        f"start over with another path"
    )


def garbled(path: str | os.PathLike[str], what: str, exc: BaseException | str) -> CorruptStore:
    """A CorruptStore for a value the file holds that nbflow never writes (a garbled field, a record with fields
    of the wrong kind): the SQLite file is sound, its content is not what nbflow wrote."""
    why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return CorruptStore(
        f"store {os.fspath(path)!r}: {what} is not what nbflow writes ({why}); the file was changed by another "
        f"program or damaged, so nbflow stopped before using it. Restore it from a backup, or use another path"
    )


def schema_version(path: str | os.PathLike[str], key: str, value: Any) -> int:
    """The schema number stored under ``key`` in ``nbflow_meta`` (CorruptStore if it is not a number)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise garbled(path, f"its {key} (in nbflow_meta)", f"{value!r} is not a version number") from None


def store_error(exc: sqlite3.Error, path: str | os.PathLike[str], timeout: float) -> StoreError:
    """A StoreError that says what went wrong with the file at ``path`` and what to do."""
    shown = os.fspath(path)
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreError(
            f"store {shown!r} is locked by another process (waited {timeout:g}s); close the other "
            f"notebook/process using it, or use another file; nothing was written"
        )
    found = damaged(exc, path)
    if found is not None:
        return found
    if "readonly database" in text or "read-only" in text:
        return ReadOnlyStore(
            f"store {shown!r} is read-only (a read-only file, folder or disk): it can be read (nf.load_run, "
            f"nf.load_batch, nf.BatchStore(...).load) but nothing can be written to it ({text}). To resume a run "
            f"or a batch, or to add to it, copy the file to a writable folder and use the copy"
        )
    return StoreError(f"store {shown!r}: {text}")


class _Cursor(sqlite3.Cursor):
    """A cursor whose damaged-file errors are CorruptStore (a StoreError), wherever a read meets the bad page."""

    def _fail(self, exc: sqlite3.Error) -> BaseException:
        found = damaged(exc, getattr(self.connection, "path", "?"))
        return exc if found is None else found

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        try:
            return super().execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            raise self._fail(exc) from None

    def executemany(self, sql: str, seq_of_parameters: Any) -> Any:
        try:
            return super().executemany(sql, seq_of_parameters)
        except sqlite3.DatabaseError as exc:
            raise self._fail(exc) from None

    def executescript(self, sql_script: str) -> Any:
        try:
            return super().executescript(sql_script)
        except sqlite3.DatabaseError as exc:
            raise self._fail(exc) from None

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._fail(exc) from None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._fail(exc) from None

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            raise self._fail(exc) from None


class StoreConnection(sqlite3.Connection):
    """The stores' connection: a damaged file raises CorruptStore naming it and the fix (``damaged``)."""

    path: str = "?"
    read_only = False  # opened as an immutable read-only copy (``open_db``)

    def cursor(self, factory: Any = _Cursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any) -> Any:
        return self.cursor().executemany(sql, parameters)

    def executescript(self, sql_script: str) -> Any:
        return self.cursor().executescript(sql_script)


def open_db(path: str | os.PathLike[str], timeout: float = 5.0, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection in WAL mode (autocommit; use ``Transaction``); StoreError if the file is unusable.

    A store that cannot be written (a read-only file, folder or disk: SQLite cannot make the ``-shm``
    file WAL mode needs) is opened read-only and immutable (``?mode=ro&immutable=1``): it reads, and a
    write raises ReadOnlyStore saying so.

    ``read_only=True``: opened ``?mode=ro`` whatever the permissions (a viewer: SQLite refuses every write;
    not immutable, so it reads what another process is writing); StoreError if there is no file.
    """
    shown = os.fspath(path)
    if read_only:
        return _open_read_only(shown, timeout, live=True)
    try:
        db = sqlite3.connect(
            shown, timeout=timeout, check_same_thread=False, isolation_level=None, factory=StoreConnection
        )
    except sqlite3.Error as exc:
        if _cannot_write(shown):
            return _open_read_only(shown, timeout)
        raise StoreError(f"cannot open the store {shown!r}: {exc}; check the path and permissions") from None
    db.path = shown
    try:
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives a process crash (not a power cut).
        db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as exc:
        db.close()
        if _cannot_write(shown):
            return _open_read_only(shown, timeout)
        raise store_error(exc, path, timeout) from None
    return db


def _cannot_write(path: str) -> bool:
    """The file exists and this process may not write it or its folder (permissions or a read-only disk)."""
    folder = os.path.dirname(os.path.abspath(path))
    return os.path.isfile(path) and not (os.access(path, os.W_OK) and os.access(folder, os.W_OK))


def _open_read_only(path: str, timeout: float, live: bool = False) -> sqlite3.Connection:
    from pathlib import Path

    if live and not os.path.isfile(path):
        raise StoreError(f"no store at {path!r}; give the path a batch was run with (store=...)")
    wal = path + "-wal"
    if not live and os.path.exists(wal) and os.path.getsize(wal) > 0:
        # Immutable mode would ignore what the log holds (recent rows): refuse rather than read too little.
        raise ReadOnlyStore(
            f"store {path!r} cannot be written, and its write-ahead log {wal!r} still holds changes that SQLite "
            f"can only read by creating {path + '-shm'!r} next to it. Copy the store and its -wal file to a "
            f"writable folder and open the copy (or open it once where it is writable, which folds the log in)"
        )
    uri = Path(path).resolve().as_uri() + ("?mode=ro" if live else "?mode=ro&immutable=1")
    try:
        db = sqlite3.connect(
            uri, uri=True, timeout=timeout, check_same_thread=False, isolation_level=None, factory=StoreConnection
        )
        db.path = path
        db.read_only = True
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise store_error(exc, path, timeout) from None
    return db


class Transaction:
    """``with Transaction(db, lock):`` one IMMEDIATE transaction, committed or rolled back."""

    def __init__(self, db: sqlite3.Connection | sqlite3.Cursor, lock: threading.Lock | None = None) -> None:
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


class FileIdentity:
    """The identity (device, inode) of a store file when it was opened: ``check()`` raises StoreError
    once the file was deleted or replaced, because a connection to the old inode would go on writing
    into a file nobody can open any more (every later checkpoint or cache entry silently lost)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.ident = self._now()

    def _now(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def changed(self) -> bool:
        return self._now() != self.ident

    def check(self) -> None:
        if self.ident is not None and self.changed():
            what = "deleted" if self._now() is None else "replaced by another file"
            raise StoreError(
                f"store {self.path!r} was {what} while this process had it open; nothing more can be written "
                f"to it. Open the store again (a new flow.run(store=...) or nf.load_run(...) reopens the path)"
            )
