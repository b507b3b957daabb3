"""nbflow's worker threads for sync nodes: daemon threads, so an abandoned call never holds up exit.

Python cannot stop a thread. When a sync node's call is abandoned (its ``timeout=`` passed, the run's
deadline, a cancel or an interrupt), the run goes on at once and the call finishes in the background.
anyio's worker threads are not daemon threads: the interpreter joins them at exit, so a script whose
abandoned node sleeps 10 more seconds took 10 more seconds to exit. These threads are daemon threads:
the process exits as soon as the main thread is done, dropping an abandoned call mid-way (as it drops
any daemon thread's work). Calls that were not abandoned are awaited as before, so nothing a run
reports is lost.

Like anyio's own workers, each thread is claimed for the loop that awaits its call while it runs one, so a sync
node can call back into that loop with ``anyio.from_thread.run(async_fn, ...)`` / ``run_sync`` (the anyio way;
``asyncio.run_coroutine_threadsafe`` works too, given the loop).

Same shape as anyio's pool: idle workers are reused (most recently idle first) and leave after
``IDLE_SECONDS`` without work; concurrent calls are capped by anyio's default thread limiter (40
tokens, shared with ``anyio.to_thread``), whose token is given back when a call is abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

import anyio.to_thread

__all__ = ["IDLE_SECONDS", "NOT_RUN", "run_in_thread"]

IDLE_SECONDS = 10.0

_Job = tuple[contextvars.Context, Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]

_lock = threading.Lock()
_idle: list[_Worker] = []


class _Worker(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="nbflow-worker", daemon=True)
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.claimed: asyncio.AbstractEventLoop | None = None  # the loop this thread is claimed for (_claim)
        self.claim: contextlib.AbstractContextManager[Any] | None = None

    def run(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with _lock:
                    if self in _idle:  # no job was handed to it meanwhile: leave
                        _idle.remove(self)
                        self._unclaim()
                        return
                continue
            ctx, func, loop, future = job
            result: Any = None
            error: BaseException | None = None
            if not future.cancelled():  # (cancelled before it started: not run at all)
                if loop is not self.claimed:
                    self._claim(loop)  # (never raises: a claim is a convenience, the call runs anyway)
                try:
                    result = ctx.run(func)
                except BaseException as exc:  # reported to the awaiting task, never lost here
                    error = exc
            del job, ctx, func
            with _lock:
                _idle.append(self)
            try:
                loop.call_soon_threadsafe(_report, future, result, error)
            except RuntimeError:  # the loop closed meanwhile (an abandoned call outlived it)
                pass
            del future, loop, result, error

    def _claim(self, loop: asyncio.AbstractEventLoop) -> None:
        """Mark this thread an anyio worker thread of ``loop`` (``anyio.from_thread``), until a job of another
        loop comes (once per loop, not per call: ~3 µs).

        anyio has no public call for it (``to_thread.run_sync`` does the same for its own threads); should a later
        anyio move it, calls run unclaimed, as before (tests/engine/test_sync_nodes.py pins that they are not).
        The claim is left here, in this thread, before the thread ends (``_unclaim``): anyio's claim is a
        generator, and one left to the garbage collector would run its clean-up in whichever thread collects
        it, removing that thread's claim (seen: a worker's next claim failed and its call was lost)."""
        self._unclaim()
        self.claimed = loop
        make = _CLAIM[0] if _CLAIM else _load_claim()
        if make is None:
            return
        try:
            claim = make(loop)
            claim.__enter__()
        except Exception:  # (another anyio: see above)
            return
        self.claim = claim

    def _unclaim(self) -> None:
        claim, self.claim, self.claimed = self.claim, None, None
        if claim is not None:
            with contextlib.suppress(Exception):
                claim.__exit__(None, None, None)


_CLAIM: list[Callable[[asyncio.AbstractEventLoop], contextlib.AbstractContextManager[Any]] | None] = []


def _load_claim() -> Callable[[asyncio.AbstractEventLoop], contextlib.AbstractContextManager[Any]] | None:
    try:
        from anyio._core._eventloop import claim_worker_thread, get_async_backend

        backend = get_async_backend("asyncio")
    except Exception:  # (another anyio: see _Worker._claim)
        _CLAIM.append(None)
    else:
        _CLAIM.append(lambda loop: claim_worker_thread(backend, loop))
    return _CLAIM[0]


def _report(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # abandoned: the caller went on without it
        return
    if error is None:
        future.set_result(result)
    elif isinstance(error, StopIteration):  # a Future cannot carry StopIteration
        wrapped = RuntimeError("the function raised StopIteration")
        wrapped.__cause__ = error
        future.set_exception(wrapped)
    else:
        future.set_exception(error)


def _worker() -> _Worker:
    with _lock:
        if _idle:
            return _idle.pop()
    worker = _Worker()
    worker.start()
    return worker


NOT_RUN: Any = object()  # run_in_thread(unless=...): the call was not made


async def run_in_thread(func: Callable[[], Any], unless: Callable[[], bool] | None = None) -> Any:
    """``func()`` in a daemon worker thread, in a copy of this context; abandoned if this is cancelled.

    ``unless`` is asked once a thread token is held: if it says True the call is not made and
    ``NOT_RUN`` is returned (a sync node that proved quick while this call waited for a token).
    """
    loop = asyncio.get_running_loop()
    async with anyio.to_thread.current_default_thread_limiter():
        if unless is not None and unless():
            return NOT_RUN
        future: asyncio.Future[Any] = loop.create_future()
        _worker().jobs.put((contextvars.copy_context(), func, loop, future))
        return await future
