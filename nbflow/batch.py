"""Many runs -> one DataFrame: ``flow.batch(rows, ...)`` and ``await flow.abatch(rows, ...)``.

Every row (× grid combination) is an independent run of the same Flow, through the same path as
``flow.arun`` (so flow-level limits apply across rows), with its own Run record: one row's failure
never touches another. The graph is compiled and planned once per batch, not per row.

Rows run through a fixed pool of ``concurrency`` workers pulling the next row, so memory holds one
small result per finished row and ``concurrency`` live runs, whatever the number of rows.

Nothing is lost: on a KeyboardInterrupt (Ctrl-C, the kernel's stop button) ``flow.batch`` raises
``BatchInterrupted`` whose ``.frame`` has every finished row; on cancellation, a batch timeout or
the circuit breaker the frame is kept on ``flow.last_batch`` / returned. With ``store=`` every
finished row is committed to SQLite as it finishes; ``resume=True`` skips rows already done.
See docs/batch.md.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ._batch_rows import STATUS_COLUMNS, Case, Cases, batch_key, prepare_cases
from .config import check_trace, config
from .engine.states import NodeStatus, RunStatus
from .errors import BatchError, BatchInterrupted, NbflowWarning, StoreError
from .progress import REFRESH, BatchProgress, make_renderer
from .run import Run
from .runner import call_blocking, in_kernel
from .store import BatchStore, is_secret_name

if TYPE_CHECKING:
    import os

    import pandas as pd

    from .dask_batch import RowsRunner
    from .dsl import Flow

__all__ = ["abatch", "batch"]

# Row states that are final. "pending": never started; "cancelled": stopped while running.
_FINISHED = ("succeeded", "failed")


@dataclass(slots=True)
class _Options:
    concurrency: int
    outputs: Iterable[str] | str | None
    flatten: bool
    store: str | os.PathLike[str] | BatchStore | None
    resume: bool
    retry_failed: bool
    batch_id: str | None
    store_secrets: bool
    max_consecutive_failures: int | None
    timeout: float | None
    row_timeout: float | None
    progress: Any
    executor: Any = None  # a dask distributed.Client: rows run on its workers (nbflow/dask_batch.py)
    chunk_size: int | None = None
    trace: Any = None  # OpenTelemetry spans per row (nbflow/otel.py); None: nbflow.config.trace


@dataclass(slots=True)
class _State:
    """The batch's live results; the partial frame can be built from it at any moment."""

    flow: Flow
    cases: Cases
    results: list[dict[str, Any] | None]
    opts: _Options
    batch_id: str | None = None
    stopped: str | None = None
    frame: pd.DataFrame | None = None
    running: dict[int, Run] = field(default_factory=dict)

    @classmethod
    def new(cls, flow: Flow, cases: Cases, opts: _Options) -> _State:
        return cls(flow, cases, [None] * len(cases.cases), opts)

    def build(self) -> pd.DataFrame:
        self.frame = _frame(self)
        return self.frame


def batch(
    flow: Flow,
    rows: Any,
    /,
    *,
    columns: Mapping[str, str] | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    outputs: Iterable[str] | str | None = None,
    concurrency: int = 16,
    flatten: bool = False,
    store: str | os.PathLike[str] | BatchStore | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    batch_id: str | None = None,
    store_secrets: bool = False,
    max_consecutive_failures: int | None = None,
    timeout: float | None = None,
    row_timeout: float | None = None,
    progress: Any = None,
    executor: Any = None,
    chunk_size: int | None = None,
    trace: Any = None,
) -> pd.DataFrame:
    """Run the flow once per row (× every ``grid`` combination) and return a DataFrame, in input order.

    Blocking and notebook-safe like ``flow.run``. ``rows`` is a DataFrame, a list of dicts or any
    iterable of mappings; columns named after flow inputs feed them (``columns={"col": "input"}``
    maps others), every other column is carried through. ``grid={"prompt": [...]}`` runs every row
    with every combination; its keys become columns.

    The result has the row and grid columns, one column per ``outputs`` node (default: the flow's
    leaf nodes; intermediate nodes allowed, only what they need runs), and ``status``
    (succeeded / failed / cancelled / pending), ``error_type``, ``error_message``, ``error_node``,
    ``attempts`` (most tries of any node), ``latency`` (seconds) and ``run_id``.
    ``flatten=True`` expands dict / pydantic / dataclass outputs into ``node.field`` columns.

    Options: ``concurrency`` rows in flight; ``store="runs.db"`` commits each finished row to SQLite,
    ``resume=True`` reuses the rows already finished in it (``retry_failed=True`` re-runs the failed
    ones); ``batch_id`` names the batch (default: flow name + a hash of the rows, grid and outputs);
    secret-looking columns (api_key, token, password, secret) are not stored unless
    ``store_secrets=True``; ``max_consecutive_failures=N`` stops starting rows after N failures in a
    row; ``timeout`` bounds the whole batch, ``row_timeout`` each row; ``progress`` None (auto),
    True, False or a renderer. ``executor=client`` (a Dask ``distributed.Client``) runs the rows on
    its workers, ``chunk_size`` rows per task, with the same result; see docs/dask.md. ``trace`` sends
    each row's spans to OpenTelemetry (as in ``flow.run``; the spans carry the batch id, row and
    variant; docs/tracing.md).

    Raises BatchError / MissingColumnError before anything runs if the rows cannot feed the flow.
    On Ctrl-C or a kernel interrupt raises BatchInterrupted, whose ``.frame`` keeps every finished row.
    """
    opts = _options(
        concurrency,
        outputs,
        flatten,
        store,
        resume,
        retry_failed,
        batch_id,
        store_secrets,
        max_consecutive_failures,
        timeout,
        row_timeout,
        progress,
        executor,
        chunk_size,
        trace,
    )
    state = _State.new(flow, prepare_cases(flow.graph, rows, columns, grid, opts.outputs), opts)

    def interrupted(exc: KeyboardInterrupt) -> BaseException:
        if isinstance(exc, BatchInterrupted):
            return exc
        if state.frame is None:
            _finish_partial(state)
        assert state.frame is not None
        return BatchInterrupted(state.frame, flow.name)

    return call_blocking(lambda: _drive(state), f"nbflow-batch-{flow.name}", interrupted, state.build)


async def abatch(
    flow: Flow,
    rows: Any,
    /,
    *,
    columns: Mapping[str, str] | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    outputs: Iterable[str] | str | None = None,
    concurrency: int = 16,
    flatten: bool = False,
    store: str | os.PathLike[str] | BatchStore | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    batch_id: str | None = None,
    store_secrets: bool = False,
    max_consecutive_failures: int | None = None,
    timeout: float | None = None,
    row_timeout: float | None = None,
    progress: Any = None,
    executor: Any = None,
    chunk_size: int | None = None,
    trace: Any = None,
) -> pd.DataFrame:
    """Like ``flow.batch`` (same options and result) on the running event loop.

    A KeyboardInterrupt inside a row raises BatchInterrupted (``.frame`` has the finished rows).
    If the awaiting task is cancelled, the cancellation propagates and the partial frame is kept
    on ``flow.last_batch`` (and, with ``store=``, in the store).
    """
    opts = _options(
        concurrency,
        outputs,
        flatten,
        store,
        resume,
        retry_failed,
        batch_id,
        store_secrets,
        max_consecutive_failures,
        timeout,
        row_timeout,
        progress,
        executor,
        chunk_size,
        trace,
    )
    state = _State.new(flow, prepare_cases(flow.graph, rows, columns, grid, opts.outputs), opts)
    return await _drive(state)


def _options(
    concurrency: int,
    outputs: Iterable[str] | str | None,
    flatten: bool,
    store: str | os.PathLike[str] | BatchStore | None,
    resume: bool,
    retry_failed: bool,
    batch_id: str | None,
    store_secrets: bool,
    max_consecutive_failures: int | None,
    timeout: float | None,
    row_timeout: float | None,
    progress: Any,
    executor: Any = None,
    chunk_size: int | None = None,
    trace: Any = None,
) -> _Options:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise BatchError(f"concurrency= is the number of rows in flight, a positive int; got {concurrency!r}")
    if max_consecutive_failures is not None and (
        not isinstance(max_consecutive_failures, int) or max_consecutive_failures < 1
    ):
        raise BatchError(f"max_consecutive_failures= must be a positive int or None, got {max_consecutive_failures!r}")
    for name, value in (("timeout", timeout), ("row_timeout", row_timeout)):
        if value is not None and (not isinstance(value, int | float) or value <= 0):
            raise BatchError(f"{name}= is in seconds and must be positive (or None), got {value!r}")
    if resume and store is None:
        raise BatchError("resume=True needs store= (the SQLite file the earlier batch wrote to)")
    if batch_id is not None and (not isinstance(batch_id, str) or not batch_id):
        raise BatchError(f"batch_id= must be a non-empty string, got {batch_id!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1):
        raise BatchError(f"chunk_size= is the number of rows per Dask task, a positive int; got {chunk_size!r}")
    if chunk_size is not None and executor is None:
        raise BatchError("chunk_size= is for batches sent to Dask; pass executor=client (a distributed.Client) too")
    if trace is not None and trace is not False:
        check_trace(trace, "flow.batch(trace=...)")
        if executor is not None:
            raise BatchError(
                "trace= cannot follow rows to Dask workers (a tracer provider lives in one process); set up "
                "tracing on the workers (nbflow.config.trace = 'otel' there) or run the batch locally"
            )
    return _Options(
        concurrency,
        outputs,
        flatten,
        store,
        resume,
        retry_failed,
        batch_id,
        store_secrets,
        max_consecutive_failures,
        timeout,
        row_timeout,
        progress,
        executor,
        chunk_size,
        trace,
    )


async def _drive(state: _State) -> pd.DataFrame:
    """Run every case not yet finished; always leave the partial frame on ``state``/``flow.last_batch``."""
    import pandas  # noqa: F401  (imported now, not after the last row: a cold import takes seconds)

    flow, cases, opts = state.flow, state.cases, state.opts
    n = len(cases.cases)
    secret = [] if opts.store_secrets else [c for c in cases.columns if is_secret_name(c)]
    run_rows: RowsRunner = _run_rows
    if opts.executor is not None:  # checks the client and pickles the flow before anything runs
        from .dask_batch import remote_rows

        run_rows = remote_rows(state)
    store, own_store = _open_store(opts.store)
    progress = BatchProgress(flow.name, n)
    try:
        todo = list(range(n))
        if store is not None:
            state.batch_id = opts.batch_id or batch_key(flow.name, cases, secret)
            todo = _resume(state, store, progress)
        elif opts.batch_id is not None:
            state.batch_id = opts.batch_id
        renderer = make_renderer(opts.progress, in_kernel(), progress)
        await run_rows(state, todo, store, secret, progress, renderer)
    finally:
        if own_store and store is not None:
            store.close()
    return state.frame if state.frame is not None else state.build()


def _open_store(store: str | os.PathLike[str] | BatchStore | None) -> tuple[BatchStore | None, bool]:
    if store is None:
        return None, False
    if isinstance(store, BatchStore):
        return store, False
    return BatchStore(store), True


def _resume(state: _State, store: BatchStore, progress: BatchProgress) -> list[int]:
    """Register the batch in the store; with resume, fill in rows already finished; return rows to run."""
    assert state.batch_id is not None
    opts, cases = state.opts, state.cases
    n = len(cases.cases)
    info = store.batch_info(state.batch_id)
    if info is not None and info["n_rows"] != n:
        raise StoreError(
            f"store {store.path!r} holds batch {state.batch_id!r} with {info['n_rows']} rows, this batch has {n}; "
            f"use another batch_id= (or omit it: the default id follows the rows)"
        )
    if info is None and opts.resume:
        others = [b["batch_id"] for b in store.batches() if b["flow"] == state.flow.name]
        if others:
            warnings.warn(
                f"resume=True, but store {store.path!r} has no batch {state.batch_id!r}, so every row runs; it holds "
                f"other batches of flow {state.flow.name!r}: {', '.join(map(repr, others[-3:]))}. The default id "
                f"follows the rows' values, the grid and outputs: if they changed on purpose this is a new batch; "
                f"name batches with batch_id= to resume across such changes",
                NbflowWarning,
                stacklevel=4,
            )
    stored = store.rows(state.batch_id, skip_unreadable=True) if info is not None else {}
    if info is not None and store.unreadable:
        first = next(iter(store.unreadable.items()))
        warnings.warn(
            f"store {store.path!r}: {len(store.unreadable)} finished rows of batch {state.batch_id!r} cannot be read "
            f"back (row {first[0]}: {first[1]}); they run again",
            NbflowWarning,
            stacklevel=4,
        )
    if stored and not opts.resume:
        raise StoreError(
            f"store {store.path!r} already holds {len(stored)} finished rows of batch {state.batch_id!r}; "
            f"pass resume=True to reuse them and run the rest, or store.delete_batch({state.batch_id!r}) "
            f"to start over"
        )
    store.begin_batch(state.batch_id, state.flow.name, n, _result_columns(cases))
    todo = []
    for i, case in enumerate(cases.cases):
        old = stored.get(i)
        if old is not None and old.status in _FINISHED and not (opts.retry_failed and old.status == "failed"):
            result = dict(case.row)  # inputs come from the rows given now (secrets were never stored)
            for col in (*cases.outputs, *STATUS_COLUMNS):
                result[col] = old.data.get(col)
            state.results[i] = result
            progress.resumed += 1
        else:
            todo.append(i)
    return todo


async def _run_rows(
    state: _State,
    todo: list[int],
    store: BatchStore | None,
    secret: list[str],
    progress: BatchProgress,
    renderer: Any,
) -> None:
    flow, cases, opts = state.flow, state.cases, state.opts
    graph = flow.graph
    results = state.results
    pending = iter(todo)
    breaker = opts.max_consecutive_failures
    consecutive = 0
    last_error = ""
    stop = False
    row_timeout = opts.row_timeout
    loop = asyncio.get_running_loop()
    prefix = uuid.uuid4().hex[:8]  # run ids: "<batch call>-<row index>", unique and cheap
    trace_row = None
    if opts.trace is not None or config.trace is not None:  # off: not even an import
        from .otel import row_attacher

        trace_row = row_attacher(opts.trace, state.batch_id, cases.grid_keys, secret)

    async def one(case: Case) -> tuple[Run, bool]:
        # The same path as flow.arun after its checks: the batch planned every row up front.
        run = Run(flow.name, f"{prefix}-{case.index}", case.inputs, case.plan.nodes)
        run.graph = graph
        if trace_row is not None:
            trace_row(run, case)
        state.running[case.index] = run  # left there if cancelled: the partial frame reads it
        timed_out = False
        if row_timeout is None:
            await flow._execute(graph, case.plan, run, case.inputs, {}, None, tick=False)
        else:
            try:
                async with asyncio.timeout(row_timeout):
                    await flow._execute(graph, case.plan, run, case.inputs, {}, None, tick=False)
            except TimeoutError:
                timed_out = True
        del state.running[case.index]
        return run, timed_out

    async def worker() -> None:
        nonlocal consecutive, stop, last_error
        for i in pending:
            if stop:
                return
            case = cases.cases[i]
            progress.in_flight += 1
            try:
                run, timed_out = await one(case)
            finally:
                progress.in_flight -= 1
            result = _result(case, run, cases.outputs, timeout=row_timeout if timed_out else None)
            results[i] = result
            ok = result["status"] == "succeeded"
            if ok:
                progress.succeeded += 1
                consecutive = 0
            else:
                progress.failed += 1
                consecutive += 1
                last_error = f"{result['error_type']}: {result['error_message']}"
            if store is not None:
                assert state.batch_id is not None
                store.write_row(state.batch_id, i, result["run_id"], result["status"], result, secret_columns=secret)
            if breaker is not None and consecutive >= breaker and not stop:
                stop = True
                state.stopped = (
                    f"circuit breaker: {consecutive} consecutive rows failed (max_consecutive_failures={breaker}); "
                    f"last error: {_clip(last_error)}"
                )

    async def refresh() -> None:
        # Also wakes the loop 4x/s, which keeps a kernel interrupt prompt (ipykernel #881).
        while True:
            await asyncio.sleep(REFRESH)
            if renderer is not None:
                _render(renderer, "update", progress)

    n_workers = min(opts.concurrency, len(todo))
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
        await _cancel([*tasks, refresher])
        outcome = stopped_by(exc, state, progress, renderer, flow.name)
        if outcome is exc:
            raise
        raise outcome from exc
    await _cancel([refresher])
    end_batch(state, progress, renderer, state.stopped)
    _stop_warning(state, store is not None)


def end_batch(state: Any, progress: Any, renderer: Any, stopped: str | None) -> None:
    """Close a batch that stopped for any reason: the frame gets every row, the progress its end."""
    progress.stopped = stopped
    progress.finished_at = progress.clock()
    _finish_partial(state)
    if renderer is not None:
        _render(renderer, "close", progress)


def stopped_by(exc: BaseException, state: Any, progress: Any, renderer: Any, flow_name: str) -> BaseException:
    """End a batch stopped by ``exc``; what to raise: a BatchInterrupted carrying the frame for an interrupt."""
    end_batch(state, progress, renderer, "interrupted" if isinstance(exc, KeyboardInterrupt) else "cancelled")
    if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, BatchInterrupted):
        assert state.frame is not None
        return BatchInterrupted(state.frame, flow_name)
    return exc


def _stop_warning(state: _State, stored: bool) -> None:
    if state.stopped is not None:
        left = sum(1 for r in state.results if r is not None and r["status"] in ("pending", "cancelled"))
        fix = "fix the cause and run again" + (" with resume=True" if stored else "")
        warnings.warn(
            f"batch of flow {state.flow.name!r} stopped early, {state.stopped}; {left} rows were not finished "
            f"(status 'pending' or 'cancelled', see frame.attrs['stopped']); {fix}",
            NbflowWarning,
            stacklevel=4,
        )


def _render(renderer: Any, method: str, progress: BatchProgress) -> None:
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


def _finish_partial(state: _State) -> None:
    """Fill in rows that did not finish and build the frame (kept on the flow, too)."""
    cases = state.cases
    for i, r in enumerate(state.results):
        if r is not None:
            continue
        case = cases.cases[i]
        run = state.running.get(i)
        if run is not None:  # still marked running: cancelled mid-way, keep what its nodes produced
            state.results[i] = _result(case, run, cases.outputs, status="cancelled")
        else:
            state.results[i] = _unfinished(case, cases.outputs, state.stopped)
    state.build()
    state.flow.last_batch = state.frame


def _result(
    case: Case, run: Run, outputs: list[str], status: str | None = None, timeout: float | None = None
) -> dict[str, Any]:
    row = dict(case.row)
    nodes = run.nodes
    for o in outputs:
        rec = nodes.get(o)
        row[o] = rec.output if rec is not None and rec.status is NodeStatus.SUCCEEDED else None
    failed = None
    attempts = 0
    for rec in nodes.values():
        if failed is None and rec.error is not None:
            failed = rec
        if len(rec.attempts) > attempts:
            attempts = len(rec.attempts)
    if status is None:
        rs = run.status
        status = "succeeded" if rs is RunStatus.SUCCEEDED else "cancelled" if rs is RunStatus.CANCELLED else "failed"
        if timeout is not None:
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
            (r.name for r in nodes.values() if r.skip_reason and r.skip_reason.startswith("run cancelled while")), None
        )
    else:
        row["error_type"] = row["error_message"] = row["error_node"] = None
    row["attempts"] = attempts
    row["latency"] = run.duration
    row["run_id"] = run.run_id
    return row


def _unfinished(case: Case, outputs: list[str], reason: str | None) -> dict[str, Any]:
    row = dict(case.row)
    for o in outputs:
        row[o] = None
    row.update(
        status="pending", error_type=None, error_message=None, error_node=None, attempts=0, latency=None, run_id=None
    )
    return row


def _result_columns(cases: Cases) -> list[str]:
    return [*cases.columns, *cases.outputs, *STATUS_COLUMNS]


def _frame(state: _State) -> pd.DataFrame:
    import pandas as pd

    cases = state.cases
    columns = _result_columns(cases)
    records = [
        r if r is not None else _unfinished(c, cases.outputs, None)
        for r, c in zip(state.results, cases.cases, strict=False)
    ]
    frame = pd.DataFrame.from_records(records, columns=columns) if records else pd.DataFrame(columns=columns)
    if cases.index is not None:
        frame.index = cases.index
    if "attempts" in frame:
        frame["attempts"] = frame["attempts"].astype("int64")
    if "latency" in frame:
        frame["latency"] = frame["latency"].astype("float64")
    if state.opts.flatten:
        frame = _flatten(frame, cases.outputs)
    counts = frame["status"].value_counts().to_dict() if len(frame) else {}
    frame.attrs.update(
        {
            "flow": state.flow.name,
            "batch_id": state.batch_id,
            "outputs": list(cases.outputs),
            "grid": list(cases.grid_keys),
            "stopped": state.stopped,
            "counts": {str(k): int(v) for k, v in counts.items()},
        }
    )
    return frame


def _as_dict(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump) and hasattr(type(value), "model_fields"):
        out: dict[str, Any] = dump()
        return out
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


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


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
