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

A token is held for a thread's turn of work (a ``_Lease``), not for one call: a call that finds no free
token waits in its loop's queue (``_Lane``), and a thread that finishes a call takes the next waiting call
of the same loop itself, with the same token. Handing the token back to the loop and the loop handing it
to the next call cost three loop turns per call (report, release, wake the waiter): with more waiting
calls than tokens (a fan-out of 500 blocking nodes), each wave of 40 started a few ms late (measured:
``benchmarks/io_fanout.py``, the ``sync`` shape). Only a thread that finds the queue empty gives the token
back, on the loop (``_give_back``); calls queued while other users of the limiter hold every token are
started by one task per loop that waits for the limiter (``_feed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio.to_thread

__all__ = ["IDLE_SECONDS", "NOT_RUN", "run_in_thread"]

IDLE_SECONDS = 10.0

_lock = threading.Lock()  # guards _idle, every lane's queue and every lease's call
_idle: list[_Worker] = []


class _Call:
    """One call to make in a worker thread: in a copy of its caller's context, reported to ``future``."""

    __slots__ = ("ctx", "func", "future", "lease", "loop", "unless")

    def __init__(
        self,
        func: Callable[[], Any],
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        unless: Callable[[], bool] | None,
    ) -> None:
        self.ctx: contextvars.Context | None = contextvars.copy_context()
        self.func: Callable[[], Any] | None = func
        self.loop = loop
        self.future = future
        self.unless = unless
        self.lease: _Lease | None = None  # the token it runs with (None: waiting in its lane's queue)


class _Lane:
    """The calls of one limiter (one loop's) waiting for a token, oldest first."""

    __slots__ = ("feeding", "limiter", "waiting")

    def __init__(self, limiter: Any) -> None:
        self.limiter = limiter
        self.waiting: deque[_Call] = deque()
        self.feeding = False  # a ``_feed`` task waits for the limiter on the queue's behalf


class _Lease:
    """One token of ``lane.limiter``, held on this object's behalf while threads run calls with it."""

    __slots__ = ("call", "detached", "lane")

    def __init__(self, lane: _Lane) -> None:
        self.lane = lane
        self.call: _Call | None = None  # the call it runs now
        self.detached = False  # its call was abandoned and the token given back: the thread keeps no token


_lanes: weakref.WeakKeyDictionary[Any, _Lane] = weakref.WeakKeyDictionary()
# A loop's lane, found without asking anyio (``_lane``): ``current_default_thread_limiter()`` costs ~6 µs a call (sniffio,
# the backend, a RunVar read), on the loop's thread, once per sync call: a fan-out of 50 blocking nodes paid it 50 times
# in a row before its first worker thread could take the GIL (benchmarks/io_fanout.py, the ``sync`` shape).
_lane_of_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane] = weakref.WeakKeyDictionary()
_feeders: set[asyncio.Task[None]] = set()  # the running ``_feed`` tasks


class _Worker(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="nbflow-worker", daemon=True)
        self.jobs: queue.SimpleQueue[_Call] = queue.SimpleQueue()
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
            call: _Call | None = job
            del job
            while call is not None:  # the calls of one lease: the next waiting call of its loop, if any
                lease = call.lease
                assert lease is not None
                loop, future = call.loop, call.future
                result: Any = NOT_RUN
                error: BaseException | None = None
                if not future.cancelled() and not _unwanted(call):
                    # (cancelled before it started, or no longer wanted: not run at all)
                    if loop is not self.claimed:
                        self._claim(loop)  # (never raises: a claim is a convenience, the call runs anyway)
                    ctx, func = call.ctx, call.func
                    call.ctx = call.func = None  # (nothing of the call outlives it here)
                    assert ctx is not None and func is not None
                    try:
                        result = ctx.run(func)
                    except BaseException as exc:  # reported to the awaiting task, never lost here
                        error = exc
                    del ctx, func
                call = None
                with _lock:
                    give_back = not lease.detached
                    waiting = lease.lane.waiting
                    if give_back and waiting:  # the token goes on to the next waiting call: no loop turn
                        call = lease.call = waiting.popleft()
                        call.lease = lease
                        give_back = False
                    else:
                        lease.call = None
                    if call is None:
                        _idle.append(self)
                try:
                    loop.call_soon_threadsafe(_report, future, result, error)
                    if give_back:
                        loop.call_soon_threadsafe(_give_back, lease)
                except RuntimeError:  # the loop closed meanwhile (an abandoned call outlived it)
                    pass
                del future, loop, result, error, lease

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


def _unwanted(call: _Call) -> bool:
    """Whether ``call.unless`` says the call is no longer needed (if it raises: the call is made)."""
    if call.unless is None:
        return False
    try:
        return call.unless()
    except Exception:  # (a question about the call never loses it)
        return False


def _give_back(lease: _Lease) -> None:
    """On the loop: a thread found no call waiting for ``lease``'s token; one may have come meanwhile."""
    with _lock:
        waiting = lease.lane.waiting
        call = waiting.popleft() if waiting else None
        if call is not None:
            call.lease = lease
            lease.call = call
    if call is None:
        lease.lane.limiter.release_on_behalf_of(lease)
    else:
        _worker().jobs.put(call)


def _start_waiting(lane: _Lane) -> None:
    """On the loop: start the lane's waiting calls for which a token is free; the rest wait for ``_feed``."""
    while lane.waiting:
        lease = _Lease(lane)
        try:
            lane.limiter.acquire_on_behalf_of_nowait(lease)
        except anyio.WouldBlock:
            if not lane.feeding:
                lane.feeding = True
                task = asyncio.get_running_loop().create_task(_feed(lane))
                _feeders.add(task)  # (a task only the loop's weak set knows of may be collected mid-wait)
                task.add_done_callback(_feeders.discard)
            return
        if not _hand(lane, lease):
            return


def _hand(lane: _Lane, lease: _Lease) -> bool:
    """On the loop: give ``lease``'s token to the lane's oldest waiting call (False: none waits; given back)."""
    with _lock:
        call = lane.waiting.popleft() if lane.waiting else None
        if call is not None:
            call.lease = lease
            lease.call = call
    if call is None:
        lane.limiter.release_on_behalf_of(lease)
        return False
    _worker().jobs.put(call)
    return True


async def _feed(lane: _Lane) -> None:
    """Wait for the limiter's tokens on behalf of the lane's waiting calls (other users of the limiter
    hold the tokens, or they are nbflow's and come back here when no call of this loop waits)."""
    try:
        while lane.waiting:
            lease = _Lease(lane)
            await lane.limiter.acquire_on_behalf_of(lease)
            if not _hand(lane, lease):
                return
    finally:
        lane.feeding = False


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
    lane = _lane_of_loop.get(loop)
    if lane is None:
        lane = _lane(loop)
    limiter = lane.limiter
    future: asyncio.Future[Any] = loop.create_future()
    call = _Call(func, loop, future, unless)
    lease = _Lease(lane)
    try:
        limiter.acquire_on_behalf_of_nowait(lease)
    except anyio.WouldBlock:  # every token is busy: a thread finishing a call of this loop takes it
        with _lock:
            lane.waiting.append(call)
        if not lane.feeding:
            _start_waiting(lane)
    else:
        if _unwanted(call):
            limiter.release_on_behalf_of(lease)
            return NOT_RUN
        call.lease = lease
        lease.call = call
        _worker().jobs.put(call)
    try:
        return await future
    except BaseException:
        _abandon(lane, call)
        raise


def _lane(loop: asyncio.AbstractEventLoop) -> _Lane:
    """The lane of ``loop``'s default thread limiter, remembered for the loop.

    anyio keeps that limiter in a ``RunVar``, one per loop, made on first use and never replaced (callers change its
    ``total_tokens``, the same object): so the loop names it for good, and a later call needs no anyio look-up."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    lane = _lanes.get(limiter)
    if lane is None:
        lane = _lanes[limiter] = _Lane(limiter)
    _lane_of_loop[loop] = lane
    return lane


def _abandon(lane: _Lane, call: _Call) -> None:
    """The caller of ``call`` stopped waiting: a waiting call is dropped, a running one gives its token back."""
    with _lock:
        lease = call.lease
        if lease is None:
            with contextlib.suppress(ValueError):
                lane.waiting.remove(call)
            return
        if lease.call is not call:
            return  # it finished: its thread went on with the token
        lease.detached = True  # the thread runs on without a token (Python cannot stop it)
        lease.call = None
    lane.limiter.release_on_behalf_of(lease)
    if lane.waiting:
        _start_waiting(lane)
