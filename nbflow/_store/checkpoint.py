"""SQLite checkpoints: every finished node and every pause of a run, so it survives a kernel restart.

Format: one SQLite file (WAL mode), one transaction per state change. Values (node outputs, inputs,
question data, answers) are stored with ``pickle``: **never load a store from an untrusted source**,
unpickling can run arbitrary code. Secrets (``nf.Secret`` values, and inputs whose names look like
``api_key``/``token``/``password``) are written as a redaction marker, never as their value.
Exceptions are stored as ``StoredError(type name, message)`` with their traceback text.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import ResumeConflictError, StoreError
from nbflow._core.events import (
    Event,
    NodeCancelled,
    NodeEvent,
    NodeFailed,
    NodePaused,
    NodeSkipped,
    NodeSucceeded,
    RunFinished,
    RunPaused,
)
from nbflow._core.missing import MISSING
from nbflow._core.secrets import Redactor, redact
from nbflow._core.states import NodeStatus, RunStatus
from nbflow._record.run import NodeRecord, Run
from nbflow._store.pickling import StoredError, dumps, loads
from nbflow._store.sqlite import Transaction, open_db, store_error

if TYPE_CHECKING:
    from nbflow._record.run import NodeRecord, Run

__all__ = ["CheckpointStore", "ensure_schema", "load_run", "open_store", "write_whole_run"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nbflow_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoint_runs (
    run_id TEXT PRIMARY KEY, flow TEXT NOT NULL, status TEXT NOT NULL, pause_version INTEGER NOT NULL,
    targets BLOB, inputs BLOB, answers BLOB, started_at REAL, updated_at REAL NOT NULL, nodes BLOB
);
CREATE TABLE IF NOT EXISTS checkpoint_nodes (
    run_id TEXT NOT NULL, node TEXT NOT NULL, status TEXT NOT NULL, output BLOB, error_type TEXT,
    error_message TEXT, traceback TEXT, reason TEXT, started_at REAL, finished_at REAL, state BLOB,
    PRIMARY KEY (run_id, node)
);
CREATE TABLE IF NOT EXISTS checkpoint_questions (
    run_id TEXT NOT NULL, key TEXT NOT NULL, question BLOB NOT NULL, open INTEGER NOT NULL,
    PRIMARY KEY (run_id, key)
);
"""


def ensure_schema(db: sqlite3.Connection, path: Any) -> None:
    """Create the checkpoint tables if needed (inside the caller's transaction); refuse a newer schema."""
    for stmt in filter(str.strip, _SCHEMA.split(";")):
        db.execute(stmt)
    row = db.execute("SELECT value FROM nbflow_meta WHERE key='checkpoint_schema'").fetchone()
    if row is None:
        db.execute("INSERT INTO nbflow_meta VALUES ('checkpoint_schema', ?)", (str(SCHEMA_VERSION),))
    elif int(row[0]) > SCHEMA_VERSION:
        raise StoreError(
            f"store {str(path)!r} was written by a newer nbflow (checkpoint schema {row[0]}); upgrade nbflow to read it"
        )


_RUN_SQL = (
    "INSERT INTO checkpoint_runs VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(run_id) DO UPDATE SET "
    "status=excluded.status, pause_version=excluded.pause_version, answers=excluded.answers, "
    "updated_at=excluded.updated_at"
)
_NODE_SQL = "INSERT OR REPLACE INTO checkpoint_nodes VALUES (?,?,?,?,?,?,?,?,?,?,?)"
_QUESTION_SQL = "INSERT OR REPLACE INTO checkpoint_questions VALUES (?,?,?,?)"


def _run_params(run: Run, dump: Callable[[str, Any], bytes | None], red: Redactor) -> tuple[Any, ...]:
    inputs = {k: redact(k, v) for k, v in run.inputs.items()}
    return (
        run.run_id,
        run.flow,
        run.status.value,
        run.pause_version,
        dumps(run.targets),
        dump("inputs", inputs),
        dumps(run.answers, red),
        run.started_at,
        time.time(),
        dumps(list(run.nodes)),
    )


def _node_params(run: Run, rec: NodeRecord, dump: Callable[[str, Any], bytes | None], red: Redactor) -> tuple[Any, ...]:
    output = dump(rec.name, rec.output) if rec.status is NodeStatus.SUCCEEDED else None
    state = None
    if rec.items is not None or rec.iterations is not None or rec.subrun is not None:
        state = dump(
            rec.name, {"items": rec.items, "iterations": rec.iterations, "subrun": rec.subrun, "capped": rec.capped}
        )
    return (
        run.run_id,
        rec.name,
        rec.status.value,
        output,
        rec.error_type,
        red(rec.error_message) if rec.error_message is not None else None,
        red(rec.traceback) if rec.traceback is not None else None,
        rec.skip_reason,
        rec.started_at,
        rec.finished_at,
        state,
    )


def write_whole_run(db: sqlite3.Connection, run: Run) -> None:
    """Write ``run`` (header, every node record, open questions) inside the caller's transaction on ``db``.

    How a batch row's run reaches the store with its row (``flow.batch(..., store=, keep=)``). A value that
    cannot be stored is left out of the record (the row itself says how the node ended).
    """

    red = Redactor.for_inputs(run._root.inputs)

    def dump(what: str, value: Any) -> bytes | None:
        try:
            return dumps(value, red)
        except Exception:
            return None

    db.execute(_RUN_SQL, _run_params(run, dump, red))
    db.executemany(_NODE_SQL, [_node_params(run, rec, dump, red) for rec in run.nodes.values()])
    db.executemany(_QUESTION_SQL, [(run.run_id, k, dumps(q, red), 1) for k, q in run.pending.items()])


class CheckpointStore:
    """A SQLite file holding run checkpoints. Thread-safe; one transaction per state change."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0, create: bool = True) -> None:
        self.path = Path(path)
        self.timeout = timeout
        if not create and not self.path.exists():
            raise StoreError(f"no store at {str(self.path)!r}: the file does not exist (check the path)")
        if create and not self.path.parent.exists():
            raise StoreError(
                f"cannot create a store at {str(self.path)!r}: folder {str(self.path.parent)!r} does not exist"
            )
        self._lock = threading.Lock()
        self.unstorable: dict[str, str] = {}
        """Nodes whose output could not be stored, with why (reported when the run pauses)."""
        self._db = open_db(self.path, timeout)
        try:
            with self._tx():
                ensure_schema(self._db, self.path)
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None

    # --- plumbing --------------------------------------------------------------------------------
    def _error(self, exc: sqlite3.Error) -> StoreError:
        return store_error(exc, self.path, self.timeout)

    def _tx(self) -> Transaction:
        return Transaction(self._db, self._lock)

    def _write(self, sql: str, *rows: tuple[Any, ...]) -> int:
        try:
            with self._tx():
                count = 0
                for row in rows:
                    count += self._db.execute(sql, row).rowcount
                return count
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def close(self) -> None:
        self._db.close()

    # --- writing a run ---------------------------------------------------------------------------
    def track(self, run: Run, *, save: bool = True) -> None:
        """Checkpoint ``run`` from now on: its header now (unless loaded), then every state change."""
        run.store = self
        if save:
            self.save_run(run)
        run.subscribe(partial(self.on_event, run))

    def _redactor(self, run: Run) -> Redactor:
        """The text of every secret input of the run (its root's): never written, wherever it shows up."""
        return Redactor.for_inputs(run._root.inputs)

    def save_run(self, run: Run) -> None:
        red = self._redactor(run)
        self._write(_RUN_SQL, _run_params(run, lambda what, v: self._dump_checked(what, v, red), red))

    def _dump_checked(self, what: str, value: Any, redactor: Redactor | None = None) -> bytes | None:
        try:
            return dumps(value, redactor)
        except Exception as exc:
            self.unstorable[what] = f"{type(value).__name__}: {type(exc).__name__}: {exc}"
            return None

    def save_node(self, run: Run, rec: NodeRecord) -> None:
        red = self._redactor(run)
        self._write(_NODE_SQL, _node_params(run, rec, lambda what, v: self._dump_checked(what, v, red), red))

    def save_questions(self, run: Run) -> None:
        red = self._redactor(run)
        rows = [(run.run_id, k, dumps(q, red), 1) for k, q in run.pending.items()]
        try:
            with self._tx():
                self._db.execute("UPDATE checkpoint_questions SET open=0 WHERE run_id=?", (run.run_id,))
                for row in rows:
                    self._db.execute(_QUESTION_SQL, row)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def on_event(self, run: Run, event: Event) -> None:
        """The run's subscriber: one transaction per state change of a top-level node or of the run."""
        if isinstance(event, NodeEvent):
            if "." in event.node or not isinstance(
                event, NodeSucceeded | NodeFailed | NodeSkipped | NodeCancelled | NodePaused
            ):
                return  # sub-flow nodes are saved with their sub-flow node's state
            self.save_node(run, run.nodes[event.node])
        elif isinstance(event, RunPaused):
            self.save_questions(run)
            self.save_run(run)
        elif isinstance(event, RunFinished):
            self.save_run(run)

    # --- resuming --------------------------------------------------------------------------------
    def claim(self, run: Run, key: str | None, answer: Any) -> None:
        """Move the stored run from PAUSED to RUNNING if it is still at this pause; else conflict."""
        answers = dict(run.answers)
        if key is not None:
            answers[key] = answer
        try:
            with self._tx():
                cur = self._db.execute(
                    "UPDATE checkpoint_runs SET status='running', answers=?, updated_at=? "
                    "WHERE run_id=? AND status='paused' AND pause_version=?",
                    (dumps(answers), time.time(), run.run_id, run.pause_version),
                )
                if cur.rowcount != 1:
                    raise ResumeConflictError(
                        f"run {run.run_id} was already resumed (the store {str(self.path)!r} no longer has it "
                        f"paused at version {run.pause_version}); load it again to see its state"
                    )
                if key is not None:
                    self._db.execute(
                        "UPDATE checkpoint_questions SET open=0 WHERE run_id=? AND key=?", (run.run_id, key)
                    )
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def run_ids(self) -> list[tuple[str, str, str]]:
        """(run_id, flow, status) of every stored run, newest first."""
        try:
            rows = self._db.execute(
                "SELECT run_id, flow, status FROM checkpoint_runs ORDER BY updated_at DESC"
            ).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        return [tuple(r) for r in rows]

    def load(self, run_id: str, *, secrets: dict[str, Any] | None = None) -> Run:
        try:
            head = self._db.execute(
                "SELECT flow, status, pause_version, targets, inputs, answers, started_at, nodes FROM checkpoint_runs "
                "WHERE run_id=?",
                (run_id,),
            ).fetchone()
            if head is None:
                known = ", ".join(r[0] for r in self.run_ids()[:10]) or "none"
                raise StoreError(f"store {str(self.path)!r} has no run {run_id!r}; stored runs: {known}")
            nodes = self._db.execute(
                "SELECT node, status, output, error_type, error_message, traceback, reason, started_at, "
                "finished_at, state FROM checkpoint_nodes WHERE run_id=?",
                (run_id,),
            ).fetchall()
            questions = self._db.execute(
                "SELECT key, question FROM checkpoint_questions WHERE run_id=? AND open=1", (run_id,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        flow, status, version, targets, inputs, answers, started_at, names = head
        inputs = loads(inputs) if inputs is not None else {}
        inputs.update(secrets or {})
        run = Run(flow, run_id, inputs, loads(names) if names is not None else [])
        run.status = RunStatus(status)
        run.pause_version = version
        run.targets = loads(targets)
        run.answers = loads(answers)
        run.started_at = started_at
        for name, st, output, etype, emsg, tb, reason, t0, t1, state in nodes:
            rec = run.nodes.setdefault(name, _record(name))
            rec.status = NodeStatus(st)
            rec.output = loads(output) if rec.status is NodeStatus.SUCCEEDED else MISSING
            rec.error = StoredError(etype, emsg) if etype else None
            rec.traceback, rec.skip_reason, rec.started_at, rec.finished_at = tb, reason, t0, t1
            if state is not None:
                extra = loads(state)
                rec.items, rec.iterations, rec.subrun, rec.capped = (
                    extra["items"],
                    extra["iterations"],
                    extra["subrun"],
                    extra["capped"],
                )
                if rec.subrun is not None:
                    _reroot(rec.subrun, run)
        for key, q in questions:
            run.pending[key] = loads(q)
        self.track(run, save=False)
        return run


def _record(name: str) -> NodeRecord:
    return NodeRecord(name)


def _reroot(run: Run, root: Run) -> None:
    run._root = root
    for rec in run.nodes.values():
        if rec.subrun is not None:
            _reroot(rec.subrun, root)
        holders: list[Any] = [*(rec.items or []), *(rec.iterations or [])]
        for holder in holders:
            if holder.run is not None:
                _reroot(holder.run, root)


_STORES: dict[str, CheckpointStore] = {}
_STORES_LOCK = threading.Lock()


def open_store(store: str | os.PathLike[str] | CheckpointStore, *, create: bool = True) -> CheckpointStore:
    """The store object for a path (one per file per process), or ``store`` itself."""
    if isinstance(store, CheckpointStore):
        return store
    key = os.path.abspath(store)
    with _STORES_LOCK:
        found = _STORES.get(key)
        if found is None:
            found = _STORES[key] = CheckpointStore(key, create=create)
        return found


def load_run(
    store: str | os.PathLike[str] | CheckpointStore, run_id: str, *, secrets: dict[str, Any] | None = None
) -> Run:
    """A stored run back (e.g. after a kernel restart); ``run.resume(answer)`` continues a paused one.

    ``secrets`` passes again the secret inputs, which are never stored. Raises StoreError if the file
    is missing, locked, corrupt, or does not hold ``run_id``.
    """
    return open_store(store, create=False).load(run_id, secrets=secrets)
