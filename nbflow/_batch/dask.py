"""``flow.batch(rows, executor=client)``: the rows of a batch run on Dask workers, the result is the same.

The client process keeps everything a local batch keeps: the cases, the progress, the store and
the DataFrame. Workers get chunks of rows (``chunk_size``, default: see ``default_chunk_size``) and the flow,
pickled once per batch with cloudpickle (its definition only, see nbflow/_flow/pickling.py); each
chunk runs with the local batch engine on the worker, ``concurrency`` rows at a time, and sends
back one result dict per row. Results are merged as chunks finish: progress, the store (written
by this process only, so ``resume=`` works as locally) and the circuit breaker see them at once.

What does not hold across processes: an ``nf.Limit`` bounds calls per worker process, an
in-memory cache is per worker process, an ``nf.Secret`` cannot be sent (it pickles as REDACTED by
design, so it is refused). Dask cannot stop a running task: a running chunk polls its own task
state and cancels its rows when the client cancelled it; its rows are reported ``cancelled``.

Dask is imported only when a batch is sent to it: ``import nbflow`` never imports it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import io
import pickle
import threading
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from nbflow._batch.cases import STATUS_COLUMNS, Case, Cases
from nbflow._batch.rows import (
    QUESTION_COLUMNS,
    Options,
    State,
    breaker_error,
    clip,
    end_batch,
    render_progress,
    run_rows,
    save_row,
    stop_warning,
    stopped_by,
    unfinished,
)
from nbflow._batch.runs import RunArchive
from nbflow._core.errors import BatchError, NbflowWarning
from nbflow._core.secrets import Secret, secret_texts
from nbflow._core.usage import USAGE_COLUMNS
from nbflow._record.batch_progress import REFRESH, BatchProgress

if TYPE_CHECKING:
    from nbflow._flow.flow import Flow
    from nbflow._store.batch_store import BatchStore

__all__ = ["remote_rows"]

RowsRunner = Callable[["State", Sequence[int], "BatchStore | None", list[str], BatchProgress, Any], Awaitable[None]]

_warned_limits: set[str] = set()  # flow names already warned about (one warning per flow per process)


def remote_rows(state: State) -> RowsRunner:
    """Check the client and the rows, pickle the flow; return the coroutine function that runs the rows.

    Raises BatchError before anything runs: not a synchronous ``distributed.Client``, an
    ``nf.Secret`` input or one held by the flow, or a flow that cannot be pickled.
    """
    client = _check_client(state.opts.executor)
    flow = state.flow
    _check_secrets(flow, state.cases)
    try:
        blob = _pickle_flow(flow)
    except _SecretInFlow:
        raise BatchError(
            f"flow {flow.name!r} holds an nf.Secret (a node's default value, or a global or closure variable a "
            f"node uses), which cannot be sent to Dask workers: a Secret pickles as REDACTED by design. Provide "
            f"the secret on the workers instead, e.g. read it inside the node from an environment variable set on "
            f"every worker (os.environ[...])"
        ) from None
    except Exception as exc:
        raise BatchError(
            f"flow {flow.name!r} cannot be sent to Dask workers: pickling it failed with {type(exc).__name__}: {exc}. "
            f"Node functions, their defaults and the globals they use must be picklable (define clients such as "
            f"HTTP sessions inside the node, or in a module the workers can import)"
        ) from exc
    _warn_limits(flow)

    async def run(
        state: State,
        todo: Sequence[int],
        store: BatchStore | None,
        secret: list[str],
        progress: BatchProgress,
        renderer: Any,
    ) -> None:
        await _run_remote(state, client, blob, todo, store, secret, progress, renderer)

    return run


class _SecretInFlow(Exception):
    pass


def _pickle_flow(flow: Flow) -> bytes:
    """cloudpickle the flow, refusing any nf.Secret in it (it would arrive as REDACTED)."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, Secret):
                raise _SecretInFlow
            return super().reducer_override(obj)

    with io.BytesIO() as buffer:
        Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(flow)
        return buffer.getvalue()


def _check_client(executor: Any) -> Any:
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise BatchError(
            'executor= needs Dask: pip install "nbflow[dask]" (dask[distributed]), then pass a distributed.Client'
        ) from exc
    if not isinstance(executor, Client):
        raise BatchError(
            f"executor= takes a Dask distributed.Client (e.g. Client(LocalCluster()) or Client('tcp://...')), "
            f"got {type(executor).__name__}; omit it to run the batch here"
        )
    if executor.asynchronous:
        raise BatchError(
            "executor= needs a synchronous distributed.Client (Client(...), not Client(..., asynchronous=True)); "
            "nbflow awaits its futures itself, so flow.abatch works with a synchronous client too"
        )
    return executor


def _check_secrets(flow: Flow, cases: Cases) -> None:
    for case in cases.cases:
        for name, value in case.inputs.items():
            if isinstance(value, Secret):
                column = next((c for c, i in cases.input_columns.items() if i == name), name)
                raise BatchError(
                    f"batch row {case.index}: column {column!r} feeds input {name!r} of flow {flow.name!r} with an "
                    f"nf.Secret, which cannot be sent to Dask workers (a Secret pickles as REDACTED by design). "
                    f"Provide the secret on the workers instead, e.g. read it in the node from an environment "
                    f"variable set on every worker (os.environ[...]), and drop the column"
                )


def _limits_of(flow: Flow) -> list[str]:
    names = [f"{flow.name}.{k}" for k in flow._limits]
    for spec in flow._specs.values():
        if spec.flow is not None:
            names += _limits_of(spec.flow)
    return names


def _warn_limits(flow: Flow) -> None:
    limits = _limits_of(flow)
    if not limits or flow.name in _warned_limits:
        return
    _warned_limits.add(flow.name)
    warnings.warn(
        f"flow {flow.name!r} is sent to Dask workers with shared limits ({', '.join(limits)}): each worker process "
        f"gets its own copy, so a Limit bounds calls per worker process, not across the cluster. To bound the "
        f"total, divide the limit by the number of worker processes (this warning is shown once per flow)",
        NbflowWarning,
        stacklevel=5,
    )


# --- the worker side ------------------------------------------------------------------------------
_flows: dict[str, Flow] = {}  # per worker process: one unpickled flow per definition, so limits and caches persist
_flows_lock = threading.Lock()
_KEEP = 8


def _worker_flow(blob: bytes) -> Flow:
    key = hashlib.sha256(blob).hexdigest()
    evicted = None
    with _flows_lock:
        flow = _flows.get(key)
        if flow is None:
            if len(_flows) >= _KEEP:
                evicted = _flows.pop(next(iter(_flows)))
            flow = _flows[key] = pickle.loads(blob)
    if evicted is not None and evicted.resources:
        evicted.close()  # its resource instances on this worker: no chunk can use them any more
    return flow


def _on_worker_loop(main: Callable[[], Awaitable[None]]) -> None:
    """Run a chunk on this worker process's one long-lived loop (nbflow's loop thread).

    Every chunk a worker process runs shares that loop, so a ``@flow.resource`` is built once per
    worker process and reused by its later chunks and batches (SDK clients are bound to their loop).
    The instances close when the worker closes (a worker plugin's teardown), or else at the
    process's exit (nbflow's exit hook, _engine/resources.py), and when the flow is dropped from the
    worker's cache of flows.
    """
    from nbflow._engine.kernel import loop_thread

    _close_with_worker()
    loop_thread().run(main)  # called in a Dask worker's task thread, never on the loop thread itself


_PLUGIN = "nbflow-resources"


def _close_with_worker() -> None:
    """Have this Dask worker close nbflow's resource instances when it closes (once per worker)."""
    try:
        from distributed import WorkerPlugin, get_worker

        worker = get_worker()
        if _PLUGIN in worker.plugins:
            return
    except Exception:  # not on a worker (or Dask's internals changed): the exit hook closes them
        return

    class CloseResources(WorkerPlugin):
        def teardown(self, worker: Any) -> None:
            from nbflow._engine.resources import close_all

            close_all()

    # Worker.close() calls every plugin's teardown. Added in place (not plugin_add, a coroutine on
    # the worker's own loop): a dict entry, which the worker only reads when it closes.
    worker.plugins.setdefault(_PLUGIN, CloseResources())


def _run_chunk(
    blob: bytes,
    items: list[tuple[int, dict[str, Any], int | None]],
    outputs: list[str],
    concurrency: int,
    row_timeout: float | None,
    prefix: str,
    keep: str = "failed",
    lineage: bool = False,
) -> bytes:
    """On a worker: run the rows with the local batch engine; return the pickled ``[(index, result)]``.

    ``lineage``: each row whose run is not kept brings its lineage back (the client stores it with the row)."""
    import cloudpickle

    flow = _worker_flow(blob)
    graph = flow.graph
    plans: dict[frozenset[str], Any] = {}
    cases: list[Case] = []
    for pos, (_, inputs, sample) in enumerate(items):
        key = frozenset(inputs)
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = graph.plan(sorted(key), outputs)
        cases.append(Case(pos, dict(inputs), inputs, plan, sample=sample))  # sample: keys of per-sample nodes
    opts = Options(concurrency, outputs, False, None, False, False, None, False, None, None, row_timeout, False)
    state = State.new(flow, Cases(cases, [], [], {}, outputs), opts)
    state.archive = RunArchive(keep, len(cases), None, findable=False)
    state.lineages = {} if lineage else None
    progress = BatchProgress(flow.name, len(cases))

    cancelled = _cancel_watch()

    async def main() -> None:
        rows = asyncio.ensure_future(run_rows(state, list(range(len(cases))), None, [], progress, None))
        while not rows.done():
            await asyncio.wait({rows}, timeout=_WATCH)
            if not rows.done() and cancelled():
                rows.cancel()  # the client dropped this chunk: stop its rows and free the worker
        if not rows.cancelled():
            rows.result()

    _on_worker_loop(main)
    columns = (*outputs, *STATUS_COLUMNS)
    kept = {int(run.run_id.rsplit("-", 1)[1]): run for run in state.archive.runs.values()}
    rows = []
    for pos, ((index, _, _), result) in enumerate(zip(items, state.results, strict=True)):
        assert result is not None
        row = {k: result[k] for k in columns if k in result}
        row.update({k: result[k] for k in QUESTION_COLUMNS if k in result})
        row.update((k, result[k]) for k in USAGE_COLUMNS if k in result)  # nf.usage() on the worker
        row["run_id"] = f"{prefix}-{index}"  # like a local batch: "<batch call>-<row index>"
        run = kept.get(pos)
        if run is not None:  # the row's whole run record travels back with it (keep=)
            run.run_id = row["run_id"]
            row[_RUN] = run
        if state.lineages and pos in state.lineages:  # and its lineage, which the row's store keeps
            row[_LINEAGE] = state.lineages[pos]
        rows.append((index, row))
    try:
        return cloudpickle.dumps(rows)
    except Exception:
        for _, row in rows:  # first without the run records, then without unsendable outputs
            row.pop(_RUN, None)
        try:
            return cloudpickle.dumps(rows)
        except Exception:
            return cloudpickle.dumps([_sendable(index, row, outputs) for index, row in rows])


_RUN = "__nbflow_run__"  # a returned row's key for its run record
_LINEAGE = "__nbflow_lineage__"  # ... for its lineage (a kept run's record has none: its row keeps it)


_WATCH = 0.5  # seconds between checks that the client still wants a running chunk


def _cancel_watch() -> Callable[[], bool]:
    """On a Dask worker: a check that this task was cancelled by the client (Dask cannot stop a running task).

    Reads the worker's own state for the task (no message to the scheduler). Outside a worker, or
    if Dask's internals change, the chunk simply runs to its end.
    """
    try:
        from distributed import get_worker

        worker = get_worker()
        key = worker.get_current_task()
    except Exception:
        return lambda: False

    def cancelled() -> bool:
        try:
            task = worker.state.tasks.get(key)
            return task is None or task.state in ("cancelled", "released", "forgotten")
        except Exception:
            return False

    return cancelled


def _sendable(index: int, row: dict[str, Any], outputs: list[str]) -> tuple[int, dict[str, Any]]:
    """One row's result, or a failed row naming the output that cannot be sent back."""
    import cloudpickle

    for o in outputs:
        try:
            cloudpickle.dumps(row[o])
        except Exception as exc:
            row = {**row, **dict.fromkeys(outputs)}
            row.update(
                status="failed",
                error_type=type(exc).__name__,
                error_message=f"the output of node {o!r} cannot be sent back from the Dask worker (not picklable: "
                f"{exc}); return plain data (dicts, lists, numbers, strings, DataFrames)",
                error_node=o,
            )
            break
    return index, row


# --- the client side ------------------------------------------------------------------------------
async def _run_remote(
    state: State,
    client: Any,
    blob: bytes,
    todo: Sequence[int],
    store: BatchStore | None,
    secret: list[str],
    progress: BatchProgress,
    renderer: Any,
) -> None:

    flow, cases, opts = state.flow, state.cases, state.opts
    threads = max(1, sum(client.nthreads().values()))
    size = opts.chunk_size or default_chunk_size(len(todo), threads, opts.concurrency)
    chunks = [list(todo[i : i + size]) for i in range(0, len(todo), size)]
    window = 2 * threads  # chunks submitted ahead, so workers never wait for the client
    # Sent to the cluster once, not with every chunk (a flow may close over big data). Broadcast to every
    # worker: scattered to one, the scheduler would send every chunk there (data locality) and few, heavy
    # chunks would queue on one worker while the others idle.
    flow_data = client.scatter(blob, hash=False, broadcast=True) if todo else None
    loop = asyncio.get_running_loop()
    arrived: asyncio.Queue[tuple[Any, tuple[bool, Any]]] = asyncio.Queue()
    in_flight: dict[Any, list[int]] = {}
    prefix = uuid.uuid4().hex[:8]
    submitted = 0
    breaker = opts.max_consecutive_failures
    consecutive = 0
    last_error = ""

    def on_done(future: Any) -> None:  # in a Dask client thread
        try:
            outcome: tuple[bool, Any] = (True, future.result())
        except BaseException as exc:
            outcome = (False, exc)
        try:
            loop.call_soon_threadsafe(arrived.put_nowait, (future, outcome))
        except RuntimeError:  # the batch's loop is gone: it was stopped, nothing waits for this chunk
            pass

    if state.archive is not None:
        state.archive.register(prefix)

    def submit() -> None:
        nonlocal submitted
        while submitted < len(chunks) and len(in_flight) < window and state.stopped is None:
            rows = chunks[submitted]
            items = [(i, cases.cases[i].inputs, cases.cases[i].sample) for i in rows]
            future = client.submit(
                _run_chunk,
                flow_data,
                items,
                cases.outputs,
                opts.concurrency,
                opts.row_timeout,
                prefix,
                opts.keep,
                store is not None,
                key=f"nbflow-{flow.name}-{prefix}-{submitted}",
                pure=False,
            )
            submitted += 1
            in_flight[future] = rows
            progress.in_flight += len(rows)
            future.add_done_callback(on_done)

    def cancel_in_flight() -> None:
        futures = list(in_flight)
        for rows in in_flight.values():
            for i in rows:
                state.results[i] = _unrun(cases.cases[i], cases.outputs, "cancelled")
        progress.in_flight = 0
        in_flight.clear()
        if futures:
            with contextlib.suppress(Exception):  # a closed client: nothing left to cancel, keep the rows
                client.cancel(futures)

    deadline = None if opts.timeout is None else loop.time() + opts.timeout
    next_render = loop.time() + REFRESH

    def render() -> None:
        nonlocal next_render
        if renderer is not None and loop.time() >= next_render:
            next_render = loop.time() + REFRESH
            render_progress(renderer, "update", progress)

    try:
        submit()
        while in_flight:
            wait = REFRESH if deadline is None else min(REFRESH, deadline - loop.time())
            if wait <= 0:
                state.stopped = f"timeout: the batch did not finish within {opts.timeout}s"
                cancel_in_flight()
                break
            try:
                # Short waits also wake the loop 4x/s, which keeps a kernel interrupt prompt (ipykernel #881).
                future, (ok, value) = await asyncio.wait_for(arrived.get(), wait)
            except TimeoutError:
                render()
                continue
            rows = in_flight.pop(future, None)
            if rows is None:
                continue  # cancelled already
            progress.in_flight -= len(rows)
            for i, result in _chunk_results(rows, ok, value, cases):
                run = result.pop(_RUN, None)
                lineage = result.pop(_LINEAGE, None)
                state.results[i] = result
                if run is not None and state.archive is not None:
                    run.graph, run._flow = flow.graph, flow
                    state.archive.offer(run, result["status"])
                store_failed = (
                    save_row(
                        store,
                        state,
                        i,
                        result,
                        secret,
                        secrets=secret_texts(cases.cases[i].inputs, by_name=bool(secret)),
                        run=run,
                        lineage=lineage,
                    )
                    if store is not None
                    else None
                )
                if result["status"] == "succeeded":
                    progress.succeeded += 1
                    consecutive = 0
                elif result["status"] == "paused":
                    progress.paused += 1
                    consecutive = 0
                elif result["status"] == "failed":
                    progress.failed += 1
                    consecutive += 1
                    last_error = breaker_error(result, cases.cases[i].inputs)
                if store_failed is not None:
                    state.not_stored.add(i)
                    if state.stopped is None:
                        state.stopped = store_failed
                if breaker is not None and consecutive >= breaker and state.stopped is None:
                    state.stopped = (
                        f"circuit breaker: {consecutive} consecutive rows failed "
                        f"(max_consecutive_failures={breaker}); last error: {clip(last_error)}"
                    )
            if state.stopped is not None:
                cancel_in_flight()
                break
            submit()
            render()
    except BaseException as exc:
        cancel_in_flight()
        outcome = stopped_by(exc, state, progress, renderer, flow.name)
        if outcome is exc:
            raise
        raise outcome from exc
    end_batch(state, progress, renderer, state.stopped)
    stop_warning(state, store is not None)


def default_chunk_size(rows: int, threads: int, concurrency: int) -> int:
    """Rows per Dask task: ~4 tasks per worker thread, at least ``concurrency``, at most ``10 × concurrency``,
    and never so many that a worker thread gets none (few, heavy rows: 8 rows on 2 threads are 2 chunks).

    A task costs milliseconds of scheduling, so a chunk should hold many rows; but results,
    progress and the store only see a chunk when it ends, so not too many.
    """
    size = max(concurrency, min(-(-rows // (4 * threads)), 10 * concurrency))
    return max(1, min(size, -(-rows // threads)))


def _chunk_results(rows: list[int], ok: bool, value: Any, cases: Cases) -> list[tuple[int, dict[str, Any]]]:
    what = "the Dask task running this row failed"
    if ok:
        try:
            returned: list[tuple[int, dict[str, Any]]] = pickle.loads(value)
        except Exception as exc:  # e.g. an output whose class the client cannot import
            ok, value = False, exc
            what = "the results of this row's chunk cannot be unpickled here, in the client"
        else:
            return [(i, {**cases.cases[i].row, **result}) for i, result in returned]
    # Dask raises concurrent.futures' CancelledError (a cancelled future), asyncio's is a BaseException.
    cancelled = isinstance(value, asyncio.CancelledError | concurrent.futures.CancelledError)
    status = "cancelled" if cancelled else "failed"
    out = []
    for i in rows:
        result = _unrun(cases.cases[i], cases.outputs, status)
        if status == "failed":
            result.update(
                error_type=type(value).__name__,
                error_message=f"{what}: {_short(value)}",
            )
        out.append((i, result))
    return out


def _unrun(case: Case, outputs: list[str], status: str) -> dict[str, Any]:

    result = unfinished(case, outputs, None)
    result["status"] = status
    return result


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
