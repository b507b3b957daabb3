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

import json
import math
import os
import sys
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nbflow._batch.accessor import register_accessor
from nbflow._batch.cases import Cases, assign_keys, batch_key, prepare_cases
from nbflow._batch.dask import RowsRunner, remote_rows
from nbflow._batch.experiments import experiment_meta, record_experiment
from nbflow._batch.paused import arm_expiry
from nbflow._batch.reuse import STRICT, reuse_rows
from nbflow._batch.rows import FINISHED, Options, State, finish_partial, prepare_row, result_columns, run_rows
from nbflow._batch.runs import KEEP_CHOICES, KEEP_LIMIT, RunArchive, archive_of
from nbflow._batch.variants import live_variants
from nbflow._core.config import check_trace, config
from nbflow._core.errors import BatchError, BatchInterrupted, NbflowWarning, StoreError
from nbflow._core.secrets import is_secret_name, secret_texts
from nbflow._engine import logs
from nbflow._engine.caching import node_fingerprints
from nbflow._engine.kernel import call_blocking, in_kernel
from nbflow._notebook import make_renderer
from nbflow._record.batch_progress import BatchProgress
from nbflow._record.lineage import lineage_json
from nbflow._store.batch_store import BatchStore, StoredRow
from nbflow._store.claims import BatchClaim

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._flow.flow import Flow

__all__ = ["abatch", "batch"]


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
    resume: bool | str = False,
    retry_failed: bool = False,
    batch_id: str | None = None,
    store_secrets: bool = False,
    max_consecutive_failures: int | None = None,
    timeout: float | None = None,
    row_timeout: float | None = None,
    progress: Any = None,
    executor: Any = None,
    chunk_size: int | None = None,
    repeats: int = 1,
    labels: Mapping[str, Any] | Iterable[str] | None = None,
    experiment: str | None = None,
    notes: str | None = None,
    cooldown: float | None = None,
    max_cooldowns: int = 3,
    keep: str | Iterable[str] | None = None,
    keep_limit: int = KEEP_LIMIT,
    trace: Any = None,
    reuse: str | None = None,
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

    ``grid={"prompt": {"terse": P1, "steps": P2}}`` names variants (the column holds the name, the
    node gets the value; ``df.attrs["variants"]`` keeps the mapping, a value JSON cannot hold by its repr, so
    the frame still writes to parquet). A grid key must feed a flow
    input or be declared a label (``labels=["note"]``; ``labels={"note": "v2"}`` adds constant
    columns). ``repeats=N`` runs every case N times with a ``sample`` column 0..N-1; nodes declared
    ``@flow.node(cache="per-sample")`` are cached once per sample.

    Options: ``concurrency`` rows in flight; ``store="runs.db"`` commits each finished row to SQLite,
    ``resume=True`` reuses the rows already finished in it, matched by content, and re-runs in those
    that depend on a node changed since only that node and what follows it, fed the other nodes' stored
    outputs (``resume="strict"`` refuses instead; ``retry_failed=True`` re-runs the failed ones);
    ``reuse="name"`` does the same from another stored batch or experiment of the flow into this new one
    (re-score without re-calling the model: docs/batch.md); ``experiment="name"`` (and ``notes=``) records the batch as a named
    experiment (``nf.experiments(db)``, ``nf.load_batch(db, name)``); ``batch_id`` names the batch
    (default: the experiment name, else flow name + a hash of the rows, grid and outputs);
    secret-looking columns (api_key, token, password, secret) are not stored unless
    ``store_secrets=True``; ``max_consecutive_failures=N`` stops starting rows after N failures in a
    row (with ``cooldown=`` seconds it pauses new rows, then lets one probe row through, up to
    ``max_cooldowns`` pauses before it stops); ``timeout`` bounds the whole batch, ``row_timeout`` each row;
    ``progress`` None (auto), True, False or a renderer. ``keep`` says which rows keep their full run record
    (every node's output, error, traceback, attempts). Left out without a store: failed and paused rows
    whole, and every succeeded row's run packed (its outputs by reference) within ``nf.config.keep_memory``
    (64 MiB; a row past it is marked, ``df.nbflow.openable()``). ``"failed"`` (failed and paused rows
    only), ``"all"`` (the default with a store, where they are written with their row; a succeeded
    row's run is then read back from the store when opened, its secret inputs redacted), ``"none"``, or a
    list of nodes (``keep=["raw", "model"]``: every row's run, holding the outputs of these nodes and of the
    output columns only; the others are dropped once nothing needs them, as ``flow.run(keep=)`` does); at
    most ``keep_limit`` runs stay in memory. A store keeps each distinct value once, shared by every row. Open one with ``df.nbflow.run(i)`` (see docs/batch.md).
    ``executor=client`` (a Dask ``distributed.Client``) runs the rows on its workers, ``chunk_size`` rows
    per task, with the same result; see docs/dask.md. ``trace`` sends
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
        keep,
        keep_limit,
        trace,
    )
    _more_options(opts, repeats, experiment, notes, cooldown, max_cooldowns, reuse)
    _check_keep(flow, opts)
    state = State.new(flow, _cases(flow, rows, columns, grid, opts, repeats, labels), opts)

    def interrupted(exc: KeyboardInterrupt) -> BaseException:
        if isinstance(exc, BatchInterrupted):
            return exc
        if state.frame is None:
            finish_partial(state)
        assert state.frame is not None
        return BatchInterrupted(state.frame, flow.name)

    try:
        return call_blocking(lambda: _drive(state), f"nbflow-batch-{flow.name}", interrupted, state.build)
    finally:
        register_accessor()  # df.nbflow on the frame returned, or the one a stop carries


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
    resume: bool | str = False,
    retry_failed: bool = False,
    batch_id: str | None = None,
    store_secrets: bool = False,
    max_consecutive_failures: int | None = None,
    timeout: float | None = None,
    row_timeout: float | None = None,
    progress: Any = None,
    executor: Any = None,
    chunk_size: int | None = None,
    repeats: int = 1,
    labels: Mapping[str, Any] | Iterable[str] | None = None,
    experiment: str | None = None,
    notes: str | None = None,
    cooldown: float | None = None,
    max_cooldowns: int = 3,
    keep: str | Iterable[str] | None = None,
    keep_limit: int = KEEP_LIMIT,
    trace: Any = None,
    reuse: str | None = None,
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
        keep,
        keep_limit,
        trace,
    )
    _more_options(opts, repeats, experiment, notes, cooldown, max_cooldowns, reuse)
    _check_keep(flow, opts)
    state = State.new(flow, _cases(flow, rows, columns, grid, opts, repeats, labels), opts)
    try:
        return await _drive(state)
    finally:
        register_accessor()  # df.nbflow on the frame returned, or the one a stop carries


def _options(
    concurrency: int,
    outputs: Iterable[str] | str | None,
    flatten: bool,
    store: str | os.PathLike[str] | BatchStore | None,
    resume: bool | str,
    retry_failed: bool,
    batch_id: str | None,
    store_secrets: bool,
    max_consecutive_failures: int | None,
    timeout: float | None,
    row_timeout: float | None,
    progress: Any,
    executor: Any = None,
    chunk_size: int | None = None,
    keep: str | Iterable[str] | None = None,
    keep_limit: int = KEEP_LIMIT,
    trace: Any = None,
) -> Options:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise BatchError(f"concurrency= is the number of rows in flight, a positive int; got {concurrency!r}")
    if max_consecutive_failures is not None and (
        not isinstance(max_consecutive_failures, int)
        or isinstance(max_consecutive_failures, bool)
        or max_consecutive_failures < 1
    ):
        raise BatchError(f"max_consecutive_failures= must be a positive int or None, got {max_consecutive_failures!r}")
    for name, value in (("timeout", timeout), ("row_timeout", row_timeout)):
        if value is not None and (
            not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or value <= 0
        ):
            raise BatchError(f"{name}= is in seconds and must be positive (or None), got {value!r}")
    if store is not None and not isinstance(store, str | os.PathLike | BatchStore):
        raise BatchError(
            f"store= is a SQLite file path (store='runs.db') or an nf.BatchStore, got {store!r} ({type(store).__name__})"
        )
    if isinstance(store, str | os.PathLike) and not os.fspath(store):
        raise BatchError("store='' names no file; give a path (store='runs.db') or leave store= out")
    if isinstance(outputs, list | tuple | set | frozenset) and not outputs:
        raise BatchError("outputs=[] selects no node, so no row would compute anything; name nodes or leave it out")
    if resume not in (False, True, STRICT):
        raise BatchError(f"resume= is True, False or 'strict', got {resume!r}")
    if resume and store is None:
        raise BatchError(f"resume={resume!r} needs store= (the SQLite file the earlier batch wrote to)")
    if batch_id is not None and (not isinstance(batch_id, str) or not batch_id):
        raise BatchError(f"batch_id= must be a non-empty string, got {batch_id!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1):
        raise BatchError(f"chunk_size= is the number of rows per Dask task, a positive int; got {chunk_size!r}")
    if chunk_size is not None and executor is None:
        raise BatchError("chunk_size= is for batches sent to Dask; pass executor=client (a distributed.Client) too")
    packed = keep is None and store is None  # every succeeded row's run kept packed, within config.keep_memory
    if keep is None:
        keep = "failed" if store is None else "all"
    keep_nodes = None
    if not isinstance(keep, str) and isinstance(keep, Iterable):
        keep_nodes = tuple(keep)
        if not keep_nodes or not all(isinstance(n, str) for n in keep_nodes):
            raise BatchError(
                f"keep= as a list names the nodes whose outputs every row's run keeps, e.g. keep=['raw', 'model']; "
                f"got {keep!r}"
            )
        keep = "all"
    if keep not in KEEP_CHOICES:
        raise BatchError(
            f"keep= says which rows keep their full run record: 'failed' (failed and paused rows), 'all', "
            f"'none', or a list of node names (every row, with only those nodes' outputs); got {keep!r}"
        )
    if not isinstance(keep_limit, int) or isinstance(keep_limit, bool) or keep_limit < 0:
        raise BatchError(f"keep_limit= is the number of run records kept in memory, an int >= 0; got {keep_limit!r}")
    if trace is not None and trace is not False:
        check_trace(trace, "flow.batch(trace=...)")
        if executor is not None:
            raise BatchError(
                "trace= cannot follow rows to Dask workers (a tracer provider lives in one process); set up "
                "tracing on the workers (nbflow.config.trace = 'otel' there) or run the batch locally"
            )
    return Options(
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
        keep=keep,
        keep_limit=keep_limit,
        keep_nodes=frozenset(keep_nodes) if keep_nodes is not None else None,
        keep_packed=packed,
        trace=trace,
    )


_PRELOAD: list[threading.Thread] = []


def _preload_pandas() -> None:
    """Import pandas in a thread while the first rows run (once per process): the frame a batch returns, also
    the partial one a Ctrl-C or a cancel gets, needs it, and importing it then, on the loop, made the first
    interrupt of a process wait for the import (2-4 s)."""
    if "pandas" in sys.modules or _PRELOAD:
        return
    import importlib

    thread = threading.Thread(
        target=importlib.import_module, args=("pandas",), name="nbflow-import-pandas", daemon=True
    )
    _PRELOAD.append(thread)
    thread.start()


async def _drive(state: State) -> pd.DataFrame:
    """Run every case not yet finished; always leave the partial frame on ``state``/``flow.last_batch``."""

    flow, cases, opts = state.flow, state.cases, state.opts
    _preload_pandas()
    n = len(cases.cases)
    secret = [] if opts.store_secrets else [c for c in cases.columns if is_secret_name(c)]
    runner: RowsRunner = run_rows
    if opts.executor is not None:  # checks the client and pickles the flow before anything runs
        runner = remote_rows(state)
    store, own_store = _open_store(opts.store)
    # Always an archive, also with keep="none": paused rows are kept, flow.answer resumes them.
    # (on Dask a succeeded row's run stays on its worker unless keep= says otherwise: nothing to pack here)
    budget = config.keep_memory if opts.keep_packed and store is None and opts.executor is None else None
    state.archive = RunArchive(opts.keep, opts.keep_limit, store.path if store is not None else None, budget=budget)
    progress = BatchProgress(flow.name, n)
    claim: BatchClaim | None = None
    try:
        todo: Sequence[int] = range(n)  # (not a list: an int object per row)
        if store is not None:
            known = assign_keys(cases)  # how stored rows are found again: by content
            state.batch_id = opts.batch_id or opts.experiment or batch_key(flow.name, cases, secret, known)
            del known  # (each row's values as text, ~100 bytes a row: not kept while the rows run)
            # One process at a time per stored batch (nbflow/_store/claims.py): a second resumer is refused.
            claim = BatchClaim(store.path, state.batch_id, timeout=store.timeout, lock_wait=store.lock_wait)
            todo = _resume(state, store, progress, secret)
        elif opts.batch_id is not None:
            state.batch_id = opts.batch_id
        renderer = make_renderer(opts.progress, in_kernel(), progress)
        _attach_live_variants(renderer, state)  # in a kernel: a bar per grid combination, then the explorer
        logs.BATCH.info(
            "batch %s of flow %r started: %d rows, %d to run%s",
            state.batch_id or "(no id)",
            flow.name,
            n,
            len(todo),
            f", store {store.path!r}" if store is not None else "",
        )
        try:
            await runner(state, todo, store, secret, progress, renderer)
        finally:
            if store is not None and state.batch_id is not None:
                try:
                    record_experiment(state, store)
                except Exception as exc:  # the rows are stored already: never lose the batch over its record
                    logs.STORE.warning(
                        "store %r: could not update the experiment record of batch %r (%s: %s)",
                        store.path,
                        state.batch_id,
                        type(exc).__name__,
                        exc,
                    )
                    warnings.warn(
                        f"store {store.path!r}: could not update the experiment record of batch {state.batch_id!r} "
                        f"({type(exc).__name__}: {exc}); its rows are stored",
                        NbflowWarning,
                        stacklevel=3,
                    )
    finally:
        if claim is not None:
            claim.release()
        if own_store and store is not None:
            store.close()
    frame = state.frame if state.frame is not None else state.build()
    _log_finished(state, frame)
    if (frame.attrs.get("counts") or {}).get("paused"):
        arm_expiry(flow, frame)  # nf.ask(timeout=): expired rows go on by themselves (nbflow/_batch/paused.py)
    return frame


def _log_finished(state: State, frame: pd.DataFrame) -> None:
    counts = frame.attrs.get("counts") or {}
    failed = int(counts.get("failed", 0) or 0)
    level = logs.logging.WARNING if failed or state.stopped else logs.logging.INFO
    if not logs.BATCH.isEnabledFor(level):
        return
    shown = ", ".join(f"{v} {k}" for k, v in counts.items() if v) or f"{len(frame)} rows"
    stopped = f"; stopped: {state.stopped}" if state.stopped else ""
    logs.BATCH.log(
        level,
        "batch %s of flow %r finished: %s%s",
        state.batch_id or "(no id)",
        state.flow.name,
        shown,
        stopped,
        extra={"nbflow_batch": state.batch_id, "nbflow_flow": state.flow.name},
    )


def _open_store(store: str | os.PathLike[str] | BatchStore | None) -> tuple[BatchStore | None, bool]:
    if store is None:
        return None, False
    if isinstance(store, BatchStore):
        return store, False
    return BatchStore(store), True


def _resume(state: State, store: BatchStore, progress: BatchProgress, secret: list[str]) -> Sequence[int]:
    """Register the batch in the store; with resume (or reuse=), fill in rows still valid (nbflow/_batch/reuse.py)."""
    assert state.batch_id is not None
    opts, cases = state.opts, state.cases
    n = len(cases.cases)
    borrowed = _borrowed(state, store) if opts.reuse is not None else None
    info = store.batch_info(state.batch_id)
    if info is not None and info["flow"] != state.flow.name:
        raise StoreError(
            f"store {store.path!r} holds batch {state.batch_id!r} of flow {info['flow']!r}, not {state.flow.name!r}; "
            f"use another batch_id= / experiment= name"
        )
    if info is None and opts.resume and borrowed is None:
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
    # Without resume the rows are only counted: never decode (let alone unpickle) them.
    stored = (
        store.stored_rows(state.batch_id, unpickle=bool(opts.resume), skip_unreadable=True) if info is not None else []
    )
    if info is not None:
        _warn_unreadable(store, state.batch_id)
    finished = [r for r in stored if r.status in FINISHED]
    if finished and not opts.resume:
        raise StoreError(
            f"store {store.path!r} already holds {len(finished)} finished rows of batch {state.batch_id!r}; "
            f"pass resume=True to reuse them and run the rest, or store.delete_batch({state.batch_id!r}) "
            f"to start over"
        )
    fingerprints = node_fingerprints(state.flow.graph, state.flow.validate)
    todo = (
        reuse_rows(state, store, stored, fingerprints, progress, borrowed)
        if finished or borrowed is not None
        else range(n)
    )
    meta = experiment_meta(state)
    state.fingerprint = store.begin_batch(
        state.batch_id, state.flow.name, n, result_columns(cases), fingerprints=fingerprints, meta=meta
    )
    if state.copied:  # rows of the reused batch taken whole: they are rows of this batch too (their runs shared)
        by_name = bool(secret)
        copied = [(i, result) for i in state.copied if (result := state.results[i]) is not None]
        lineages = _copied_lineages(state, store, [result.get("run_id") for _, result in copied], meta)
        store.write_rows(
            prepare_row(
                store,
                state,
                i,
                result,
                secret,
                secrets=secret_texts(cases.cases[i].inputs, by_name=by_name),
                lineage=lineages.get(str(result.get("run_id"))),
            )
            for i, result in copied
        )
        for i, result in copied:  # (a value the store cannot hold failed the row: its result says so)
            state.results[i] = result
    return todo


def _borrowed(state: State, store: BatchStore) -> list[StoredRow]:
    """The finished rows of the batch ``reuse=`` names (same store, same flow), or a StoreError saying what it holds."""
    name = state.opts.reuse
    assert name is not None
    info = store.batch_info(name)
    flow = state.flow.name
    if info is None:
        known = [b["batch_id"] for b in store.batches() if b["flow"] == flow]
        raise StoreError(
            f"reuse={name!r}: store {store.path!r} holds no batch or experiment of that name; its batches of flow "
            f"{flow!r}: {', '.join(map(repr, known)) or '(none)'} (nf.experiments({store.path!r}) lists them)"
        )
    if info["flow"] != flow:
        raise StoreError(
            f"reuse={name!r}: batch {name!r} of store {store.path!r} is of flow {info['flow']!r}, not {flow!r}; "
            f"name a batch of this flow"
        )
    rows = [r for r in store.stored_rows(name, unpickle=True, skip_unreadable=True) if r.status in FINISHED]
    _warn_unreadable(store, name)
    return rows


def _copied_lineages(state: State, store: BatchStore, run_ids: list[Any], meta: Mapping[str, Any]) -> dict[str, str]:
    """The lineage of each row copied from the batch ``reuse=`` names, by run id, as that batch's row keeps it (its
    values were computed there). The row's environment is that batch's: when it differs from this batch's (another
    commit, another package version) the copied lineage names it itself (``env``, read by
    ``nbflow._record.lineage.expand``), so it stays true should the reused batch be deleted."""
    name = state.opts.reuse
    assert name is not None
    found = store.row_lineages(name, [r for r in run_ids if isinstance(r, str)])
    info = store.batch_info(name) if found else None
    theirs = (info or {}).get("meta", {}).get("environment")
    if not isinstance(theirs, dict) or theirs == meta.get("environment"):
        return found
    out = {}
    for run_id, text in found.items():
        try:
            data = json.loads(text)
        except ValueError:  # (garbled: copied as it is; reading it says so)
            out[run_id] = text
            continue
        if isinstance(data, dict) and "nodes" in data and "env" not in data:  # (a row copied before keeps its own)
            data["env"] = theirs
            text = lineage_json(data)
        out[run_id] = text
    return out


def _warn_unreadable(store: BatchStore, batch_id: str) -> None:
    if store.unreadable:
        first = next(iter(store.unreadable.items()))
        warnings.warn(
            f"store {store.path!r}: {len(store.unreadable)} finished rows of batch {batch_id!r} cannot be read "
            f"back (row {first[0]}: {first[1]}); they run again",
            NbflowWarning,
            stacklevel=5,
        )


def _check_keep(flow: Flow, opts: Options) -> None:
    """keep=[node, ...] names nodes of the flow (before anything runs)."""
    if opts.keep_nodes is None:
        return
    from nbflow._core.errors import _suggest

    known = flow.graph.nodes
    for name in sorted(opts.keep_nodes):
        if name not in known:
            raise BatchError(
                f"keep=[..., {name!r}, ...]: {name!r} is not a node of flow {flow.name!r}{_suggest(name, known)}; "
                f"its nodes: {', '.join(known)}. Name the nodes whose outputs every row's run should keep, or "
                f"pass keep='all' to keep them all"
            )


def _more_options(
    opts: Options,
    repeats: int,
    experiment: str | None,
    notes: str | None,
    cooldown: float | None,
    max_cooldowns: int,
    reuse: str | None = None,
) -> None:
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise BatchError(
            f"repeats= is how many times each case runs (a 'sample' column), a positive int; got {repeats!r}"
        )
    for name, text in (("experiment", experiment), ("notes", notes)):
        if text is not None and (not isinstance(text, str) or (name == "experiment" and not text)):
            raise BatchError(f"{name}= must be a non-empty string, got {text!r}")
    if experiment is not None and opts.store is None:
        raise BatchError("experiment= names the batch in a store; pass store='runs.db' too")
    if experiment is not None and opts.batch_id is not None and experiment != opts.batch_id:
        raise BatchError(
            f"experiment={experiment!r} and batch_id={opts.batch_id!r}: an experiment is stored as the batch of "
            f"that name; pass only one of them"
        )
    if cooldown is not None:
        if not isinstance(cooldown, int | float) or isinstance(cooldown, bool) or cooldown <= 0:
            raise BatchError(f"cooldown= is in seconds and must be positive (or None), got {cooldown!r}")
        if opts.max_consecutive_failures is None:
            raise BatchError(
                "cooldown= is the pause after max_consecutive_failures=N rows failed in a row; pass both, "
                "e.g. max_consecutive_failures=5, cooldown=300"
            )
        if opts.executor is not None:
            raise BatchError(
                "cooldown= is not supported with executor= (Dask) yet; use max_consecutive_failures= alone"
            )
    if not isinstance(max_cooldowns, int) or isinstance(max_cooldowns, bool) or max_cooldowns < 1:
        raise BatchError(
            f"max_cooldowns= is the number of pauses before the batch stops, a positive int; got {max_cooldowns!r}"
        )
    if reuse is not None:
        if not isinstance(reuse, str) or not reuse:
            raise BatchError(f"reuse= names a stored batch or experiment to reuse (a non-empty string), got {reuse!r}")
        if opts.store is None:
            raise BatchError(f"reuse={reuse!r} names a batch of a store; pass store='runs.db' (the file it is in) too")
        if reuse in (experiment, opts.batch_id):
            raise BatchError(
                f"reuse={reuse!r} names this batch itself: resume=True alone continues it (drop reuse=), or store "
                f"this run under a new name (experiment='...') to reuse {reuse!r} in it"
            )
    opts.reuse = reuse
    opts.experiment, opts.notes = experiment, notes
    opts.cooldown = float(cooldown) if cooldown is not None else None
    opts.max_cooldowns = max_cooldowns


def _cases(
    flow: Flow,
    rows: Any,
    columns: Mapping[str, str] | None,
    grid: Mapping[str, Sequence[Any]] | None,
    opts: Options,
    repeats: int,
    labels: Mapping[str, Any] | Iterable[str] | None,
) -> Cases:
    archive = archive_of(getattr(rows, "attrs", None) or {})  # a result frame of this process given back
    known = archive.variants if archive is not None else None
    cases = prepare_cases(flow.graph, rows, columns, grid, opts.outputs, repeats, labels, known)
    if repeats > 1:
        _check_repeats(flow, cases, repeats)
    return cases


def _check_repeats(flow: Flow, cases: Cases, repeats: int) -> None:
    """Refuse repeats whose samples would all be cache hits of one call (identical, silently).

    Nodes cached by the flow's default are keyed per sample in such a batch (``CachePlan.by_default``), so only a
    flow whose every planned node is *declared* deterministic (``@flow.node(cache=True)``) would collapse."""
    cache = flow._resolved_policies().cache
    if cache is None:
        return
    planned = {n for case in cases.cases[:1] for n in case.plan.nodes}
    if planned and planned <= cache.nodes - cache.per_sample - cache.by_default:
        raise BatchError(
            f"repeats={repeats}, but every node of flow {flow.name!r} that runs is declared deterministic "
            f"(cache=True: {', '.join(map(repr, sorted(planned)))}), so the {repeats} samples would be one cached "
            f"call; declare the node that samples (the model call) with @flow.node(cache='per-sample') (one cache "
            f"entry per sample) or cache=False"
        )


def _attach_live_variants(renderer: Any, state: State) -> None:
    """Give a progress display that can draw per-variant bars (``show_variants``) the batch's counts."""
    show = getattr(renderer, "show_variants", None)
    if not callable(show):
        return
    counts = live_variants(state)
    if counts is None:
        return

    def open_explorer() -> Any:
        from nbflow._batch.explore import explore

        return explore(state.frame if state.frame is not None else state.build())

    show(counts, open_explorer)
