"""The row engine shared by local and Dask batches: options, live state, running rows, the frame.

``nbflow._batch.api`` (``flow.batch``) and ``nbflow._batch.dask`` (rows on Dask workers) both build on
this module; neither imports the other's private names.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import itertools
import math
import numbers
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

import anyio

from nbflow._batch.breaker import Breaker
from nbflow._batch.cases import OWN_COLUMNS, STATUS_COLUMNS, Case, Cases
from nbflow._batch.columns import FINISHED, QUESTION_COLUMNS, REUSED_COLUMN, clip, json_safe
from nbflow._batch.columns import as_dict as _as_dict
from nbflow._batch.runs import KEEP_LIMIT, RunArchive
from nbflow._core.config import config
from nbflow._core.errors import BatchInterrupted, NbflowWarning, StoreError
from nbflow._core.records import record
from nbflow._core.score import Score
from nbflow._core.secrets import Secret, gate, learn_environment, learn_inputs, secret_texts
from nbflow._core.states import RunStatus
from nbflow._core.usage import ROW, USAGE_COLUMNS, row_usage
from nbflow._engine import logs
from nbflow._engine.caching import SAMPLE
from nbflow._engine.lineage import row_lineage
from nbflow._record.batch_progress import REFRESH, BatchProgress
from nbflow._record.run import Run
from nbflow._store.batch_store import BatchStore, PreparedRow, UnstorableValue

if TYPE_CHECKING:
    import os

    import pandas as pd

    from nbflow._flow.flow import Flow
    from nbflow._graph.graph import Plan

__all__ = [
    "FINISHED",
    "QUESTION_COLUMNS",
    "Fed",
    "Options",
    "State",
    "breaker_error",
    "clip",
    "end_batch",
    "fed_result",
    "finish_partial",
    "outcome",
    "render_progress",
    "result_columns",
    "run_rows",
    "stop_warning",
    "stopped_by",
    "unfinished",
]

# Present when a store write failed: is the row's result in the store (False: in this frame only; resume=True runs
# it again).
STORED_COLUMN = "stored"
# Enum members bound once (a lookup on the class costs ~0.1 µs on Python 3.11, several per row).
_RUN_SUCCEEDED, _RUN_CANCELLED, _RUN_PAUSED = RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.PAUSED


@record()
class Options:
    concurrency: int
    outputs: Iterable[str] | str | None
    flatten: bool
    store: str | os.PathLike[str] | BatchStore | None
    resume: bool | str  # True, False or "strict"
    retry_failed: bool
    batch_id: str | None
    store_secrets: bool
    max_consecutive_failures: int | None
    timeout: float | None
    row_timeout: float | None
    progress: Any
    executor: Any = None  # a dask distributed.Client: rows run on its workers (nbflow/_batch/dask.py)
    chunk_size: int | None = None
    keep: str = "failed"  # which rows keep their full run record: "failed" | "all" | "none" (nbflow/_batch/runs.py)
    keep_limit: int = KEEP_LIMIT
    keep_nodes: frozenset[str] | None = None  # keep=[node, ...]: every row's run, with these nodes' outputs only
    keep_packed: bool = False  # keep= left out, no store: succeeded rows kept packed too (runs.py, config.keep_memory)
    experiment: str | None = None
    notes: str | None = None
    cooldown: float | None = None  # circuit breaker: pause new rows this long instead of stopping
    max_cooldowns: int = 3
    trace: Any = None  # OpenTelemetry spans per row (nbflow/otel.py); None: nbflow.config.trace
    reuse: str | None = None  # another stored batch whose rows (and node outputs) this one reuses (reuse.py)


@record(frozen=True)
class Fed:
    """A stored row run again from its changed nodes (``nbflow/_batch/reuse.py``): the plan of what runs and the
    stored outputs fed in for every other node (overrides, marked ``cached`` with their origin in the record)."""

    plan: Plan
    outputs: dict[str, Any]
    origin: dict[str, str]  # node -> where its output came from ("run:<id>")
    usage: dict[str, Any]  # the stored row's usage columns: what the reused nodes cost when they ran


_ABSENT: Any = object()  # a cell of a column some rows' results do not have (see Results)
_NAN = float("nan")  # a result without the column: NaN, as DataFrame.from_records gives


class Results:
    """The batch's live results: ``results[i]`` is row ``i``'s result as a dict (its case's own columns, then the
    result columns), or None while it has none; ``results[i] = result`` keeps it.

    Kept as one list per result column, not as the dicts: a dict per row (the case's row grown to a dozen keys)
    held until the frame was built was the largest part of a batch's peak beyond the frame (~260 bytes a row
    of 100,000, issue 35). A row costs a slot per column (8 bytes); its values are the frame's own, its case's
    columns are read from the case (never copied), and the frame's columns are these lists (``column``).
    A column only some rows have (a paused row's question, usage, ...) is added when first set."""

    __slots__ = ("_columns", "_done", "_fixed", "_lists", "_names", "_own", "_rows", "_unset")

    def __init__(self, cases: Cases) -> None:
        n = len(cases.cases)
        self._rows = [case.row for case in cases.cases]
        self._own = frozenset(cases.columns)
        # The columns every result has, first (a result without one: NaN there, as DataFrame.from_records gives).
        self._fixed = len(cases.outputs) + len(STATUS_COLUMNS)
        self._columns: dict[str, list[Any]] = {c: [_NAN] * n for c in (*cases.outputs, *STATUS_COLUMNS)}
        self._names = tuple(self._columns)  # (a result made by ``outcome``: these keys, in this order)
        self._lists = tuple(self._columns.values())
        self._unset = n  # rows without a result
        self._done = bytearray(n)

    def __len__(self) -> int:
        return len(self._done)

    def __setitem__(self, i: int, result: Mapping[str, Any]) -> None:
        columns = self._columns
        row = self._rows[i]
        if self._done[i]:  # set again (a row the store failed): a column it no longer has is absent again
            for extra in itertools.islice(columns.values(), self._fixed, None):
                extra[i] = _ABSENT
        else:
            self._done[i] = 1
            self._unset -= 1
        if len(result) == self._fixed and tuple(result) == self._names:  # (most rows: a loop with no look-up)
            for fixed, v in zip(self._lists, result.values(), strict=True):
                fixed[i] = v
            return
        for k, v in result.items():
            col = columns.get(k)
            if col is None:
                if k in row and row[k] is v:  # (the case's own column, as it is)
                    continue
                col = columns[k] = [_ABSENT] * len(self._done)
            col[i] = v

    def __getitem__(self, i: int) -> dict[str, Any] | None:
        if not self._done[i]:
            return None
        out = dict(self._rows[i])
        for k, col in self._columns.items():
            v = col[i]
            if v is not _ABSENT:
                out[k] = v
        return out

    def __iter__(self) -> Iterator[dict[str, Any] | None]:
        return map(self.__getitem__, range(len(self._done)))

    def missing(self) -> list[int]:
        """The rows with no result yet."""
        return [i for i, done in enumerate(self._done) if not done] if self._unset else []

    def statuses(self) -> list[str | None]:
        """Each row's status (None: no result yet), without making its dict."""
        status = self._columns["status"]
        if not self._unset:
            return list(status)
        return [s if done else None for s, done in zip(status, self._done, strict=True)]

    def holds(self, name: str) -> bool:
        """Does some row's result have column ``name`` (beyond its case's own)?"""
        return name in self._columns

    def column(self, name: str, blank: Mapping[str, Any], default: Any = _NAN) -> list[Any]:
        """Column ``name`` for every row, as the frame shows it: a row with no result yet takes ``blank``'s value
        (a pending row's: ``unfinished``), a result without it ``default`` (its case's own column where it has
        one). The list may be the column itself: read it, do not change it."""
        col = self._columns.get(name)
        if name in self._own or col is None:
            own = list(map(dict.get, self._rows, itertools.repeat(name), itertools.repeat(default)))
            return own if col is None else [o if v is _ABSENT else v for v, o in zip(col, own, strict=True)]
        fill = blank.get(name, default)
        done = self._done
        if name not in itertools.islice(self._columns, self._fixed):  # a column only some results have
            col = [default if v is _ABSENT else v for v in col]
            return [v if d else fill for v, d in zip(col, done, strict=True)] if self._unset else col
        return [v if d else fill for v, d in zip(col, done, strict=True)] if self._unset else col


@record()
class State:
    """The batch's live results; the partial frame can be built from it at any moment."""

    flow: Flow
    cases: Cases
    results: Results
    opts: Options
    batch_id: str | None = None
    stopped: str | None = None
    frame: pd.DataFrame | None = None
    running: dict[int, Run] = field(default_factory=dict)
    archive: RunArchive | None = None
    cooldowns: list[dict[str, Any]] = field(default_factory=list)  # circuit breaker pauses, in order
    fingerprint: str | None = None  # the store's id of the flow's per-node fingerprints (rows remember it)
    rerun: dict[str, int] = field(default_factory=dict)  # resume: changed node -> rows it made run again
    not_stored: set[int] = field(default_factory=set)  # finished rows whose store write failed
    fed: dict[int, Fed] = field(default_factory=dict)  # row -> the stored outputs its re-run is fed (reuse.py)
    reused: bool = False  # node-level reuse happened: the frame gets a REUSED_COLUMN
    copied: list[int] = field(default_factory=list)  # rows taken whole from the batch named by reuse= (to store)
    # Set (a Dask worker's rows): each row's lineage, made where the run is (a kept run's record has none).
    lineages: dict[int, str | None] | None = None

    @classmethod
    def new(cls, flow: Flow, cases: Cases, opts: Options) -> State:
        learn_environment()
        for case in cases.cases:  # the rows' secrets (by name, nf.Secret, token shape): redacted at every sink
            learn_inputs(case.inputs, by_name=not opts.store_secrets, environment=False)
        return cls(flow, cases, Results(cases), opts)

    def build(self) -> pd.DataFrame:
        self.frame = _frame(self)
        return self.frame


async def run_rows(
    state: State,
    todo: Sequence[int],
    store: BatchStore | None,
    secret: list[str],
    progress: BatchProgress,
    renderer: Any,
) -> None:
    flow, cases, opts = state.flow, state.cases, state.opts
    graph = flow.graph
    results = state.results
    pending = iter(todo)
    breaker = Breaker(state, progress, flow._clock)
    row_timeout = opts.row_timeout
    loop = asyncio.get_running_loop()
    prefix = uuid.uuid4().hex[:8]  # run ids: "<batch call>-<row index>", unique and cheap
    archive = state.archive
    lineages = state.lineages
    # Succeeded rows packed (runs.py): keep= left out, so the policy itself keeps none of them whole.
    pack = archive.keep_succeeded if archive is not None and archive.budget is not None else None
    if pack is not None and archive is not None and archive.wants("succeeded"):
        pack = None
    if archive is not None:
        archive.register(prefix)
        archive.graph = graph
        archive.outputs = frozenset(cases.outputs)
    trace_row = None
    if opts.trace is not None or config.trace is not None:  # off: not even an import
        from nbflow.otel import row_attacher

        trace_row = row_attacher(opts.trace, state.batch_id, cases.grid_keys, secret)

    # Resolved once per batch, not per row: the row's path is flow.arun's after its checks (the batch
    # checked and planned every row up front).
    execute_row = flow._row_executor(graph)
    kept_nodes = None  # keep=[node, ...]: the other nodes' outputs are dropped (the row's columns are kept)
    if opts.keep_nodes is not None:
        from nbflow._engine.keep import attach_keep

        kept_nodes = opts.keep_nodes | frozenset(cases.outputs)
    flow_name = flow.name
    all_cases = cases.cases
    outputs = cases.outputs
    running = state.running
    sampled = any(c.sample is not None for c in all_cases)  # repeats=N (Dask workers get the cases alone)
    has_process = any(g.spec.options.get("executor") == "process" for g in graph.nodes.values())
    log_rows = logs.BATCH.isEnabledFor(logs.logging.DEBUG) or logs.NODE.isEnabledFor(logs.logging.INFO)
    fed_rows = state.fed  # resumed rows re-run from their changed nodes (reuse.py): stored outputs fed in
    no_outputs: dict[str, Any] = {}

    async def worker() -> None:
        # This worker task's context: the keys of cache="per-sample" nodes (set per row with repeats=N).
        SAMPLE.set(None)
        while True:
            admitted = True if breaker.flowing() else await breaker.admit()  # waits while cooling down
            if not admitted:
                return
            i = next(pending, None)
            if i is None:
                breaker.release(admitted)
                return
            case = all_cases[i]
            progress.in_flight += 1
            used: list[tuple[Any, Any]] = []
            ROW.set(used)  # nf.usage() inside the row's nodes adds here
            fed = fed_rows.get(i) if fed_rows else None
            plan = case.plan if fed is None else fed.plan
            run = Run(flow_name, f"{prefix}-{i}", case.inputs, plan.nodes)
            if fed is not None:
                run.reused = fed.origin
            run.graph = graph
            run._flow = flow  # a kept row's run resumes (flow.answer) and displays through its flow
            if sampled:
                SAMPLE.set(case.sample)
            if kept_nodes is not None:  # (with a store: the dropped outputs' data versions stay, for the lineage)
                attach_keep(run, graph, kept_nodes, versions=opts.store is not None)
            if trace_row is not None:
                trace_row(run, case)
            if log_rows:
                run.subscribe(logs.RunLogger(run, row=True))
            running[i] = run  # left there if cancelled: the partial frame reads it
            timed_out = False
            try:
                fed_outputs = no_outputs if fed is None else fed.outputs
                if row_timeout is None:
                    await execute_row(plan, run, case.inputs, fed_outputs)
                else:
                    try:
                        async with asyncio.timeout(row_timeout):
                            await execute_row(plan, run, case.inputs, fed_outputs)
                    except TimeoutError:
                        timed_out = True
            finally:
                progress.in_flight -= 1
            del running[i]
            # (the result columns alone: ``Results`` reads the case's own columns from the case, and a stored row
            # gets them in the group commit)
            result = _result(case, run, outputs, timeout=row_timeout if timed_out else None, whole=False)
            if has_process and result["latency"] is not None:  # a wait for a process worker is not latency
                result["latency"] = max(0.0, result["latency"] - queue_time(run))
            if used:
                result.update(row_usage(used))
            if fed is not None:
                fed_result(result, fed, state.reused)
            results[i] = result
            status = result["status"]
            if pack is not None and status == "succeeded":  # (no store here)
                kept = on_disk = False
                pack(run, i)
            else:
                kept = archive is not None and archive.wants(status)
                # With a store, a succeeded row's kept run is held in memory only if the store could not take
                # it whole (decided once written, below): df.nbflow.run(i) reads it back from the store.
                on_disk = kept and group is not None and status == "succeeded"
                if archive is not None and kept and not on_disk:
                    archive.offer(run, status)
            if lineages is not None:  # (a Dask worker's rows: made where the run is; a kept run's record has none)
                lineages[i] = row_lineage(run)
            store_failed = None
            if group is not None:  # on disk before this worker takes a new row (see GroupCommit)
                # Nothing of the finished run stays alive across the wait for the commit (unless kept): objects
                # that outlive a loop turn get promoted by the GC and make later collections, full ones too,
                # more frequent (measured: most of what a store cost per row).
                kept_run = run if kept else None
                lineage = row_lineage(run)  # (also a kept run's: its record is written without it, docs/lineage.md)
                run = None  # type: ignore[assignment]
                commit = group.write(i, result, kept_run, lineage)
                failed = await commit
                if result["error_type"] == "StoreError":  # a value the store cannot hold failed the row (prepare_row)
                    status = result["status"]
                    results[i] = result  # (then the result says so)
                if on_disk:
                    assert kept_run is not None and archive is not None
                    stored = failed is None and kept_run.run_id not in commit.left_out
                    archive.offer(kept_run, status, stored=stored)
                kept_run = None
                if failed is not None:
                    store_failed = _store_failed(i, failed)
                    state.not_stored.add(i)
            if status == "succeeded":
                progress.succeeded += 1
                ok = True
            elif status == "paused":
                progress.paused += 1
                ok = True  # a paused row waits for a person: no failure
            else:
                progress.failed += 1
                ok = False
            if store_failed is not None and state.stopped is None:
                state.stopped = store_failed
            breaker.finished(ok, admitted, "" if ok else breaker_error(result, case.inputs))

    async def refresh() -> None:
        # Also wakes the loop 4x/s, which keeps a kernel interrupt prompt (ipykernel #881).
        while True:
            await asyncio.sleep(REFRESH)
            if renderer is not None:
                render_progress(renderer, "update", progress)

    group = GroupCommit(store, state, secret) if store is not None else None
    n_workers = min(opts.concurrency, len(todo))
    _ease_gc()
    tasks = [loop.create_task(worker()) for _ in range(n_workers)]
    refresher = loop.create_task(refresh())
    try:
        if tasks:
            done, _ = await asyncio.wait(tasks, timeout=opts.timeout, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                error = None if t.cancelled() else t.exception()
                if error is not None:
                    raise error
            if len(done) < len(tasks):
                state.stopped = f"timeout: the batch did not finish within {opts.timeout}s"
                await _cancel(tasks)
    except BaseException as exc:
        _restore_gc()
        await _cancel([*tasks, refresher, *breaker.tasks()])
        outcome = stopped_by(exc, state, progress, renderer, flow.name)
        if outcome is exc:
            raise
        raise outcome from exc
    _restore_gc()
    await _cancel([refresher, *breaker.tasks()])
    end_batch(state, progress, renderer, state.stopped)
    stop_warning(state, store is not None)


# While rows run, the collector's youngest generation is collected every ``_GC_GEN0`` net allocations
# instead of Python's 700. A batch keeps ``concurrency`` runs alive across each await (their records,
# tasks, futures), and a young collection walks all of them while they wait: at 250 rows in flight that
# was ~11 µs of CPU per row (~10%), 1-2 µs with 5,000 (benchmarks/batch_throughput.py --shape sync).
# Garbage with cycles is still collected, a little later; batches running at the same time share one
# setting, put back when the last of them ends (unless someone changed it meanwhile).
_GC_GEN0 = 5_000
_gc_saved: list[tuple[int, int, int]] = []  # the threshold before the first running batch eased it
_gc_users = [0]
_gc_lock = threading.Lock()  # batches may run on several threads' loops at once


def _ease_gc() -> None:
    """Raise the young generation's threshold while this batch runs (``_restore_gc`` once it ends)."""
    with _gc_lock:
        _gc_users[0] += 1
        if _gc_users[0] == 1:
            current = gc.get_threshold()
            _gc_saved[:] = [current]
            if 0 < current[0] < _GC_GEN0:  # (0: the collector is off by threshold; left alone)
                gc.set_threshold(_GC_GEN0, current[1], current[2])


def _restore_gc() -> None:
    with _gc_lock:
        _gc_users[0] -= 1
        if _gc_users[0] == 0 and _gc_saved:
            saved = _gc_saved.pop()
            now = gc.get_threshold()
            if now[0] == _GC_GEN0 and now[1:] == saved[1:]:  # not changed by anyone else meanwhile
                gc.set_threshold(*saved)


def save_row(
    store: BatchStore,
    state: Any,
    i: int,
    result: dict[str, Any],
    secret: list[str],
    *,
    secrets: tuple[str, ...] = (),
    run: Run | None = None,
    lineage: str | None = None,
) -> str | None:
    """Write finished row ``i``; a value the store cannot hold fails that row (the batch goes on).

    Returns why the batch must stop when the file itself cannot be written (locked past the store's
    ``lock_wait``, disk full, deleted): then, like the circuit breaker, the batch ends with its partial
    frame (the row is in it) and ``frame.attrs["stopped"]`` names the StoreError.
    """
    try:
        store.write_rows([prepare_row(store, state, i, result, secret, secrets=secrets, run=run, lineage=lineage)])
    except StoreError as exc:
        return _store_failed(i, exc)
    return None


def prepare_row(
    store: BatchStore,
    state: Any,
    i: int,
    result: dict[str, Any],
    secret: list[str],
    *,
    secrets: tuple[str, ...] = (),
    run: Run | None = None,
    lineage: str | None = None,
    case_row: Mapping[str, Any] | None = None,
) -> PreparedRow:
    """Row ``i`` encoded for the store; a value the store cannot hold fails the row (``result`` says so).

    ``case_row``: the case's own columns, stored before ``result``'s (a worker's result holds the result columns
    alone); a column failed here that is one of them is then set to None in ``result`` too."""
    assert state.batch_id is not None
    batch_id, key = state.batch_id, state.cases.cases[i].key
    data = result if case_row is None else {**case_row, **result}

    def prepare() -> PreparedRow:
        return store.prepare_row(
            batch_id,
            i,
            data["run_id"],
            data["status"],
            data,
            secret_columns=secret,
            secrets=secrets,
            run=run,
            key=key,
            fingerprint=state.fingerprint,
            lineage=lineage,
            own=OWN_COLUMNS,
        )

    try:
        return prepare()
    except UnstorableValue as exc:
        column = exc.column
        node = column if column in state.cases.outputs else data.get("error_node")
        failed = {
            column: None,
            "status": "failed",
            "error_type": "StoreError",
            "error_message": f"row {i}: the output of node {node!r} cannot be stored in {store.path!r}: {exc}",
            "error_node": node,
        }
        data.update(failed)
        if data is not result:
            result.update(failed)
        return prepare()


def queue_time(run: Run) -> float:
    """Seconds during which the run's nodes only waited for a process worker (none of them running).

    Process nodes' ``attempt.queued`` waits, less the times another node of the run ran meanwhile."""
    waiting: list[tuple[float, float]] = []
    running: list[tuple[float, float]] = []
    for rec in run.nodes.values():
        for a in rec.attempts:
            if a.finished_at is not None:
                running.append((a.started_at, a.finished_at))
            if a.queued:
                waiting.append((a.started_at - a.queued, a.started_at))
    if not waiting:
        return 0.0
    points = sorted({t for span in waiting + running for t in span})
    total = 0.0
    for lo, hi in itertools.pairwise(points):
        mid = (lo + hi) / 2
        if any(a <= mid < b for a, b in waiting) and not any(a <= mid < b for a, b in running):
            total += hi - lo
    return total


def fed_result(result: dict[str, Any], fed: Fed, column: bool = True) -> None:
    """A re-run row's result: the nodes it reused (``REUSED_COLUMN``); its usage columns add this run's calls to
    the stored row's (what the row's values cost in all, not only this call)."""
    if column:  # (not when the rows have a column of that name: theirs is kept)
        result[REUSED_COLUMN] = sorted(fed.outputs)
    for col, value in fed.usage.items():
        now = result.get(col)
        if isinstance(value, int | float) and not isinstance(value, bool):
            result[col] = value + now if isinstance(now, int | float) and not isinstance(now, bool) else value


def _store_failed(i: int, exc: StoreError) -> str:
    logs.STORE.warning("row %d could not be written, so the batch stops: %s", i, exc)
    return f"StoreError: row {i} could not be written, so the batch stopped: {exc}"


class GroupCommit:
    """Rows that finish in the same turn of the loop are written in one transaction (group commit).

    ``await write(i, result, run)`` returns once row ``i`` is on disk (else the StoreError why the batch must stop).
    The worker that finished it starts no new row before then, so a process killed at any moment loses at most
    the rows in flight, as with a transaction per row: a finished row not yet committed still holds
    its worker. One transaction costs ~30-50 µs of CPU whatever its size, so under load (many rows
    finishing together) the per-row cost drops to the encoding alone. The write runs on the loop's
    thread, once per loop turn, after every row of that turn has joined; the rows are encoded there too, in
    one loop (``_prepared``: ~2-3 µs a row less than a call chain per row).

    The rows of a group share one ``_Commit`` (the write is all or nothing): per row only the queued row
    waits, which matters because whatever outlives a loop turn is promoted by the garbage collector.
    """

    def __init__(self, store: BatchStore, state: State, secret: list[str]) -> None:
        self.store = store
        self.state = state
        self.secret = secret
        self.loop = asyncio.get_running_loop()
        self.rows: list[tuple[int, dict[str, Any], Run | None, str | None]] = []
        self.done: _Commit | None = None

    def write(self, i: int, result: dict[str, Any], run: Run | None, lineage: str | None = None) -> _Commit:
        """Queue finished row ``i`` (``run``: its record too, when kept; ``lineage``: the row's) for this turn's
        commit; await the result:
        None once on disk, else the StoreError. A value the store cannot hold fails the row (``result`` says so)."""
        done = self.done
        if done is None:
            done = self.done = _Commit(loop=self.loop)
            self.loop.call_soon(self.flush)
        self.rows.append((i, result, run, lineage))
        return done

    def flush(self) -> None:
        rows, done = self.rows, self.done
        self.rows, self.done = [], None
        if done is None:
            return
        try:
            done.left_out = self.store.write_rows(self._prepared(rows))
        except StoreError as exc:
            done.settle(exc)
        except Exception as exc:  # an nbflow bug: the waiting workers raise it (the batch fails loudly)
            done.settle(exc)
        except BaseException as exc:  # an interrupt inside the write: the rows count as not written
            done.settle(StoreError(f"the write was interrupted ({type(exc).__name__})"))
            raise
        else:
            done.settle(None)

    def _prepared(self, rows: list[tuple[int, dict[str, Any], Run | None, str | None]]) -> list[PreparedRow]:
        """The queued rows encoded (``prepare_row``), the common row (no secret, plain cells) by the store's fast path."""
        store, state, secret = self.store, self.state, self.secret
        by_name = bool(secret)
        cases = state.cases.cases
        batch_id, fingerprint = state.batch_id, state.fingerprint
        assert batch_id is not None
        plain = store.plain_row
        out = []
        for i, result, run, lineage in rows:
            case = cases[i]
            secrets = secret_texts(case.inputs, by_name=by_name)
            row = (
                None
                if secrets or secret
                else plain(
                    batch_id,
                    i,
                    result["run_id"],
                    result["status"],
                    {**case.row, **result},  # (its own columns, then the result's)
                    case.key,
                    fingerprint,
                    run,
                    lineage,
                )
            )
            out.append(
                row
                or prepare_row(
                    store, state, i, result, secret, secrets=secrets, run=run, lineage=lineage, case_row=case.row
                )
            )
        return out


_PENDING: Any = object()  # a commit not written yet
_NONE_LEFT_OUT: set[str] = set()  # (shared, never changed)


class _Commit:
    """A group's commit, awaited by every worker whose row is in it: None once written, else the StoreError.

    Awaiting it costs a worker one loop turn and no future: ``write`` queued the flush (``call_soon``) before
    any of the group's workers yielded, so on asyncio's first-in-first-out ready queue the flush runs before
    their next steps (~0.6 µs a row less than a future's callbacks). Should a worker still find it pending,
    it waits for the flush on a future. A cancelled worker cannot cancel the commit (the others still wait
    for it): that worker is cancelled once the commit is done, at its next step."""

    __slots__ = ("future", "left_out", "loop", "outcome")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.outcome: StoreError | Exception | None = _PENDING
        self.future: _Uncancellable | None = None
        self.left_out: set[str] = _NONE_LEFT_OUT  # the runs written with a value left out (write_whole_runs)

    def settle(self, outcome: StoreError | Exception | None) -> None:
        self.outcome = outcome
        if self.future is not None:
            self.future.set_result(None)

    def __await__(self) -> Any:
        if self.outcome is _PENDING:
            yield  # (a bare yield: the task steps again in the next loop turn, after the flush)
            if self.outcome is _PENDING:  # a loop that ran this step first: wait for the flush itself
                if self.future is None:
                    self.future = _Uncancellable(loop=self.loop)
                yield from self.future.__await__()
        outcome = self.outcome
        if outcome is not None and not isinstance(outcome, StoreError):
            raise outcome  # an nbflow bug inside the write: every waiting worker raises it (the batch fails loudly)
        return outcome


class _Uncancellable(asyncio.Future[None]):
    """A future its waiters cannot cancel (``_Commit``'s fallback): a cancelled waiter is cancelled once it is done."""

    def cancel(self, msg: Any = None) -> bool:
        return False


def end_batch(state: Any, progress: Any, renderer: Any, stopped: str | None) -> None:
    """Close a batch that stopped for any reason: the frame gets every row, the progress its end."""
    progress.stopped = stopped
    progress.finished_at = progress.clock()
    finish_partial(state)
    if renderer is not None:
        render_progress(renderer, "close", progress)


def stopped_by(exc: BaseException, state: Any, progress: Any, renderer: Any, flow_name: str) -> BaseException:
    """End a batch stopped by ``exc``; what to raise: a BatchInterrupted carrying the frame for an interrupt."""
    end_batch(state, progress, renderer, "interrupted" if isinstance(exc, KeyboardInterrupt) else "cancelled")
    if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, BatchInterrupted):
        assert state.frame is not None
        return BatchInterrupted(state.frame, flow_name)
    return exc


def stop_warning(state: State, stored: bool) -> None:
    lost = ""
    if state.not_stored:  # (a failed write always stops the batch: said in the same warning)
        rows = sorted(state.not_stored)
        shown = ", ".join(map(str, rows[:10])) + (" ..." if len(rows) > 10 else "")
        lost = (
            f"; {len(rows)} finished row(s) could not be written to the store (positions {shown}): they are in "
            f"this frame with stored=False, not on disk, and resume=True runs them again"
        )
    if state.stopped is not None:
        left = sum(1 for status in state.results.statuses() if status in ("pending", "cancelled"))
        fix = "fix the cause and run again" + (" with resume=True" if stored else "")
        warnings.warn(
            f"batch of flow {state.flow.name!r} stopped early, {state.stopped}; {left} rows were not finished "
            f"(status 'pending' or 'cancelled', see frame.attrs['stopped']){lost}; {fix}",
            NbflowWarning,
            stacklevel=4,
        )


def render_progress(renderer: Any, method: str, progress: BatchProgress) -> None:
    try:
        getattr(renderer, method)(progress)
    except Exception as exc:  # a broken display must never break the batch
        warnings.warn(
            f"batch progress display {renderer!r} raised {type(exc).__name__}: {exc}", NbflowWarning, stacklevel=2
        )


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for t in tasks:
        t.cancel()
    # Shielded (anyio: its scopes re-deliver cancellation at every await): our own task may be the
    # one being cancelled, and the rows must still be wound down before the frame is built.
    pending = [t for t in tasks if not t.done()]
    if pending:
        with anyio.CancelScope(shield=True):
            await asyncio.wait(pending)
    for t in tasks:  # retrieve exceptions so asyncio does not log them as never retrieved
        if t.done() and not t.cancelled():
            t.exception()


def finish_partial(state: State) -> None:
    """Fill in rows that did not finish and build the frame (kept on the flow, too)."""
    cases = state.cases
    for i in state.results.missing():
        case = cases.cases[i]
        run = state.running.get(i)
        if run is not None:  # still marked running: cancelled mid-way, keep what its nodes produced
            state.results[i] = _result(case, run, cases.outputs, status="cancelled")
        else:
            state.results[i] = unfinished(case, cases.outputs, state.stopped)
    state.build()
    state.flow.last_batch = state.frame


def _result(
    case: Case,
    run: Run,
    outputs: list[str],
    status: str | None = None,
    timeout: float | None = None,
    whole: bool = True,
) -> dict[str, Any]:
    """Row ``case``'s result from its run: its own columns and ``outcome``'s (``whole=False``: ``outcome``'s only,
    where nothing reads the row's own columns from it: ``Results`` reads them from the case)."""
    # (a copy: the case's row stays as given; the result lives as long as the row's worker needs it, then
    # ``Results`` keeps its values, not the dict)
    return _outcome_into(case.row.copy() if whole else {}, run, outputs, status, timeout)


def outcome(run: Run, outputs: list[str], status: str | None = None, timeout: float | None = None) -> dict[str, Any]:
    """A row's result columns from its run: outputs, status, error columns, attempts, latency, run id."""
    return _outcome_into({}, run, outputs, status, timeout)


def _outcome_into(
    row: dict[str, Any], run: Run, outputs: list[str], status: str | None, timeout: float | None
) -> dict[str, Any]:
    """``outcome``'s columns added to ``row`` (a batch row's own columns), in the frame's column order."""
    values, failed, attempts = run._summary(outputs)
    for o, value in zip(outputs, values, strict=True):
        row[o] = value
    if status is None:
        rs = run.status
        if timeout is not None:
            status = "failed"
        elif rs is _RUN_SUCCEEDED:
            status = "succeeded"
        elif rs is _RUN_CANCELLED:
            status = "cancelled"
        elif rs is _RUN_PAUSED:
            status = "paused"
        else:
            status = "failed"
    row["status"] = status
    if failed is not None:
        row["error_type"] = failed.error_type
        row["error_message"] = failed.error_message
        row["error_node"] = failed.name
    elif timeout is not None:
        row["error_type"] = "TimeoutError"
        row["error_message"] = f"the row did not finish within row_timeout={timeout}s"
        row["error_node"] = next(
            (r.name for r in run.nodes.values() if r.skip_reason and r.skip_reason.startswith("run cancelled while")),
            None,
        )
    else:
        row["error_type"] = row["error_message"] = row["error_node"] = None
    row["attempts"] = attempts
    row["latency"] = run.duration
    row["run_id"] = run.run_id
    if status == "paused" and run.pending:
        question = next(iter(run.pending.values()))
        row["question_prompt"] = (
            question.prompt
            if len(run.pending) == 1
            else f"{len(run.pending)} questions: " + ("; ".join(q.prompt for q in run.pending.values()))
        )
        row["question_options"] = list(question.options) if question.options is not None else None
    return row


def unfinished(case: Case, outputs: list[str], reason: str | None) -> dict[str, Any]:
    row = dict(case.row)
    for o in outputs:
        row[o] = None
    row.update(
        status="pending", error_type=None, error_message=None, error_node=None, attempts=0, latency=None, run_id=None
    )
    return row


def result_columns(cases: Cases) -> list[str]:
    return [*cases.columns, *cases.outputs, *STATUS_COLUMNS]


# Python types whose homogeneous columns are built as numpy arrays: pandas' own inference of a list of
# ints costs ~6x numpy's conversion (~360 vs ~60 µs per 2,500 values), for the same int64/float64/bool
# column. Exact types only: a mix (1 and True) or a subclass goes to pandas' inference, as before.
_NUMPY_DTYPES = {int: "int64", float: "float64", bool: "bool"}
_NONE = type(None)
_TEXT: list[Callable[[list[str]], Any] | None] = []  # see _text_dtype


def _text_dtype() -> Callable[[list[str]], Any] | None:
    """How a column of ``str`` alone is built as the type pandas itself infers for it (pandas 3: its ``str``
    dtype; ``pd.array`` with it costs ~half of the frame's own inference), or None where pandas keeps such
    a column ``object`` (pandas 2): then the frame infers it as before."""
    if not _TEXT:
        import numpy as np
        import pandas as pd

        dtype = pd.Series(["a"]).dtype
        _TEXT.append(None if isinstance(dtype, np.dtype) else functools.partial(pd.array, dtype=dtype))
    return _TEXT[0]


def _data(get: Callable[[str], list[Any]], columns: list[str], inputs: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The frame's columns from each one's values (``get``), what ``DataFrame.from_records`` would build of the
    rows, built faster; and the input columns holding an ``nf.Secret``: those stay object columns, since a
    string column would make their values plain ``str`` and what shows the frame (``nf.explore``) could no
    longer tell them apart."""
    import numpy as np

    data: dict[str, Any] = {}
    secret: list[str] = []
    text = _text_dtype()
    for c in columns:
        values = get(c)
        kinds = set(map(type, values))
        if len(kinds) == 1:
            kind = next(iter(kinds))
            dtype = _NUMPY_DTYPES.get(kind)
            if dtype is not None:
                try:
                    data[c] = np.array(values, dtype=dtype)
                    continue
                except OverflowError:  # an int beyond int64: pandas decides (uint64 or object)
                    pass
            elif kind is _NONE:  # (an error column of a batch without errors): what pandas makes of it
                data[c] = np.full(len(values), None, dtype=object)
                continue
            elif kind is str and text is not None:  # (status, run ids)
                data[c] = text(values)
                continue
        if c in inputs and any(issubclass(k, Secret) for k in kinds):
            secret.append(c)
            data[c] = np.array(values, dtype=object)
            continue
        data[c] = values
    return data, secret


# The result columns of a row with no result (``unfinished``'s), as the frame shows it.
_BLANK = {
    "status": "pending",
    "error_type": None,
    "error_message": None,
    "error_node": None,
    "attempts": 0,
    "latency": None,
    "run_id": None,
}


def _frame(state: State) -> pd.DataFrame:
    import pandas as pd

    cases = state.cases
    results = state.results
    columns = result_columns(cases)
    blank = {**dict.fromkeys(cases.outputs), **_BLANK}
    statuses = results.column("status", blank)
    made: dict[str, list[Any]] = {}  # columns made here rather than read from the results
    if "paused" in statuses:
        columns = [*columns, *QUESTION_COLUMNS]
    if state.not_stored:  # a store write failed: which rows are on disk
        columns = [*columns, STORED_COLUMN]
        not_stored = state.not_stored
        made[STORED_COLUMN] = [k not in not_stored and s in FINISHED for k, s in enumerate(statuses)]
    if state.reused and REUSED_COLUMN not in columns:  # which nodes each row reused (a fresh row: none)
        columns = [*columns, REUSED_COLUMN]
        made[REUSED_COLUMN] = [[] if v is _ABSENT else v for v in results.column(REUSED_COLUMN, blank, _ABSENT)]
    if results.holds(USAGE_COLUMNS[0]) or USAGE_COLUMNS[0] in cases.columns:  # some node reported usage
        columns += USAGE_COLUMNS  # every finished row counts
        for u in USAGE_COLUMNS:
            made[u] = [
                v if v is not _ABSENT else 0 if s in FINISHED else _NAN
                for v, s in zip(results.column(u, blank, _ABSENT), statuses, strict=True)
            ]
    if len(results):
        data, secret = _data(
            lambda c: made[c] if c in made else statuses if c == "status" else results.column(c, blank),
            columns,
            cases.columns,
        )
        frame = pd.DataFrame(data, columns=columns, copy=False)  # (the columns were made here for it)
        for c in secret:
            frame[c] = pd.Series(data[c], index=frame.index, dtype=object)
    else:
        frame = pd.DataFrame(columns=columns)
    if cases.index is not None:
        frame.index = cases.index
    if "attempts" in frame and frame["attempts"].dtype != "int64":  # (a copy of the column otherwise)
        frame["attempts"] = frame["attempts"].astype("int64")
    if "latency" in frame and frame["latency"].dtype != "float64":
        frame["latency"] = frame["latency"].astype("float64")
    frame = split_scores(frame, cases.outputs)
    if state.opts.flatten:
        frame = _flatten(frame, cases.outputs)
    # Most frequent first, ties in the order first seen: as ``frame["status"].value_counts()``, ~10x faster.
    counts = dict(sorted(collections.Counter(statuses).items(), key=lambda kv: -kv[1]))
    variants = {k: dict(v) for k, v in cases.variants.items()}
    attrs_variants = json_safe(variants)
    frame.attrs.update(
        {
            "flow": state.flow.name,
            "batch_id": state.batch_id,
            "outputs": list(cases.outputs),
            "grid": list(cases.grid_keys),
            # (values JSON cannot hold by their repr: pandas writes attrs into parquet as JSON)
            "variants": attrs_variants,
            "repeats": cases.repeats,
            "experiment": state.opts.experiment,
            "stopped": state.stopped,
            "cooldowns": list(state.cooldowns),
            "counts": {str(k): int(v) for k, v in counts.items()},
        }
    )
    if cases.variants and variants is attrs_variants:  # JSON holds them: a re-fed frame may take them as they are
        frame.attrs["variants_exact"] = True
    if state.archive is not None:
        state.archive.variants = cases.variants  # the real values, for this frame's rows re-fed in this process
        frame.attrs["nbflow_runs"] = state.archive
        state.archive.held_by(frame)
        if state.archive.store:
            frame.attrs["store"] = state.archive.store
    return frame


def split_scores(frame: pd.DataFrame, outputs: Sequence[str]) -> pd.DataFrame:
    """Each output column of ``nf.Score`` values becomes the values (the column: what ``nf.summarize`` reads)
    followed by ``<node>.explanation`` and a ``<node>.<key>`` column per key of the scores' ``details``."""
    found = [
        o
        for o in outputs
        if o in frame.columns
        and frame[o].dtype == object
        and any(isinstance(v, Score) for v in frame[o])
        and all(isinstance(v, Score) or v is None or (isinstance(v, float) and math.isnan(v)) for v in frame[o])
    ]
    if not found:
        return frame
    import pandas as pd

    # (a frame loaded from a store lists these columns already, empty: its rows hold the Scores)
    made = {f"{o}.explanation" for o in found} | {
        f"{o}.{k}" for o in found for v in frame[o] if isinstance(v, Score) for k in v.details
    }
    frame = frame.drop(columns=[c for c in frame.columns if c in made])
    parts: list[pd.Series] = []
    for col in frame.columns:
        if col not in found:
            parts.append(frame[col])
            continue
        scores = [v if isinstance(v, Score) else None for v in frame[col]]
        values = [s.value if s is not None else None for s in scores]
        kind = "bool" if all(isinstance(v, bool) for v in values) else None
        parts.append(pd.Series(values, index=frame.index, name=col, dtype=kind or object))
        if kind is None and all(isinstance(v, numbers.Real) or v is None for v in values):
            parts[-1] = pd.to_numeric(parts[-1]).rename(col)  # None -> NaN: a numeric score column
        parts.append(
            pd.Series(
                [s.explanation if s is not None else None for s in scores], index=frame.index, name=f"{col}.explanation"
            )
        )
        keys = dict.fromkeys(str(k) for s in scores if s is not None for k in s.details)
        for k in keys:
            parts.append(
                pd.Series(
                    [s.details.get(k) if s is not None else None for s in scores], index=frame.index, name=f"{col}.{k}"
                )
            )
    out = pd.concat(parts, axis=1)
    out.attrs = dict(frame.attrs)
    return out


def _flatten(frame: pd.DataFrame, outputs: list[str]) -> pd.DataFrame:
    """Replace each output column holding dicts / models / dataclasses by ``node.field`` columns."""
    import pandas as pd

    parts: list[pd.DataFrame | pd.Series] = []
    for col in frame.columns:
        series = frame[col]
        if col not in outputs:
            parts.append(series)
            continue
        dicts = [_as_dict(v) if v is not None else None for v in series]
        if not any(d is not None for d in dicts) or any(
            d is None and v is not None for d, v in zip(dicts, series, strict=True)
        ):
            parts.append(series)  # nothing nested, or mixed with plain values: keep as is
            continue
        keys: dict[str, None] = {}
        for d in dicts:
            if d:
                keys.update(dict.fromkeys(str(k) for k in d))
        sub = pd.DataFrame(
            [{f"{col}.{k}": (d or {}).get(k) for k in keys} for d in dicts],
            columns=[f"{col}.{k}" for k in keys],
            index=frame.index,
        )
        parts.append(sub)
    out = pd.concat(parts, axis=1)
    out.attrs = dict(frame.attrs)
    return out


def breaker_error(result: dict[str, Any], inputs: Mapping[str, Any]) -> str:
    """A failed row's error as the circuit breaker quotes it (the experiment record, the progress, the warning,
    the command line's stderr): every secret's text redacted, the row's own and every known one."""
    return gate(f"{result['error_type']}: {result['error_message']}", secret_texts(inputs))
