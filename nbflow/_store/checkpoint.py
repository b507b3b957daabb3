"""SQLite checkpoints: every finished node and every pause of a run, so it survives a kernel restart.

Format: one SQLite file (WAL mode), one transaction per state change. A run is a header row
(``checkpoint_runs``) and one row per node (``checkpoint_nodes``); a whole finished run written at once
(a batch row's, ``write_whole_runs``) whose record is built-in data only keeps its nodes in ONE value instead,
the header's ``record`` (schema 2: one insert and one encoding per run, not one per node). Schema 3: a
SUCCEEDED run whose nodes are all plain (the common batch row) is a compact record (``_compact_record``)
that holds the header's values too, so its header row binds five values (run id, flow, status, time,
record) and leaves the others NULL. A run stored either way is turned into the header-and-row-per-node
layout when it is resumed (``claim``), before anything else changes. Files of schema 1 and 2 are migrated
in place when opened writable, in one transaction (schema 1's column is added; the version is raised; every
stored run keeps its layout, which schema 3 reads as it is); a read-only copy is read as it is; an older
nbflow refuses a schema 3 file (StoreError: "written by a newer nbflow").
Schema 4: a node's output, and a recorded input that is not a small scalar, is stored once per file under
its data version (``values.py``: ``nbflow_values``), shared by every run, batch row and experiment; the
node's row holds a reference; and an attempt may carry the model calls of its transcript
(docs/transcripts.md). Schema 5: a run's large inputs, and the large values inside a map's items, a loop's
iterations and a sub-flow's record, are stored once too. Values (node outputs, inputs,
question data, answers) are stored with ``pickle``: **never load a store from an untrusted source**,
unpickling can run arbitrary code. Secrets (``nf.Secret`` values, and inputs whose names look like
``api_key``/``token``/``password``) are written as a redaction marker, never as their value.
Exceptions are stored as ``StoredError(type name, message)`` with their traceback text.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbflow._core.calls import Call, call_dict
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
    RunStarted,
)
from nbflow._core.missing import MISSING
from nbflow._core.secrets import Redactor, is_secret_name, redact, secret_texts
from nbflow._core.states import NodeStatus, RunStatus
from nbflow._record.lineage import expand, lineage_json, redacted
from nbflow._record.run import DROPPED, LEAN, NodeRecord, Run
from nbflow._store import owner as _owner
from nbflow._store.owner import owner_alive, owner_host, owner_token
from nbflow._store.pickling import (
    StoredError,
    UntrustedData,
    core_bytes,
    dumps,
    peek,
    pickled,
    sign_pickle,
)
from nbflow._store.pickling import loads as _loads
from nbflow._store.sqlite import FileIdentity, Transaction, garbled, open_db, schema_version, store_error
from nbflow._store.values import REF, Shared, Values, is_ref, read_from, shared_value
from nbflow._store.values import SCHEMA as _VALUES_SCHEMA

if TYPE_CHECKING:
    from nbflow._record.run import NodeRecord, Run

__all__ = [
    "CheckpointStore",
    "ensure_schema",
    "expanded",
    "load_run",
    "open_store",
    "peek_run",
    "stored_row_lineage",
    "write_whole_run",
    "write_whole_runs",
]

# 2: checkpoint_runs.record (one blob holding the node records of a whole run).
# 3: a record may also be a run's compact record (``_compact_record``: the run's header in it too, its header
# row then binds five columns); files of schema 1 and 2 are migrated on open (the version number alone: their
# rows are read as they are), and an older nbflow refuses a schema 3 file (it would misread a compact record).
# 4: a node's output (and a recorded input) may be a reference to a value stored once (``values.py``), and an
# attempt's entry in a node's detail may hold more values: its transcript's calls, what it printed, its queue
# wait (``_attempt_row``); files of schema 1-3 get the values tables on open (their rows are read as they are),
# and an older nbflow refuses a schema 4 file (it would misread a reference or an attempt).
# 5: a run's stored inputs may hold references too (``_stored_inputs``: a frame every batch row is given is stored
# once), and a map's items, a loop's iterations and a sub-flow's record refer to their large values
# (``pickling.pickled``'s persistent ids); files of schema 1-4 are read as they are, an older nbflow refuses a 5.
SCHEMA_VERSION = 5

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


# Columns added after the first release (files without them get them on open; old readers ignore them):
# owner: ``host:pid:start`` of the process running the run (nbflow/_store/owner.py); reason: run.reason.
# record: a whole run's node records in one value of built-in data (schema 2; NULL: they are rows of checkpoint_nodes).
# heartbeat: the time the owner last said it still runs the run (its lease, see ``CheckpointStore._beat``).
# lineage: JSON, which code and data produced the run's values (nbflow/_engine/lineage.py), written when it ends.
_RUN_COLUMNS = {
    "owner": "TEXT",
    "reason": "TEXT",
    "finished_at": "REAL",
    "record": "BLOB",
    "heartbeat": "REAL",
    "lineage": "TEXT",
}
# detail: what the first columns do not hold (attempts, recovered, cached, original error type).
_NODE_COLUMNS = {"detail": "BLOB"}


def _add_columns(db: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    for name, kind in columns.items():
        if name not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")


def ensure_schema(db: sqlite3.Connection, path: Any) -> None:
    """Create the checkpoint tables if needed (inside the caller's transaction); refuse a newer schema."""
    for stmt in filter(str.strip, _SCHEMA.split(";")):
        db.execute(stmt)
    row = db.execute("SELECT value FROM nbflow_meta WHERE key='checkpoint_schema'").fetchone()
    if row is None:
        db.execute("INSERT INTO nbflow_meta VALUES ('checkpoint_schema', ?)", (str(SCHEMA_VERSION),))
    elif schema_version(path, "checkpoint_schema", row[0]) > SCHEMA_VERSION:
        raise StoreError(
            f"store {str(path)!r} was written by a newer nbflow (checkpoint schema {row[0]}); upgrade nbflow to read it"
        )
    if getattr(db, "read_only", False):
        return  # a read-only copy (sqlite.open_db) is read as it is: an older file has no record column
    _add_columns(db, "checkpoint_runs", _RUN_COLUMNS)
    _add_columns(db, "checkpoint_nodes", _NODE_COLUMNS)
    for stmt in filter(str.strip, _VALUES_SCHEMA.split(";")):
        db.execute(stmt)
    if (
        row is not None and schema_version(path, "checkpoint_schema", row[0]) < SCHEMA_VERSION
    ):  # schema 1 to 3: their runs stay as they are
        db.execute("UPDATE nbflow_meta SET value=? WHERE key='checkpoint_schema'", (str(SCHEMA_VERSION),))


def _has_column(db: sqlite3.Connection, table: str, column: str) -> bool:
    return any(r[1] == column for r in db.execute(f"PRAGMA table_info({table})"))


_RUN_SQL = (
    "INSERT INTO checkpoint_runs (run_id, flow, status, pause_version, targets, inputs, answers, "
    "started_at, updated_at, nodes, owner, reason, finished_at, heartbeat) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT(run_id) DO UPDATE SET "
    "status=excluded.status, pause_version=excluded.pause_version, answers=excluded.answers, "
    "started_at=excluded.started_at, updated_at=excluded.updated_at, owner=excluded.owner, "
    "reason=excluded.reason, finished_at=excluded.finished_at, heartbeat=excluded.heartbeat"
)
# A whole run at once (write_whole_runs): the header with its record, replacing whatever an earlier write left.
_WHOLE_RUN_SQL = (
    "INSERT INTO checkpoint_runs (run_id, flow, status, pause_version, targets, inputs, answers, "
    "started_at, updated_at, nodes, owner, reason, finished_at, record, lineage) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT(run_id) DO UPDATE SET "
    "status=excluded.status, pause_version=excluded.pause_version, inputs=excluded.inputs, "
    "answers=excluded.answers, started_at=excluded.started_at, updated_at=excluded.updated_at, "
    "owner=excluded.owner, reason=excluded.reason, finished_at=excluded.finished_at, record=excluded.record, "
    "lineage=coalesce(excluded.lineage, lineage)"
)
# A whole run whose record is compact (``_compact_record``: the header's other values are in it): five values
# bound, not fourteen (SQLite's binding of a row's values was most of the header's insert: measured 6.3 µs a
# row for 14 columns, 2.7 for 3). The other columns are left at NULL (pause_version 0) until a resume spreads
# the record (``_spread_record``). The run's lineage goes in the same statement (an UPDATE per run after it cost
# a second look-up of the row by its key).
_COMPACT_RUN_SQL = (
    "INSERT INTO checkpoint_runs (run_id, flow, status, pause_version, updated_at, record, lineage) "
    "VALUES (?,?,?,0,?,?,?) "
    "ON CONFLICT(run_id) DO UPDATE SET "
    "status=excluded.status, pause_version=0, targets=NULL, inputs=NULL, answers=NULL, started_at=NULL, "
    "updated_at=excluded.updated_at, nodes=NULL, owner=NULL, reason=NULL, finished_at=NULL, record=excluded.record, "
    "lineage=coalesce(excluded.lineage, lineage)"
)
_NODE_SQL = (
    "INSERT OR REPLACE INTO checkpoint_nodes (run_id, node, status, output, error_type, error_message, "
    "traceback, reason, started_at, finished_at, state, detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
_QUESTION_SQL = "INSERT OR REPLACE INTO checkpoint_questions VALUES (?,?,?,?)"
_NO_ANSWERS = dumps({})


def _run_params(
    run: Run,
    dump: Callable[[str, Any], bytes | None],
    red: Redactor,
    owner: str | None,
    shared: bool = False,
    record: bytes | None = None,
    values: Shared | None = None,
) -> tuple[Any, ...]:
    """``shared``: encode targets and node names through ``_shared_dump`` (batch rows repeat them);
    ``record``: the run's record (``_record_blob``), which holds its inputs (the column is left NULL);
    ``values``: the transaction's values stored once: the run's large inputs go there (``_stored_inputs``)."""
    if shared:
        targets, names = _shared_dump("targets", run.targets), _shared_dump("nodes", tuple(run.nodes))
        answers = dumps(run.answers, red) if run.answers else _NO_ANSWERS
    else:
        targets, names, answers = dumps(run.targets), dumps(list(run.nodes)), dumps(run.answers, red)
    return (
        run.run_id,
        run.flow,
        run.status.value,
        run.pause_version,
        targets,
        None if record is not None else dump("inputs", _stored_inputs(run, values, red)),
        answers,
        run.started_at,
        time.time(),
        names,
        owner,
        red(run.reason) if run.reason is not None else None,
        run.finished_at,
    )


def _inputs(run: Run) -> dict[str, Any]:
    """The run's inputs as stored: secret ones (by name, or ``nf.Secret``) as the redaction marker."""
    return {k: redact(k, v) for k, v in run.inputs.items()}


_INPUT_REFS = "\x00refs"  # in a run's stored inputs: the names of those stored once (their value is the key)


def _stored_inputs(run: Run, values: Shared | None, red: Redactor) -> dict[str, Any]:
    """``_inputs(run)``, its large values stored once in ``values`` (schema 5: a frame every row of a batch is
    given is one value of the file): each by its key, their names under ``_INPUT_REFS`` (no input's name)."""
    inputs = _inputs(run)
    if values is None or not inputs:
        return inputs
    info = {"inputs": inputs}
    _share_inputs(info, run.run_id, values.for_run(red), red)
    if "refs" not in info:
        return inputs
    return {**info["inputs"], _INPUT_REFS: info["refs"]}


def _read_inputs(inputs: dict[str, Any], value: Callable[[Any], Any]) -> dict[str, Any]:
    """Stored run inputs with those stored once read back (``value`` reads a reference)."""
    refs = inputs.pop(_INPUT_REFS, None)
    for name in refs or ():
        inputs[name] = value(REF + inputs[name].encode())
    return inputs


def _node_params(
    run: Run,
    rec: NodeRecord,
    dump: Callable[[str, Any], bytes | None],
    red: Redactor,
    shared: Shared | None = None,
) -> tuple[Any, ...]:
    """``shared``: the transaction's values stored once (``values.py``): the output and the recorded inputs that
    are not small go there, the record holds their keys (``detail["refs"]`` names such inputs)."""
    output = None
    if rec.status is NodeStatus.SUCCEEDED:
        value = rec.output
        if value is DROPPED:  # (its ``_cache_id`` names the value it was: never a reference to a stored one)
            output = dump(rec.name, value)
        else:
            output = shared_value(shared, run.run_id, value, partial(dump, rec.name), rec._cache_id)
    state = None
    if rec.items is not None or rec.iterations is not None or rec.subrun is not None:
        extra = {"items": rec.items, "iterations": rec.iterations, "subrun": rec.subrun, "capped": rec.capped}
        state = _shared_state(extra, run.run_id, shared, red) if shared is not None else None
        if state is None:
            state = dump(rec.name, extra)
    info = _detail(rec)
    if shared is not None and info["inputs"]:
        _share_inputs(info, run.run_id, shared, red)
    detail: bytes | None
    try:
        detail = dumps(info, red)
    except Exception:  # an input that cannot be stored is left out (its source's output is stored)
        info["inputs"] = {}
        info.pop("refs", None)
        detail = dump(rec.name, info)
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
        detail,
    )


def _shared_state(extra: dict[str, Any], run_id: str, shared: Shared, red: Redactor) -> bytes | None:
    """A map's items, a loop's iterations or a sub-flow's record (schema 5) as a signed pickle whose large frames
    and arrays are stored once in ``shared`` (persistent ids naming their keys: 1,000 items over one frame hold
    it once); None if it cannot be pickled (the caller's ``dump`` decides: left out, or the write fails)."""

    def encode(value: Any) -> bytes | None:
        try:
            return dumps(value, red)
        except Exception:  # pickled in place: the pickle's own rule decides
            return None

    try:
        return sign_pickle(pickled(extra, red, lambda value: shared.key(run_id, value, encode)))
    except Exception:
        return None


def _share_inputs(info: dict[str, Any], run_id: str, shared: Shared, red: Redactor) -> None:
    """Recorded inputs stored once: each by its key, named in ``info["refs"]`` (``_load`` reads them back)."""

    def encode(value: Any) -> bytes | None:
        try:
            return dumps(value, red)
        except Exception:  # left in the record: the record's own rule decides (left out if it cannot be stored)
            return None

    inputs = dict(info["inputs"])
    refs = []
    for name, value in inputs.items():
        key = shared.key(run_id, value, encode)
        if key is not None:
            inputs[name] = key
            refs.append(name)
    if refs:
        info["inputs"] = inputs
        info["refs"] = refs


def write_whole_run(db: sqlite3.Connection, run: Run) -> None:
    """Write ``run`` (header, every node record, open questions) inside the caller's transaction on ``db``.

    How a batch row's run reaches the store with its row (``flow.batch(..., store=, keep=)``). A value that
    cannot be stored is left out of the record (the row itself says how the node ended).
    """
    write_whole_runs(db.cursor(), [run])


def write_whole_runs(cur: sqlite3.Cursor, runs: list[Run], shared: Shared | None = None) -> set[str]:
    """``write_whole_run`` for many runs (a batch's group commit), in as few statements as possible.

    A run whose node records are built-in data only (the common batch row) is ONE header row holding them all
    in its ``record`` (one encoding, one insert); any other run (an error object in an attempt, a
    DataFrame, a secret input's marker, map/loop/sub-flow state...) is written as before: a header and one row per node, each value
    encoded on its own, so what cannot be stored is left out alone.
    The parts every row of a batch shares (its targets, its node names, no answers) are encoded once,
    and each statement's parameters are made one at a time as SQLite takes them (generators): a group's
    worth of parameter tuples alive at once would be promoted by the garbage collector, which then runs
    its older, slower generations more often (measured as much as the encoding itself).

    A run written here has no lineage of its own: its batch row holds it in the row's form (``stored_row_lineage``,
    with the batch's code versions and environment), and ``load`` reads it from there.

    Returns the ids of the runs stored with something left out (a value that cannot be stored): only those
    read back differently (besides their redacted secrets), so a batch keeps them in memory.
    ``shared``: the transaction's values stored once, if its caller stores some too (a batch row's cells).
    """
    reds = [_redactor_of(run) for run in runs]
    left_out: set[str] = set()
    # The values stored once (outputs, recorded inputs): a run's record holds their keys.
    if shared is None:
        shared = Shared(cur.connection)
    rest: list[tuple[Run, Redactor]] = []  # the runs without a compact record
    by_node: list[tuple[Run, Redactor]] = []  # the runs not stored as one record

    def compact() -> Any:
        for run, red in zip(runs, reds, strict=True):
            record = _compact_record(run, red)
            if record is None:
                rest.append((run, red))
                continue
            yield run.run_id, run.flow, _RUN_STATUS_TEXT[run.status], time.time(), record, None  # (its row's lineage)

    def headers() -> Any:
        for run, red in rest:
            record = _record_blob(run, red)
            dump = _dumper(red, left_out, run.run_id)
            if record is None:
                by_node.append((run, red))
            params = _run_params(run, dump, red, None, shared=True, record=record, values=shared)
            yield (*params, record, None)  # (the lineage is its row's: ``stored_row_lineage``)

    def nodes() -> Any:
        for run, red in by_node:
            dump = _dumper(red, left_out, run.run_id)
            share = shared.for_run(red)
            for rec in run.nodes.values():
                yield _node_params(run, rec, dump, red, share)

    cur.executemany(_COMPACT_RUN_SQL, compact())
    if rest:
        cur.executemany(_WHOLE_RUN_SQL, headers())
    if by_node:
        cur.executemany(_NODE_SQL, nodes())
        shared.flush()
    asked = [(run.run_id,) for run in runs if run.pause_version]  # paused once: questions stored earlier
    if asked:  # (a batch's paused row answered by flow.answer is written again: its question is answered)
        cur.executemany("UPDATE checkpoint_questions SET open=0 WHERE run_id=? AND open=1", asked)
    if any(run.pending for run in runs):
        cur.executemany(
            _QUESTION_SQL,
            (
                (run.run_id, k, dumps(q, red), 1)
                for run, red in zip(runs, reds, strict=True)
                for k, q in run.pending.items()
            ),
        )
    return left_out


def _lineage_text(run: Run, red: Redactor) -> str | None:
    """The finished run's lineage as stored (JSON, redacted); None for a run without its flow or graph."""
    if run._flow is None or run.graph is None or not run.status.finished:
        return None
    try:
        data = run._lineage = run._flow._lineage_of(run)
    except Exception as exc:  # lineage must never lose a row: it says why it is missing
        data = {"error": f"{type(exc).__name__}: {exc}"}
    return lineage_json(redacted(data, red) if red else data)  # (its values; never its node names, ``redacted``)


_STATUS_TEXT = {status: status.value for status in NodeStatus}  # (an Enum's .value is a slow property)
_RUN_STATUS_TEXT = {status: status.value for status in RunStatus}
_COMPACT = 3  # the first item of a compact record (a tuple; a schema 2 record is a dict)
_SUCCEEDED = NodeStatus.SUCCEEDED
_RUN_SUCCEEDED = RunStatus.SUCCEEDED


def _compact_record(run: Run, red: Redactor) -> bytes | None:
    """A whole run as ONE value of built-in data, header included, read straight from the run's columns:
    ``(3, inputs, node names, statuses, outputs, started, finished, ran, given inputs, targets, answers,
    started_at, finished_at, reason, pause_version)``, one list per node field (``ran``: the lean path's one
    attempt, from started to finished; None in ``given``: no inputs). ``statuses`` is one text when every node
    has that status, ``ran`` one bool when it holds for every node. Only for a run whose every node is plain
    (no rare field set, at most the lean attempt: ``Run._plain_nodes``) and whose inputs have no
    secret-looking name; None otherwise (the run is stored by ``_record_blob``, or a row per node). Secrets'
    texts are redacted (``core_bytes``); a secret value (``nf.Secret``) is not built-in data, so such a run
    is stored the other way. Only a SUCCEEDED run is compact (in practice the only one whose nodes are all
    plain); ``_spread_record`` still writes a compact record's header back should one be claimed."""
    if run.status is not _RUN_SUCCEEDED:  # a paused node has its question, a failed one its error: not plain
        return None
    c = run._c
    attempts = c.attempts
    n = len(attempts)
    lean = attempts.count(LEAN)
    if c.cold.count(None) != n or lean + attempts.count(None) != n:
        return None
    given = c.inputs
    if not _plain_names(run.inputs, *filter(None, given)):
        return None  # a secret input by name is stored as a marker: the record path writes it
    statuses = c.status
    if statuses.count(_SUCCEEDED) == n:  # the common run: every output is stored
        texts: Any = "succeeded"
        outputs = c.output
    else:
        texts = [_STATUS_TEXT[s] for s in statuses]
        outputs = [o if s is _SUCCEEDED else None for s, o in zip(statuses, c.output, strict=True)]
    return _values_redacted(
        (
            _COMPACT,
            run.inputs,
            c.names,
            texts,
            outputs,
            c.started,
            c.finished,
            True if lean == n else [a is LEAN for a in attempts],
            given,
            run.targets,
            run.answers,
            run.started_at,
            run.finished_at,
            run.reason,
            run.pause_version,
        ),
        red,
        _COMPACT_VALUES,
    )


# Where a stored record holds values (inputs, outputs, answers, errors...): the places a secret's text is redacted.
# The rest is nbflow's own words (node names, statuses, times, targets), written as they are: a secret whose text
# is also such a word must not make the record unreadable (a redacted status is not a status: CorruptStore).
_COMPACT_VALUES = (1, 4, 8, 10, 13)  # inputs, outputs, given inputs, answers, reason
_ENTRY_VALUES = (2, 4, 5, 6)  # output, error message, traceback, skip reason (and the detail's attempts and inputs)


def _values_redacted(record: tuple[Any, ...], red: Redactor, values: tuple[int, ...]) -> bytes | None:
    """``core_bytes`` of a record with secrets' texts redacted at ``values`` only (a search of the pickle first:
    most records hold none)."""
    data = core_bytes(record)
    if data is None or not red or not red.found_in(data):
        return data
    return core_bytes(tuple(red.scrub(v) if i in values else v for i, v in enumerate(record)))


def _entry_redacted(entry: tuple[Any, ...], red: Redactor) -> tuple[Any, ...]:
    """A node's ``_entry`` with its values redacted, not its name, status or times (``_ENTRY_VALUES``)."""
    attempts, recovered, cached, cache_key, overridden, inputs = entry[9]
    detail = (red.scrub(attempts), recovered, cached, cache_key, overridden, red.scrub(inputs))
    return (*(red.scrub(v) if i in _ENTRY_VALUES else v for i, v in enumerate(entry[:9])), detail)


_PLAIN_NAMES: set[Any] = set()  # input names known not to look like a secret's (``is_secret_name``)


def _plain_names(*groups: Iterable[Any]) -> bool:
    """No name in ``groups`` (the run's inputs, its nodes' recorded inputs: their keys) looks like a secret's (the
    few names of a batch's inputs are judged once)."""
    if all(map(_PLAIN_NAMES.issuperset, groups)):  # (the common run: every name judged already)
        return True
    names = tuple(chain.from_iterable(groups))
    if any(map(is_secret_name, names)):
        return False
    if len(_PLAIN_NAMES) > 4096:
        _PLAIN_NAMES.clear()
    _PLAIN_NAMES.update(names)
    return True


def _compact_nodes(record: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """A compact record's nodes as ``_load`` takes them: the columns of checkpoint_nodes, detail a dict."""
    _, _, names, statuses, outputs, started, finished, ran, given = record[:9]
    n = len(names)
    if type(statuses) is str:
        statuses = [statuses] * n
    if type(ran) is bool:
        ran = [ran] * n
    return [
        (
            name,
            status,
            output if status == "succeeded" else None,
            None,
            None,
            None,
            None,
            t0,
            t1,
            None,
            {
                "attempts": [[1, t0, t1, None, None]] if lean else [],
                "recovered": False,
                "cached": False,
                "cache_key": None,
                "overridden": False,
                "inputs": inputs or {},
            },
        )
        for name, status, output, t0, t1, lean, inputs in zip(
            names, statuses, outputs, started, finished, ran, given, strict=True
        )
    ]


def _record_blob(run: Run, red: Redactor) -> bytes | None:
    """The inputs and every node record of ``run`` as one stored value of built-in data, ``{"inputs": ...,
    "nodes": [the columns of checkpoint_nodes per node, without state, detail as _detail_values]}``
    (secrets redacted as there;
    ``pickling.core_bytes``: loading it runs no code), or None when the record holds anything else (a
    secret's marker, an error object...: then the header's inputs column and a row per node)."""
    nodes = []
    for rec in run._plain_nodes():
        if isinstance(rec, tuple):  # a plain record, from the run's columns (every rare field at its default)
            name, status, output, started, finished, ran, given = rec
            lean = [[1, started, finished, None, None]] if ran else []  # the lean path's one attempt, if it ran
            nodes.append(
                _entry(name, status, output, started, finished, _details(lean, False, False, None, False, given))
            )
            continue
        if rec.items is not None or rec.iterations is not None or rec.subrun is not None:
            return None  # map items, loop iterations and sub-flow runs are objects: a row per node
        nodes.append(
            _entry(
                rec.name,
                rec.status,
                rec.output,
                rec.started_at,
                rec.finished_at,
                _detail_values(rec),
                rec.error_type,
                red(rec.error_message) if rec.error_message is not None else None,
                red(rec.traceback) if rec.traceback is not None else None,
                rec.skip_reason,
            )
        )
    record = {"inputs": _inputs(run), "nodes": nodes}
    data = core_bytes(record)
    if data is None or not red or not red.found_in(data):
        return data
    return core_bytes({"inputs": red.scrub(record["inputs"]), "nodes": [_entry_redacted(e, red) for e in nodes]})


_NO_SECRETS = Redactor()


def _redactor_of(run: Run) -> Redactor:
    texts = secret_texts(run._root.inputs)
    return Redactor(texts) if texts else _NO_SECRETS


def _dumper(red: Redactor, left_out: set[str] | None = None, run_id: str = "") -> Callable[[str, Any], bytes | None]:
    """``dump`` of ``write_whole_run``: a value that cannot be stored is left out (None; ``run_id`` added to
    ``left_out``)."""

    def dump(what: str, value: Any) -> bytes | None:
        try:
            return dumps(value, red)
        except Exception:
            if left_out is not None:
                left_out.add(run_id)
            return None

    return dump


_SHARED: dict[tuple[str, Any], bytes] = {}  # ("targets" | "nodes", value) -> stored bytes (the same for a batch's rows)


def _shared_dump(kind: str, value: Any) -> bytes:
    """The stored bytes of a run's targets or node names (no secrets in them), remembered (up to 256)."""
    key = (kind, value)
    found = _SHARED.get(key)
    if found is None:
        found = dumps(list(value) if kind == "nodes" else value)
        if len(_SHARED) >= 256:
            _SHARED.clear()
        _SHARED[key] = found
    return found


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
        self.closed = False  # close() was called: a paused run's expiry timer leaves it alone
        self.unstorable: dict[str, str] = {}
        """Nodes whose output could not be stored, with why (reported when the run pauses)."""
        # run id -> the gone owner it was loaded with, and its last heartbeat (a claim takes it over from them)
        self._interrupted: dict[str, tuple[str | None, float | None]] = {}
        self._running: set[str] = set()  # runs this process runs, stored RUNNING: their heartbeat (``_beat``)
        self._beat_thread: threading.Thread | None = None
        self._failed: dict[str, StoreError] = {}  # run id -> the write that failed (the run is stopped)
        # Runs whose FAILED state could not be written after a failed write (the file still shows them RUNNING,
        # owned by this process): a resume in this process takes them back from that state (``claim_failed``).
        self._unsaved: set[str] = set()
        self._db = open_db(self.path, timeout)
        try:
            with self._tx():
                ensure_schema(self._db, self.path)
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None
        # Runs may be one record (schema 2); a read-only copy of a schema 1 file has no such column.
        self._record_column = "record" if _has_column(self._db, "checkpoint_runs", "record") else "NULL"
        self._heartbeat_column = "heartbeat" if _has_column(self._db, "checkpoint_runs", "heartbeat") else "NULL"
        self._has_lineage = _has_column(self._db, "checkpoint_runs", "lineage")
        self.identity = FileIdentity(self.path)

    # --- plumbing --------------------------------------------------------------------------------
    def _error(self, exc: sqlite3.Error) -> StoreError:
        return store_error(exc, self.path, self.timeout)

    def _tx(self) -> Transaction:
        return Transaction(self._db, self._lock)

    def _write(self, sql: str, *rows: tuple[Any, ...]) -> int:
        self.identity.check()
        try:
            with self._tx():
                count = 0
                for row in rows:
                    count += self._db.execute(sql, row).rowcount
                return count
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def close(self) -> None:
        self.closed = True
        self._db.close()

    # --- the lease of a running run ----------------------------------------------------------------
    def _lease(self, run_id: str, running: bool) -> None:
        """Count ``run_id`` as run by this process (its heartbeat beats) or not any more."""
        with self._lock:
            if not running:
                self._running.discard(run_id)
                return
            self._running.add(run_id)
            if self._beat_thread is None or not self._beat_thread.is_alive():
                self._beat_thread = threading.Thread(target=self._beat, name="nbflow-checkpoint-lease", daemon=True)
                self._beat_thread.start()

    def _beat(self) -> None:
        """Every ``HEARTBEAT`` seconds, while this process runs runs of this store: their heartbeat is now, so
        that a process on another host sees them alive (``owner_alive``); its own connection, so that a long
        transaction of the run never delays it. Ends with the last running run, or the store."""
        db: sqlite3.Connection | None = None
        try:
            while True:
                time.sleep(_owner.HEARTBEAT)
                with self._lock:
                    ids = list(self._running)
                    if self.closed or not ids:
                        self._beat_thread = None
                        return
                try:
                    db = db or open_db(self.path, self.timeout)
                    now, me = time.time(), owner_token()
                    db.executemany(
                        "UPDATE checkpoint_runs SET heartbeat=? WHERE run_id=? AND owner=?",
                        [(now, run_id, me) for run_id in ids],
                    )
                except (sqlite3.Error, StoreError):
                    pass  # a busy or missing file: the next beat tries again (STALE is several beats)
        finally:
            if db is not None:
                db.close()

    def take_over(self, run: Run) -> None:
        """``force``: count ``run``, loaded RUNNING, as interrupted whoever holds it (a process on another host
        whose heartbeat is still fresh, or one that wrote none); the resume or cancel that follows claims it
        from that owner, as it claims an interrupted run. A run this process is running is refused."""
        try:
            row = self._db.execute(
                f"SELECT status, owner, {self._heartbeat_column} FROM checkpoint_runs WHERE run_id=?", (run.run_id,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        if row is None or row[0] not in ("running", "pending"):
            return  # not RUNNING on disk (any more): the claim that follows sees what it is
        if run.run_id in self._running or (row[1] == owner_token() and owner_alive(row[1])):
            raise ResumeConflictError(
                f"run {run.run_id} is running in this process: force=True takes over a run of another process; "
                f"stop this one with handle.cancel() (or wait for it to pause)"
            )
        self._interrupted[run.run_id] = (row[1], row[2])
        run.status = RunStatus.PAUSED
        run.reason = f"taken over (force=True) from {_who(row[1])}, which held it RUNNING"

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
        owner = owner_token() if run.status in (RunStatus.PENDING, RunStatus.RUNNING) else None
        params = _run_params(run, lambda what, v: self._dump_checked(what, v, red), red, owner)
        self._write(_RUN_SQL, (*params, params[8] if owner else None))  # the heartbeat: the update's time
        self._lease(run.run_id, owner is not None)

    def _dump_checked(self, what: str, value: Any, redactor: Redactor | None = None) -> bytes:
        try:
            return dumps(value, redactor)
        except Exception as exc:
            why = f"{type(value).__name__}: {type(exc).__name__}: {exc}"
            self.unstorable[what] = why
            raise StoreError(f"cannot store {what!r}: {why}") from None

    def save_node(self, run: Run, rec: NodeRecord) -> None:
        red = self._redactor(run)
        self.identity.check()
        try:
            with self._tx():  # the node's values are stored once (``values.py``), in the node's own transaction
                shared = Shared(self._db, red)
                dump = partial(self._dump_checked, redactor=red)
                self._db.execute(_NODE_SQL, _node_params(run, rec, dump, red, shared))
                shared.flush()
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def save_questions(self, run: Run) -> None:
        red = self._redactor(run)
        rows = [(run.run_id, k, dumps(q, red), 1) for k, q in run.pending.items()]
        self.identity.check()
        try:
            with self._tx():
                self._db.execute("UPDATE checkpoint_questions SET open=0 WHERE run_id=?", (run.run_id,))
                for row in rows:
                    self._db.execute(_QUESTION_SQL, row)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def on_event(self, run: Run, event: Event) -> None:
        """The run's subscriber: one transaction per state change of a top-level node or of the run.

        A write that fails stops the run (no new node starts) and ``raise_failure`` fails it: a run
        must never report a state (PAUSED, SUCCEEDED) that is not on disk.
        """
        if run.run_id in self._failed:
            return
        try:
            self._save_event(run, event)
        except Exception as exc:  # disk full, lock held past the timeout, file deleted, unstorable value
            where = f" at node {event.node!r}" if isinstance(event, NodeEvent) else ""
            cause = exc if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
            self._failed[run.run_id] = StoreError(
                f"run {run.run_id}: the checkpoint write{where} failed ({cause}); the run was stopped and is "
                f"FAILED - the store holds it as of the last write that succeeded"
            )
            run._pause_requested = True  # nodes in flight finish, no new node starts

    def raise_failure(self, run: Run) -> None:
        """If a checkpoint write of ``run`` failed: mark the run FAILED (in memory, and on disk if the
        file still takes it) and raise the StoreError naming the node and the cause."""
        error = self._failed.pop(run.run_id, None)
        if error is None:
            return
        run._pause_requested = False
        run.status = RunStatus.FAILED  # whatever it reached in memory: it is not on disk
        run.reason = str(error)
        run.finished_at = run.finished_at or time.time()
        try:
            self.save_run(run)
        except Exception:  # the file is what failed; the error below says so
            self._unsaved.add(run.run_id)
            self._lease(run.run_id, False)  # stopped: it no longer beats
        else:
            self._unsaved.discard(run.run_id)
        raise error

    def _save_event(self, run: Run, event: Event) -> None:
        if isinstance(event, NodeEvent):
            if "." in event.node or not isinstance(
                event, NodeSucceeded | NodeFailed | NodeSkipped | NodeCancelled | NodePaused
            ):
                return  # sub-flow nodes are saved with their sub-flow node's state
            self.save_node(run, run.nodes[event.node])
            return
        if isinstance(event, RunStarted):
            self.save_run(run)  # RUNNING, owned by this process: a crash from here on is recoverable
        elif isinstance(event, RunPaused):
            self.save_questions(run)
            self.save_run(run)
        elif isinstance(event, RunFinished):
            self.save_run(run)
            self.save_lineage(run)

    def save_lineage(self, run: Run) -> None:
        """Which code and data produced the finished run's values (JSON, secrets left out)."""
        if not self._has_lineage or run._root is not run:
            return
        text = _lineage_text(run, self._redactor(run))
        if text is not None:
            self._write("UPDATE checkpoint_runs SET lineage=? WHERE run_id=?", (text, run.run_id))

    # --- resuming --------------------------------------------------------------------------------
    def claim(self, run: Run, key: str | None, answer: Any, *, cancel: bool = False) -> None:
        """Move the stored run from PAUSED to RUNNING (CANCELLED with ``cancel``) if it is still at this
        pause; else conflict."""
        answers = dict(run.answers)
        if key is not None:
            answers[key] = answer
        written = dumps(answers, self._redactor(run))  # an answer may quote a secret (an option built from it)
        gone, beat = self._interrupted.get(run.run_id, ("", None))
        now = time.time()
        self.identity.check()
        try:
            with self._tx():
                self._spread_record(run)
                status = "cancelled" if cancel else "running"
                owner = None if cancel else owner_token()
                if gone != "":  # interrupted: take it over from the process that is gone (if it did not beat since)
                    cur = self._db.execute(
                        "UPDATE checkpoint_runs SET status=?, answers=?, updated_at=?, owner=?, reason=NULL, "
                        f"heartbeat=? WHERE run_id=? AND status IN ('running', 'pending') AND owner IS ? "
                        f"AND {self._heartbeat_column} IS ?",
                        (status, written, now, owner, None if cancel else now, run.run_id, gone, beat),
                    )
                else:
                    cur = self._db.execute(
                        "UPDATE checkpoint_runs SET status=?, answers=?, updated_at=?, owner=?, heartbeat=? "
                        "WHERE run_id=? AND status='paused' AND pause_version=?",
                        (status, written, now, owner, None if cancel else now, run.run_id, run.pause_version),
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
                if cancel:
                    self._db.execute("UPDATE checkpoint_questions SET open=0 WHERE run_id=?", (run.run_id,))
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        self._interrupted.pop(run.run_id, None)
        if not cancel:
            self._lease(run.run_id, True)

    def claim_failed(self, run: Run, again: list[str], kept: Sequence[NodeRecord] = ()) -> None:
        """Move the stored run from FAILED to RUNNING and forget the records of the nodes ``again`` (they
        run again: stored as not run yet, so a crash during this resume is continued like any other);
        ``kept``: the fresh records of those nodes that keep something (a failed map's succeeded items),
        stored instead. Every other finished node is written again as this copy holds it: a run stopped by a
        failed checkpoint write finished nodes whose records never reached the file (the node whose write
        failed, nodes in flight then), and a resume must not go on from what the file lacks. One
        transaction: of two processes resuming the same failed run, one wins, the other conflicts."""
        unsaved = run.run_id in self._unsaved  # its FAILED state never reached the file: RUNNING, owned by us
        now = time.time()
        self.identity.check()
        try:
            with self._tx():
                self._spread_record(run)
                cur = self._db.execute(
                    "UPDATE checkpoint_runs SET status='running', updated_at=?, owner=?, reason=NULL, "
                    "finished_at=NULL, heartbeat=? WHERE run_id=? AND ((status='failed' AND finished_at IS ?) "
                    "OR (? AND status IN ('running', 'pending') AND owner=?))",
                    # the failure this copy saw, or the write of it that failed
                    (now, owner_token(), now, run.run_id, run.finished_at, unsaved, owner_token()),
                )
                if cur.rowcount != 1:
                    raise ResumeConflictError(
                        f"run {run.run_id} was already resumed (the store {str(self.path)!r} no longer has it "
                        f"FAILED as this copy saw it); load it again to see its state"
                    )
                self._db.executemany(
                    "DELETE FROM checkpoint_nodes WHERE run_id=? AND node=?", [(run.run_id, n) for n in again]
                )
                done = [rec for name, rec in run.nodes.items() if name not in again and rec.status.finished]
                if kept or done:
                    red = self._redactor(run)
                    dump = _dumper(red)
                    shared = Shared(self._db, red)
                    self._db.executemany(
                        _NODE_SQL, [_node_params(run, rec, dump, red, shared) for rec in [*done, *kept]]
                    )
                    shared.flush()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        self._unsaved.discard(run.run_id)
        self._lease(run.run_id, True)

    def _spread_record(self, run: Run) -> None:
        """A run stored as one record (``write_whole_runs``) gets a row per node, as the checkpoints of a
        running run update them; inside the caller's transaction, before it claims the run. Its node
        records are the stored ones: ``run`` was loaded from them and nothing changed it yet."""
        red = self._redactor(run)
        # A compact record (schema 3; its ``nodes`` column is NULL) also held the header's values: written back.
        header = (dumps(run.targets), dumps(run.answers, red), run.started_at, dumps(list(run.nodes)))
        later = (red(run.reason) if run.reason is not None else None, run.finished_at, run.pause_version)
        cur = self._db.execute(
            "UPDATE checkpoint_runs SET record=NULL, inputs=?, "
            "targets=CASE WHEN nodes IS NULL THEN ? ELSE targets END, "
            "answers=CASE WHEN nodes IS NULL THEN ? ELSE answers END, "
            "started_at=CASE WHEN nodes IS NULL THEN ? ELSE started_at END, "
            "nodes=CASE WHEN nodes IS NULL THEN ? ELSE nodes END, "
            "reason=CASE WHEN nodes IS NULL THEN ? ELSE reason END, "
            "finished_at=CASE WHEN nodes IS NULL THEN ? ELSE finished_at END, "
            "pause_version=CASE WHEN nodes IS NULL THEN ? ELSE pause_version END "
            "WHERE run_id=? AND record IS NOT NULL",
            (dumps(_inputs(run), red), *header, *later, run.run_id),
        )
        if cur.rowcount == 1:
            dump = _dumper(red)
            shared = Shared(self._db, red)
            self._db.executemany(_NODE_SQL, [_node_params(run, rec, dump, red, shared) for rec in run.nodes.values()])
            shared.flush()

    def _value(self, loads: Callable[[Any], Any], seen: dict[bytes, Any], data: Any) -> Any:
        """A stored column's value; a reference to a value stored once (``values.py``) is read by its key, once
        per load (a frame that was one node's output and the next nodes' input comes back as one object)."""
        if not is_ref(data):
            return loads(data)
        ref = bytes(data)
        if ref not in seen:
            seen[ref] = read_from(loads(Values(self._db, self.path).resolve(ref)), ref)
        return seen[ref]

    def run_ids(self) -> list[tuple[str, str, str]]:
        """(run_id, flow, status) of every stored run, newest first."""
        try:
            rows = self._db.execute(
                "SELECT run_id, flow, status FROM checkpoint_runs ORDER BY updated_at DESC"
            ).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        return [tuple(r) for r in rows]

    def load(self, run_id: str, *, secrets: dict[str, Any] | None = None, allow_pickle: bool = False) -> Run:
        """The stored run ``run_id``; pickled parts without a valid tag of your key need ``allow_pickle``."""
        if not isinstance(run_id, str):
            hint = (
                f" (run_ids() gives (run_id, flow, status) tuples: pass {run_id[0]!r})"
                if isinstance(run_id, tuple) and run_id and isinstance(run_id[0], str)
                else ""
            )
            raise StoreError(f"store {str(self.path)!r}: run_id is the run's id, a str; got {run_id!r}{hint}")
        try:
            run = self._load(run_id, secrets, allow_pickle)
        except UntrustedData as exc:
            raise UntrustedData(f"store {str(self.path)!r}, run {run_id!r}: {exc}") from None
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:  # a field nbflow never writes
            raise garbled(self.path, f"the record of run {run_id!r}", exc) from None
        _check_record(self.path, run)
        return run

    def _load(self, run_id: str, secrets: dict[str, Any] | None, allow_pickle: bool) -> Run:
        loads = partial(_loads, allow_pickle=allow_pickle)
        try:
            head = self._db.execute(
                "SELECT flow, status, pause_version, targets, inputs, answers, started_at, nodes, owner, reason, "
                f"finished_at, {self._heartbeat_column}, {self._record_column} FROM checkpoint_runs "
                "WHERE run_id=?",
                (run_id,),
            ).fetchone()
            if head is None:
                known = ", ".join(r[0] for r in self.run_ids()[:10]) or "none"
                raise StoreError(f"store {str(self.path)!r} has no run {run_id!r}; stored runs: {known}")
            record: Any = loads(head[-1]) if head[-1] is not None else None
            seen: dict[bytes, Any] = {}  # the values stored once read by this load (``_value``)
            compact = type(record) is tuple  # schema 3: the run's header is in its record too
            if compact:
                nodes = _compact_nodes(record)
                value: Callable[[Any], Any] = _as_is
            elif record is not None:  # one record for the whole run (write_whole_runs): its values are decoded
                nodes = [(*node[:9], None, dict(zip(_DETAIL, node[9], strict=True))) for node in record["nodes"]]
                value = _as_is
            else:
                nodes = self._db.execute(
                    "SELECT node, status, output, error_type, error_message, traceback, reason, started_at, "
                    "finished_at, state, detail FROM checkpoint_nodes WHERE run_id=?",
                    (run_id,),
                ).fetchall()
                value = partial(self._value, loads, seen)
            questions = self._db.execute(
                "SELECT key, question FROM checkpoint_questions WHERE run_id=? AND open=1", (run_id,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        flow, status, version, targets, inputs, answers, started_at, names, owner, reason, finished_at, beat, _ = head
        if compact:
            inputs, names = record[1], list(record[2])
            targets, answers, started_at, finished_at, reason, version = record[9:15]
        else:
            targets, answers = loads(targets), loads(answers)
            names = loads(names) if names is not None else []
            if record is not None:
                inputs = record["inputs"]
            elif inputs is not None:
                inputs = _read_inputs(loads(inputs), partial(self._value, loads, seen))
            else:
                inputs = {}
        inputs.update(secrets or {})
        run = Run(flow, run_id, inputs, names)
        run.status = RunStatus(status)
        run.pause_version = version
        run.targets = targets
        run.answers = answers
        run.started_at = started_at
        run.finished_at = finished_at
        run.reason = reason
        if run.status in (RunStatus.PENDING, RunStatus.RUNNING):
            if owner_alive(owner, beat):
                run.status = RunStatus.RUNNING  # resuming it raises ResumeConflictError: it is running elsewhere
            else:
                # Its process is gone (SIGKILL, crashed kernel; on another host: its lease ran out): resumable
                # from the last checkpoint.
                run.status = RunStatus.PAUSED
                stale = f" (no heartbeat for {time.time() - beat:.0f}s)" if owner and beat is not None else ""
                run.reason = (
                    f"interrupted: {_who(owner)} stopped while the run was {status}{stale}; run.resume() continues "
                    f"from the last checkpoint (finished nodes are kept)"
                )
                self._interrupted[run_id] = (owner, beat)
        else:
            self._interrupted.pop(run_id, None)
        for name, st, output, etype, emsg, tb, reason, t0, t1, state, detail in nodes:
            rec = run.nodes.setdefault(name, _record(name))
            rec.status = NodeStatus(st)
            rec.output = value(output) if rec.status is NodeStatus.SUCCEEDED else MISSING
            rec.error = StoredError(etype, emsg) if etype else None
            rec.traceback, rec.skip_reason, rec.started_at, rec.finished_at = tb, reason, t0, t1
            if state is not None:
                extra = loads(state, values=lambda key: value(REF + key.encode()))
                rec.items, rec.iterations, rec.subrun, rec.capped = (
                    extra["items"],
                    extra["iterations"],
                    extra["subrun"],
                    extra["capped"],
                )
                if rec.subrun is not None:
                    _reroot(rec.subrun, run)
            if detail is not None:
                info = value(detail)
                for name in info.get("refs", ()):  # recorded inputs stored once: their keys
                    info["inputs"][name] = value(REF + info["inputs"][name].encode())
                _restore_detail(rec, info)
        for key, q in questions:
            run.pending[key] = loads(q)
        if self._has_lineage:
            stored = self._db.execute("SELECT lineage FROM checkpoint_runs WHERE run_id=?", (run_id,)).fetchone()
            if stored is not None and stored[0]:
                run._lineage = json.loads(stored[0])
            else:  # a batch row's run (``write_whole_runs``): its row holds the lineage
                found = stored_row_lineage(self._db, self.path, run_id)
                if found is not None and found[0] is not None:
                    run._lineage = expanded(self.path, run_id, found[0], found[1], found[2])
        self.track(run, save=False)
        return run


def stored_row_lineage(
    db: sqlite3.Connection, path: str | os.PathLike[str], run_id: str, batch_id: str | None = None
) -> tuple[str | None, dict[str, str | None] | None, dict[str, Any] | None] | None:
    """What a batch store keeps of the lineage of the row that ran ``run_id`` (of ``batch_id``, else of any
    batch): ``(the row's lineage text, its nodes' code versions, its experiment's environment)``, each None when
    not recorded (a row written before nbflow kept it); None when no row ran it, or the file holds no batches;
    a garbled record (``path``: the store's file) is a CorruptStore naming the file.
    ``expanded`` makes a run's lineage of it: the one reader of a stored row's lineage (``df.nbflow.lineage(i)``,
    a kept run loaded from the store)."""
    columns = {r[1] for r in db.execute("PRAGMA table_info(batch_rows)")}
    if not columns:
        return None  # a store of runs alone
    lineage = "r.lineage" if "lineage" in columns else "NULL"  # (a batch store written before rows kept it)
    where = "r.run_id = ?" if batch_id is None else "r.run_id = ? AND r.batch_id = ?"
    try:
        found = db.execute(
            f"SELECT {lineage}, f.nodes, b.meta FROM batch_rows r "
            "LEFT JOIN flow_fingerprints f ON f.fingerprint = r.fingerprint "
            f"LEFT JOIN batches b ON b.batch_id = r.batch_id WHERE {where} ORDER BY {lineage} IS NULL LIMIT 1",
            (run_id,) if batch_id is None else (run_id, batch_id),
        ).fetchone()
    except sqlite3.OperationalError:  # (no fingerprints or batches table: not a batch store nbflow wrote)
        return None
    if found is None:
        return None
    text, nodes, meta = found
    try:
        code = json.loads(nodes) if nodes else None
        env = (json.loads(meta) if meta else {}).get("environment")
    except (ValueError, AttributeError) as exc:
        raise garbled(path, f"the code versions or experiment record of run {run_id!r}", exc) from None
    return text, code if isinstance(code, dict) else None, env if isinstance(env, dict) else None


def expanded(
    path: str | os.PathLike[str], run_id: str, text: str, code: dict[str, str | None] | None, env: dict[str, Any] | None
) -> dict[str, Any]:
    """A batch row's stored lineage (``stored_row_lineage``) as its run's (``nbflow._record.lineage.expand``); a row whose
    lineage could not be made says why (``{"error": ...}``, as a run's)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise garbled(path, f"the lineage of run {run_id!r}", exc) from None
    if not isinstance(data, dict) or "error" in data:
        return data if isinstance(data, dict) else {"error": f"not a lineage: {type(data).__name__}"}
    return expand(data, code, env)


def _check_record(path: Any, run: Run) -> None:
    """The fields a loaded run is shown and resumed with have the kinds nbflow writes (CorruptStore otherwise)."""
    times = [("started_at", run.started_at), ("finished_at", run.finished_at)]
    times += [
        (f"{name}.{f}", getattr(rec, f)) for name, rec in run.nodes.items() for f in ("started_at", "finished_at")
    ]
    for what, value in times:
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            raise garbled(path, f"the record of run {run.run_id!r}", f"{what} is {value!r}, not a time")
    if not isinstance(run.pause_version, int) or isinstance(run.pause_version, bool):
        raise garbled(path, f"the record of run {run.run_id!r}", f"pause_version is {run.pause_version!r}")
    for what, value in (("reason", run.reason), *((f"{n}.reason", r.skip_reason) for n, r in run.nodes.items())):
        if value is not None and not isinstance(value, str):
            raise garbled(path, f"the record of run {run.run_id!r}", f"{what} is {type(value).__name__}, not text")


def _who(owner: str | None) -> str:
    """The process an owner token names, as a person reads it."""
    if not owner:
        return "the process that ran it"
    pid = owner.split(":")[1] if owner.count(":") >= 1 else "?"
    host = owner_host(owner)
    return f"process {pid}" + (f" on host {host!r}" if host != owner_host(owner_token()) else "")


def _as_is(value: Any) -> Any:
    return value


def _peek_value(db: sqlite3.Connection, data: Any) -> Any:
    """``peek`` of a stored column, a reference to a value stored once (``values.py``) read by its key."""
    if is_ref(data):
        try:
            data = Values(db, "(the store)").resolve(bytes(data))
        except StoreError:
            return "<a stored value the file does not hold>"
    return peek(data)


def peek_run(db: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """A stored run as plain data, read without unpickling anything (``pickling.peek``: a pickled value is a
    marker) and without building a ``Run``: what a viewer shows. ``{"status", "reason", "started_at",
    "finished_at", "inputs", "nodes": [{"name", "status", "output", "error_type", "error_message", "traceback",
    "skip_reason", "started_at", "finished_at", "attempts", "inputs"}], "questions": [...]}``; None if the
    file holds no such run (or no checkpoint tables). ``output`` is None unless the node succeeded."""
    try:
        record_column = "record" if _has_column(db, "checkpoint_runs", "record") else "NULL"
        head = db.execute(
            f"SELECT status, inputs, reason, started_at, finished_at, {record_column} FROM checkpoint_runs "
            "WHERE run_id=?",
            (run_id,),
        ).fetchone()
    except sqlite3.OperationalError:  # no checkpoint tables: no run was ever written
        return None
    if head is None:
        return None
    status, inputs, reason, started_at, finished_at, blob = head
    record: Any = peek(blob) if blob is not None else None
    if type(record) is tuple:
        rows = _compact_nodes(record)
        inputs, started_at, finished_at, reason = record[1], record[11], record[12], record[13]
    elif isinstance(record, dict):
        rows = [(*node[:9], None, dict(zip(_DETAIL, node[9], strict=True))) for node in record["nodes"]]
        inputs = record["inputs"]
    else:
        rows = [
            (*r[:9], None, peek(r[9]))
            for r in db.execute(
                "SELECT node, status, output, error_type, error_message, traceback, reason, started_at, "
                "finished_at, detail FROM checkpoint_nodes WHERE run_id=?",
                (run_id,),
            )
        ]
        rows = [(*r[:2], _peek_value(db, r[2]) if record is None else r[2], *r[3:]) for r in rows]
        inputs = peek(inputs) if inputs is not None else {}
        if isinstance(inputs, dict):
            inputs = _read_inputs(inputs, partial(_peek_value, db))
    nodes = []
    for name, st, output, etype, emsg, tb, skip, t0, t1, _state, detail in rows:
        detail = detail if isinstance(detail, dict) else {}
        refs = detail.get("refs") or ()
        if refs and isinstance(detail.get("inputs"), dict):  # recorded inputs stored once: by their keys
            detail["inputs"] = {
                k: _peek_value(db, REF + v.encode()) if k in refs and isinstance(v, str) else v
                for k, v in detail["inputs"].items()
            }
        nodes.append(
            {
                "name": name,
                "status": st,
                "output": output if st == "succeeded" else None,
                "error_type": etype,
                "error_message": emsg,
                "traceback": tb,
                "skip_reason": skip,
                "started_at": t0,
                "finished_at": t1,
                "attempts": detail.get("attempts") or [],
                "inputs": detail.get("inputs") or {},
                "more": {k: v for k, v in detail.items() if k not in _DETAIL},  # what later versions record
            }
        )
    questions = [
        peek(q) for (q,) in db.execute("SELECT question FROM checkpoint_questions WHERE run_id=? AND open=1", (run_id,))
    ]
    return {
        "status": status,
        "reason": reason,
        "started_at": started_at,
        "finished_at": finished_at,
        "inputs": inputs if isinstance(inputs, dict) else {},
        "nodes": nodes,
        "questions": questions,
    }


def _record(name: str) -> NodeRecord:
    return NodeRecord(name)


_DETAIL = ("attempts", "recovered", "cached", "cache_key", "overridden", "inputs")  # the order of _detail_values


def _detail(rec: NodeRecord) -> dict[str, Any]:
    """The parts of a node record the first columns do not hold (secret inputs redacted by name)."""
    return dict(zip(_DETAIL, _detail_values(rec), strict=True))


def _detail_values(rec: NodeRecord) -> tuple[Any, ...]:
    """``_detail``'s values in the order of ``_DETAIL`` (a run's record stores them so: no keys per node)."""
    return _details(
        [_attempt_row(a) for a in rec.attempts],  # JSON when no error
        rec.recovered,
        rec.cached,
        rec.cache_key,
        rec.overridden,
        rec.inputs,
    )


def _attempt_row(a: Any) -> list[Any]:
    """An attempt as stored: number, times, error, delay, then (when any is there) its transcript's calls as
    dicts, what the node printed (already redacted) and its queue wait."""
    row = [a.number, a.started_at, a.finished_at, a.error, a.delay]
    if a.calls or a.output is not None or a.queued is not None:
        row.append([call_dict(c) for c in a.calls] if a.calls else None)
        if a.output is not None or a.queued is not None:
            row += [a.output, a.queued]
    return row


def _details(
    attempts: list[list[Any]],
    recovered: bool,
    cached: bool,
    cache_key: Any,
    overridden: bool,
    inputs: Mapping[str, Any],
) -> tuple[Any, ...]:
    return (attempts, recovered, cached, cache_key, overridden, {k: redact(k, v) for k, v in inputs.items()})


def _entry(
    name: str,
    status: NodeStatus,
    output: Any,
    started: float | None,
    finished: float | None,
    detail: tuple[Any, ...],
    error_type: str | None = None,
    message: str | None = None,
    traceback: str | None = None,
    skip_reason: str | None = None,
) -> tuple[Any, ...]:
    """One node in a run's record: the columns of checkpoint_nodes without state, in their order."""
    return (
        name,
        _STATUS_TEXT[status],
        output if status is NodeStatus.SUCCEEDED else None,
        error_type,
        message,
        traceback,
        skip_reason,
        started,
        finished,
        detail,
    )


def _restore_detail(rec: NodeRecord, detail: dict[str, Any]) -> None:
    from nbflow._record.run import Attempt

    rec.attempts = [
        Attempt(
            n,
            t0,
            t1,
            err,
            delay,
            calls=[Call(**c) for c in more[0]] if more and more[0] else None,
            output=more[1] if len(more) > 1 else None,
            queued=more[2] if len(more) > 2 else None,
        )
        for n, t0, t1, err, delay, *more in detail.get("attempts", ())
    ]
    rec.recovered = bool(detail.get("recovered", False))
    rec.cached = bool(detail.get("cached", False))
    rec.cache_key = detail.get("cache_key")
    rec.overridden = bool(detail.get("overridden", False))
    rec.inputs = detail.get("inputs", {})


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
        if found is not None and found.identity.changed():
            found.close()  # the file was deleted or replaced: open what is at the path now
            found = None
        if found is None:
            found = _STORES[key] = CheckpointStore(key, create=create)
        return found


def load_run(
    store: str | os.PathLike[str] | CheckpointStore,
    run_id: str,
    *,
    secrets: dict[str, Any] | None = None,
    allow_pickle: bool = False,
) -> Run:
    """A stored run back (e.g. after a kernel restart); ``run.resume(answer)`` continues a paused one.

    ``secrets`` passes again the secret inputs, which are never stored. Raises StoreError if the file
    is missing, locked, corrupt, or does not hold ``run_id``, and when a pickled part carries no valid
    tag of your store key (a file someone else wrote): ``allow_pickle=True`` opens it if you trust it.
    """
    return open_store(store, create=False).load(run_id, secrets=secrets, allow_pickle=allow_pickle)
