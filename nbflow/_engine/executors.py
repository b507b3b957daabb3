"""Where a sync node's function runs: a worker thread, or a worker process (``executor="process"``).

Threads (the default for sync functions) are cheap, but Python cannot stop one: an interrupt,
a cancel or a timeout returns at once while the function goes on burning a core. So when that
happens this module says so at once (``NodeStillRunningWarning``, naming the node and the fix).

A process node runs in a pooled worker process (``nbflow/_engine/worker.py``), its function
and inputs sent with cloudpickle (notebook-defined functions travel by value, as with Dask). Workers
start ahead, importing what the nodes' code imports: when a process node is defined (``warm_defined``)
and when a run starts (``warm_pool``). A cancel, an interrupt or a timeout kills the worker: the work
stops for real. CPU-bound batch rows
of process nodes run in parallel on every core (the pool has one worker per core:
``nf.config.process_workers``).

Concurrent CPU nodes must not oversubscribe the cores: each process call gets a BLAS/OpenMP thread
budget of cores // busy workers, and while several sync thread nodes run at once the process-wide
BLAS/OpenMP pools are capped at cores // running (threadpoolctl, when installed).
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from nbflow._core.config import config
from nbflow._core.errors import NodeStillRunningWarning, ProcessNodeError
from nbflow._engine.threads import run_in_thread
from nbflow._graph.graph import GNode

__all__ = [
    "call_in_process",
    "call_in_thread",
    "call_on_cluster",
    "in_thread",
    "in_thread_unless",
    "on_dask_worker",
    "process_pool",
    "thread_budget",
    "warm_defined",
    "warm_pool",
]


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --- threads -------------------------------------------------------------------------------------


class _ThreadBudget:
    """Caps process-wide BLAS/OpenMP threads while several sync thread nodes run at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0
        self._applied: int | None = None
        self._original: Any = None  # threadpoolctl's limiter: restores the original sizes
        self._controller: Any = None
        self._modules = 0

    def enter(self) -> None:
        with self._lock:
            self.running += 1
            self._apply()

    def leave(self) -> None:
        with self._lock:
            self.running -= 1
            self._apply()

    def _apply(self) -> None:
        if "numpy" not in sys.modules:  # no BLAS loaded: nothing to cap (asked before ``cores()``, a system call
            return  # made twice per call in a worker thread, holding the GIL while 40 threads wait for it)
        want = max(1, cores() // self.running) if self.running > 1 else None
        if want == self._applied:
            return
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            return
        try:
            if want is None:
                if self._original is not None:
                    self._original.restore_original_limits()
                    self._original = None
            else:
                # Finding the loaded BLAS/OpenMP libraries costs milliseconds: once per set of imports.
                if self._controller is None or self._modules != len(sys.modules):
                    self._controller = ThreadpoolController()
                    self._modules = len(sys.modules)
                limiter = self._controller.limit(limits=want)
                if self._original is None:
                    self._original = limiter
        except Exception:  # a library threadpoolctl cannot drive: never fail a node over it
            return
        self._applied = want


_budget = _ThreadBudget()


def thread_budget() -> int:
    """How many sync thread nodes are running right now (for tests and the docs' example)."""
    return _budget.running


async def call_in_thread(g: GNode, kwargs: dict[str, Any]) -> Any:
    """Call ``g``'s sync function in a worker thread; if cancelled while it still runs, say so at once."""
    return await in_thread(g.spec.name, g.spec.func, **kwargs)


async def in_thread(node: str, func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` in a worker thread, with its share of the BLAS/OpenMP threads; a thread
    still running when the call is cancelled (an interrupt, a timeout) is reported at once, naming ``node``."""
    return await in_thread_unless(node, None, func, *args, **kwargs)


async def in_thread_unless(node: str, unless: Callable[[], bool] | None, func: Any, *args: Any, **kwargs: Any) -> Any:
    """``in_thread``, or ``NOT_RUN`` (nbflow._engine.threads) when ``unless()`` is true once a thread is free."""
    state = {"done": False}

    def target() -> Any:
        _budget.enter()
        try:
            return func(*args, **kwargs)
        finally:
            state["done"] = True
            _budget.leave()

    try:
        return await run_in_thread(target, unless)  # a daemon thread: an abandoned call never holds up exit
    except BaseException:
        if not state["done"]:
            warn_still_running(node)
        raise


def warn_still_running(node: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always", NodeStillRunningWarning)  # every interrupt, not once per place
        try:
            warnings.warn(
                f"node {node!r} is still running in a worker thread: the run was stopped, but Python "
                f"cannot stop a thread, so its work goes on using the CPU until it returns. "
                f"Fix: @flow.node(executor='process') runs it in a worker process that an interrupt kills",
                NodeStillRunningWarning,
                stacklevel=2,
            )
        except Warning:  # warnings turned into errors: never replace the cancellation with one
            pass


# --- processes -----------------------------------------------------------------------------------


# Load worker.py by its path, not as ``nbflow._engine.worker``: importing the nbflow package would
# cost a worker ~1 s; the worker needs only the stdlib and cloudpickle.
_BOOT = (
    "import sys, importlib.util as u; s = u.spec_from_file_location('_nbflow_worker', sys.argv[1]); "
    "m = sys.modules[s.name] = u.module_from_spec(s); s.loader.exec_module(m); m.main()"
)


class _Worker:
    def __init__(self) -> None:
        paths = [p for p in sys.path if p]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, os.path.join(os.path.dirname(__file__), "worker.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=os.getcwd(),
        )
        self.pid = self.proc.pid
        self.imported: set[str] = set()  # the modules ``preload`` imported here

    def call(self, payload: bytes) -> bytes | None:
        """Send one call and wait for its reply (None: the worker died or was killed)."""
        from nbflow._engine.worker import read_frame, write_frame

        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            write_frame(self.proc.stdin, payload)  # type: ignore[arg-type]
        except (BrokenPipeError, OSError, ValueError):
            return None
        try:
            return read_frame(self.proc.stdout)  # type: ignore[arg-type]
        except (OSError, ValueError):
            return None

    def preload(self, modules: list[str]) -> bool:
        """Import ``modules`` in the worker before its first call (what the nodes' code imports); False: it died."""
        import importlib

        import cloudpickle

        for name in modules:
            if name in self.imported:
                continue
            if self.call(cloudpickle.dumps((importlib.import_module, {"name": name}, None))) is None:
                return False
            if name == "threadpoolctl":  # also find the BLAS/OpenMP libraries, as each call's thread budget does
                from threadpoolctl import threadpool_info

                if self.call(cloudpickle.dumps((threadpool_info, {}, None))) is None:
                    return False
            self.imported.add(name)  # (a module that failed to import there is not tried again)
        return True

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except Exception:
                pass


class ProcessPool:
    """Worker processes shared by every flow in this interpreter: at most ``size`` busy at once.

    Idle workers are kept (a worker's imports are paid once); a worker whose call was cancelled is
    killed, and one that died is replaced on the next call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self.busy = 0
        self.started = 0
        self.killed: list[int] = []  # pids of workers killed by a cancel/interrupt/timeout (last 100)
        self.warming = 0  # workers being started ahead of the calls (``warm``): a call waits for one
        self.reserved = 0  # calls waiting for one of those
        self.preloaded: dict[str, None] = {}  # modules every warmed worker imports before its first call
        self._starting: list[_Worker] = []  # workers importing ``preloaded``: killed at exit too

    @property
    def size(self) -> int:
        return config.process_workers or cores()

    @property
    def pids(self) -> list[int]:
        """The pids of the live workers (idle ones; busy ones are not listed)."""
        with self._lock:
            return [w.pid for w in self._idle]

    def _take(self, reserved: bool) -> tuple[str, _Worker | None]:
        """("idle", a worker) · ("cold", None): start one · ("full", None): every worker busy, wait ·
        ("warm", None): wait for one being started (``reserved``: this call waits for one already)."""
        with self._lock:
            if self.busy >= self.size:
                return "full", None
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    self.busy += 1
                    if reserved:
                        self.reserved -= 1
                    return "idle", worker
            # A warm worker is on its way: wait for it (a cold one would cost as much), one call per worker
            # being started; the others (a batch's first rows) start their own at once.
            if self.warming >= self.reserved + (not reserved):
                self.reserved += not reserved
                return "warm", None
            if reserved:
                self.reserved -= 1
            self.busy += 1
            return "cold", None

    def warm(self, modules: list[str], n: int) -> None:
        """Start up to ``n`` workers ahead of the calls, in a background thread, each importing ``modules``
        first, so that a process node's first call costs what a later one does (docs/data_pipelines.md).
        Idle workers started before some of ``modules`` were known import them too."""
        with self._lock:
            if not self.preloaded:  # every call sets its thread budget with threadpoolctl: imported ahead too
                import importlib.util

                self.preloaded = {"threadpoolctl": None} if importlib.util.find_spec("threadpoolctl") else {}
            for m in modules:
                self.preloaded.setdefault(m)
            want = set(self.preloaded)
            stale = [w for w in self._idle if not want <= w.imported]
            self._idle = [w for w in self._idle if w not in stale]
            have = len(self._idle) + len(stale) + self.warming
            n = max(0, min(n - have, self.size - self.busy - have))
            if not n and not stale:
                return
            self.warming += n + len(stale)  # a call waits for these rather than starting a cold one
        threading.Thread(target=self._start_warm, args=(n, stale), name="nbflow-warm-workers", daemon=True).start()

    def _start_warm(self, n: int, stale: list[_Worker]) -> None:
        for worker in [*stale, *[None] * n]:
            ready = False
            try:
                if worker is None:
                    worker = _Worker()
                    self.started += 1
                with self._lock:
                    self._starting.append(worker)
                    modules = list(self.preloaded)
                ready = worker.preload(modules)
            except Exception:  # could not start one: the call starts its own, as without warm-up
                pass
            with self._lock:
                self.warming -= 1
                if worker is not None and worker in self._starting:  # (not stopped by ``shutdown``)
                    self._starting.remove(worker)
                    if ready:
                        self._idle.append(worker)
                        continue
            if worker is not None:
                worker.kill()

    async def acquire(self) -> tuple[_Worker, float]:
        """A worker for one call, and how long the call waited for one (every worker busy: the queue; or
        for one being started ahead, which a cold start would not have been quicker than)."""
        delay = 0.002
        waited = 0.0
        reserved = False
        try:
            while True:
                how, worker = self._take(reserved)
                if how in ("idle", "cold"):
                    reserved = False
                    break
                reserved = reserved or how == "warm"
                since = time.monotonic()
                await anyio.sleep(delay)  # wait (loop-agnostic, batches share the pool)
                waited += time.monotonic() - since
                delay = min(delay * 2, 0.02)
        finally:
            if reserved:  # cancelled while waiting for a warm worker
                with self._lock:
                    self.reserved -= 1
        if worker is None:
            try:
                worker = _Worker()
            except BaseException:
                with self._lock:
                    self.busy -= 1
                raise
            self.started += 1
        return worker, waited

    def release(self, worker: _Worker, keep: bool) -> None:
        with self._lock:
            self.busy -= 1
            if keep and worker.proc.poll() is None:
                self._idle.append(worker)
                return
        worker.kill()

    def shutdown(self) -> None:
        """Stop the idle workers (busy ones stop when their call ends). Run at exit."""
        with self._lock:
            idle, self._idle, self._starting = [*self._idle, *self._starting], [], []
        for w in idle:
            w.kill()


process_pool = ProcessPool()
atexit.register(process_pool.shutdown)


class RemoteTraceback(Exception):
    """The traceback of a node's exception as raised in its worker process (the ``__cause__``)."""

    def __str__(self) -> str:
        return "\n\n" + str(self.args[0]) if self.args else ""


async def call_in_process(g: GNode, kwargs: dict[str, Any]) -> Any:
    """Call ``g``'s function in a worker process; a cancel (interrupt, timeout) kills the worker."""
    import cloudpickle

    name = g.spec.name
    client = g.spec.options.get("dask_client")
    if client is not None:
        return await call_on_cluster(g, kwargs, client)
    if on_dask_worker():  # the Dask worker is the process: no second pool beside its own (docs/engine.md)
        return await call_in_thread(g, kwargs)
    pool = process_pool
    worker, waited = await pool.acquire()
    if waited:
        _queued(waited)
    keep = True  # cancelled at the checkpoint below: the worker did nothing, keep it
    try:
        # Let the rows starting with this one take their workers first, so the thread budget counts them
        # (a batch's first row would otherwise get every core's threads while the others start beside it).
        await anyio.lowlevel.checkpoint()
        keep = False
        threads = max(1, cores() // max(1, pool.busy + pool.reserved))  # (+ the calls about to get a warm one)
        try:
            payload = cloudpickle.dumps((g.spec.func, kwargs, threads))
        except Exception as exc:
            param = _unpicklable_param(kwargs)
            what = f"its input {param!r}" if param else "its function"
            keep = True
            raise ProcessNodeError(
                name,
                f"{what} cannot be sent to a worker process ({type(exc).__name__}: {exc}); pass picklable "
                f"data, or run the node in a thread (drop executor='process')",
            ) from None
        try:
            reply = await anyio.to_thread.run_sync(worker.call, payload, abandon_on_cancel=True)
        except BaseException:
            worker.kill()  # cancelled, interrupted, timed out: stop the work for real
            pool.killed = [*pool.killed[-99:], worker.pid]
            raise
        if reply is None:
            try:
                code: int | None = worker.proc.wait(timeout=2)  # EOF comes a moment before the exit status
            except subprocess.TimeoutExpired:
                code = None
            raise ProcessNodeError(
                name,
                f"its worker process (pid {worker.pid}) died while running it (exit code {code}); "
                f"out of memory or a crash in native code? Run it once directly to see",
            )
        keep = True
    finally:
        pool.release(worker, keep)
    status, *rest = cloudpickle.loads(reply)
    if status == "ok":
        return rest[0]
    if status == "error":
        error, text = rest
        error.__cause__ = RemoteTraceback(text)
        raise error
    raise ProcessNodeError(name, f"{rest[0]}; return picklable data (e.g. plain values, DataFrames, arrays)")


def warm_pool(graph: Any, calls: int) -> None:
    """A run of ``graph`` starts: start up to ``calls`` workers (one per process node) ahead, importing what
    its process nodes' code imports, while the nodes upstream of them run. (A batch's rows start their
    workers together, so that the BLAS budget of each is counted right: not warmed.)"""
    found = graph._views.get("process_modules")
    if found is None:
        nodes = [
            g
            for g in graph.nodes.values()
            if g.spec.options.get("executor") == "process" and "dask_client" not in g.spec.options
        ]
        found = graph._views["process_modules"] = (len(nodes), _modules_of([g.spec.func for g in nodes]))
    count, modules = found
    if count and not on_dask_worker():
        process_pool.warm(modules, min(calls, count))


def warm_defined(funcs: list[Any]) -> None:
    """Process nodes of ``funcs`` were defined: start a worker for each now (up to the pool's size), importing
    what their code imports, so that it is warm when the first run reaches them (a notebook runs the flow in a
    later cell; a script or the CLI goes on to read its data). Called in a background thread: never blocks
    the definition. Not in a process that cannot own a pool: a Dask worker (its nodes run in its threads),
    a nbflow worker or a multiprocessing child importing the flow's module (that would nest pools)."""
    if on_dask_worker() or "_nbflow_worker" in sys.modules:
        return
    mp = sys.modules.get("multiprocessing")
    if mp is not None and mp.parent_process() is not None:
        return
    process_pool.warm(_modules_of(funcs), len(funcs))


def _modules_of(funcs: list[Any]) -> list[str]:
    """The importable modules a function's code refers to (its own, and its globals' and closure's:
    ``sklearn.ensemble``)."""
    import types

    names: dict[str, None] = {}
    for func in funcs:
        cells = [c.cell_contents for c in getattr(func, "__closure__", None) or () if _filled(c)]
        refs = [func, *getattr(func, "__globals__", {}).values(), *cells]
        for ref in refs:
            name = ref.__name__ if isinstance(ref, types.ModuleType) else getattr(ref, "__module__", None)
            if not isinstance(name, str) or name in ("__main__", "builtins") or name.startswith("nbflow"):
                continue
            top = name.partition(".")[0]
            if top in sys.stdlib_module_names or top.startswith("_"):
                continue
            module = sys.modules.get(name)
            if module is not None and getattr(module, "__file__", None):
                names.setdefault(name)
    return list(names)


def _filled(cell: Any) -> bool:
    try:
        return cell.cell_contents is not _filled  # (any value: the cell is filled)
    except ValueError:  # a closure variable not assigned yet
        return False


async def call_on_cluster(g: GNode, kwargs: dict[str, Any], client: Any) -> Any:
    """Call ``g``'s function as a task on the Dask cluster of ``client`` (``executor=client``).

    The function and inputs travel as Dask sends them (cloudpickle); a worker that dies mid-call is
    replaced by Dask, which runs the task again on another worker; a cancel (interrupt, ``timeout=``,
    a run's deadline) cancels the task. The exception the function raised is the node's error.
    """
    import uuid

    future = client.submit(g.spec.func, **kwargs, pure=False, key=f"nbflow-{g.spec.name}-{uuid.uuid4().hex[:12]}")
    try:
        return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
    except BaseException:
        future.cancel()
        raise


def on_dask_worker() -> bool:
    """Whether this process hosts a Dask worker (a batch row or a node sent to a cluster)."""
    module = sys.modules.get("distributed")
    if module is None:
        return False
    return bool(getattr(getattr(module, "Worker", None), "_instances", ()))


def _queued(waited: float) -> None:
    """The node's attempt waited ``waited`` seconds for a worker: ``attempt.queued``, and its run time
    (``started_at``, so ``duration`` and a batch row's ``latency``) starts when a worker took it."""
    from nbflow._core.usage import CURRENT_NODE

    where = CURRENT_NODE.get()
    rec = None if where is None else where.node
    if rec is None or not rec.attempts:
        return
    attempt = rec.attempts[-1]
    attempt.queued = (attempt.queued or 0.0) + waited
    attempt.started_at += waited
    if rec.started_at is not None:
        rec.started_at += waited


def _unpicklable_param(kwargs: dict[str, Any]) -> str | None:
    import cloudpickle

    for k, v in kwargs.items():
        try:
            cloudpickle.dumps(v)
        except Exception:
            return k
    return None
