"""One process at a time runs a stored batch: a claim per batch, so two resumers never run the same rows.

``flow.batch(..., store=p)`` claims its batch in the file before it reads or runs a row, and releases it
when it ends (finished, failed, interrupted). A second process (or a second concurrent call in the same
process) that starts the same batch meanwhile is refused with ``BatchClaimed`` (a ``StoreError`` naming
the batch and the process that has it). A claim whose process is gone is taken over:

- on this host: the owner ``host:pid:start`` is checked (``owner.py``): a killed process's claim is
  stale at once;
- in this process: a claim no running batch holds (its call ended without releasing it) is stale;
- on another host (a shared folder): the claim holds while its heartbeat (rewritten every
  ``HEARTBEAT`` seconds by a daemon thread with its own connection) is younger than ``STALE`` seconds.

Table (shares the file with the batch and checkpoint tables)::

    batch_claims(batch_id TEXT PK, owner TEXT, claim TEXT, since REAL, heartbeat REAL)
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import uuid

from nbflow._core.errors import StoreError
from nbflow._store import owner as _owner
from nbflow._store.owner import HEARTBEAT, STALE, owner_alive, owner_token
from nbflow._store.sqlite import Transaction, open_db, store_error

__all__ = ["HEARTBEAT", "STALE", "BatchClaim", "BatchClaimed"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batch_claims (batch_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "claim TEXT NOT NULL, since REAL NOT NULL, heartbeat REAL NOT NULL)"
)
_LIVE: set[str] = set()  # claims held by batches running in this process
_LIVE_LOCK = threading.Lock()


class BatchClaimed(StoreError):
    """Another process (or another call in this one) is running this batch of the store right now."""


def _stale(owner: str, claim: str, heartbeat: float) -> bool:
    if owner == owner_token():
        with _LIVE_LOCK:
            return claim not in _LIVE
    return not owner_alive(owner, heartbeat)


def _who(owner: str) -> str:
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if owner == owner_token():
        return f"another call in this process (pid {pid})"
    return f"process {pid} on host {host!r}" if host != socket.gethostname() else f"process {pid}"


class BatchClaim:
    """The claim of ``batch_id`` in the store at ``path`` (taken in ``__init__``; ``release()`` ends it)."""

    def __init__(
        self, path: str | os.PathLike[str], batch_id: str, *, timeout: float = 5.0, lock_wait: float = 30.0
    ) -> None:
        """``timeout``: SQLite's wait for a lock per try; a locked file is retried until ``lock_wait`` passed."""
        self.path = os.fspath(path)
        self.batch_id = batch_id
        self.claim = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._db = open_db(self.path, timeout)
        deadline = time.monotonic() + lock_wait
        pause = 0.05
        while True:
            try:
                self._take()
                break
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if ("locked" in text or "busy" in text) and time.monotonic() < deadline:
                    time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                    pause = min(pause * 2, 1.0)
                    continue
                self._db.close()
                raise store_error(exc, self.path, lock_wait) from None
            except sqlite3.Error as exc:
                self._db.close()
                raise store_error(exc, self.path, timeout) from None
            except BaseException:
                self._db.close()
                raise
        with _LIVE_LOCK:
            _LIVE.add(self.claim)
        self._thread = threading.Thread(target=self._beat, name=f"nbflow-claim-{batch_id}", daemon=True)
        self._thread.start()

    def _take(self) -> None:
        with Transaction(self._db):
            self._db.execute(_SCHEMA)
            row = self._db.execute(
                "SELECT owner, claim, since, heartbeat FROM batch_claims WHERE batch_id = ?", (self.batch_id,)
            ).fetchone()
            if row is not None and not _stale(row[0], row[1], row[3]):
                since = time.strftime("%H:%M:%S", time.localtime(row[2]))
                raise BatchClaimed(
                    f"store {self.path!r}: batch {self.batch_id!r} is being run by {_who(row[0])} (since {since}); "
                    f"two processes running one batch would run the same rows. Wait for it to end (then "
                    f"resume=True reuses its rows), stop it, or give this run another batch_id=/store"
                )
            now = time.time()
            self._db.execute(
                "INSERT OR REPLACE INTO batch_claims(batch_id, owner, claim, since, heartbeat) VALUES (?,?,?,?,?)",
                (self.batch_id, owner_token(), self.claim, now, now),
            )

    def _beat(self) -> None:
        while not self._stop.wait(_owner.HEARTBEAT):
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    self._db.execute(
                        "UPDATE batch_claims SET heartbeat = ? WHERE batch_id = ? AND claim = ?",
                        (time.time(), self.batch_id, self.claim),
                    )
                except sqlite3.Error:
                    pass  # a busy file: the next beat tries again (STALE is several beats)

    def release(self) -> None:
        """Give the batch up (only this claim: one taken over since is left alone)."""
        with _LIVE_LOCK:
            _LIVE.discard(self.claim)
        with self._lock:
            if self._stop.is_set():
                return
            self._stop.set()
            try:
                self._db.execute(
                    "DELETE FROM batch_claims WHERE batch_id = ? AND claim = ?", (self.batch_id, self.claim)
                )
            except sqlite3.Error:
                pass  # left behind, it is stale as soon as this process ends
            finally:
                self._db.close()
