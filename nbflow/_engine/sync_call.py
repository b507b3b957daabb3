"""Calling a sync node: inline on the loop once it has proved quick, otherwise in a worker thread.

The rule (measured, see docs/engine.md "Sync nodes"): a sync node declared without ``thread=``
starts in a worker thread. There each call is timed, wall clock and the thread's CPU time. A call
that took under ``INLINE_BELOW`` and spent most of it computing (not waiting on I/O, a sleep or a
lock) is *quick*; after ``needed`` quick calls in a row (3 at first) the node runs inline on the
loop, where a thread hop (~50-150 µs of CPU, most of a trivial node's cost) is saved. Inline calls
are timed too: one that takes longer than ``BACK_TO_THREAD`` (garbage collection not counted) moves
the node back to a thread, and it then needs twice as many quick calls as before to be moved
inline again; 1,024 clean inline calls in a row forgive one such strike (under a loaded machine
the OS can pause the process mid-call, which looks the same from here).

The one failure mode: a function that is quick and compute-only for its first calls and only
later blocks (a cache that starts missing and goes to the network) blocks the loop for that one
call before it is moved back. ``thread=True`` rules that out; ``thread=False`` always runs inline.

Code that only runs off a running loop's thread (``asyncio.run``, a new loop's ``run_until_complete``)
raises its RuntimeError when called inline. A learned node that does so is
pinned to worker threads for good and that call runs again there, from its start (``NeedsThread``):
the user never asked for inline, so the move must not fail their rows. Under ``thread=False`` the
error stands, with a note naming the fix.
"""

from __future__ import annotations

import asyncio
import gc
import time
from types import CoroutineType
from typing import Any

from nbflow._engine.executors import in_thread, in_thread_unless
from nbflow._engine.threads import NOT_RUN
from nbflow._graph.graph import CallMode, GNode

__all__ = ["BACK_TO_THREAD", "INLINE_BELOW", "PROBE_WAIT", "NeedsThread", "call_inline", "call_sync"]

INLINE_BELOW = 0.000_2  # s: a thread hop costs ~50-150 µs of CPU; calls shorter than ~this are cheaper inline
BACK_TO_THREAD = 0.003  # s: an inline call this long (garbage collection not counted) held the loop: back to a thread
PROBE_WAIT = 0.05  # s: calls waiting for the probes' verdict hop anyway after this (a blocking node's first wave)
_NEEDED = 3  # quick calls in a row in a thread before going inline (doubled per recent strike)
_MAX_STRIKES = 10
_FORGIVE_AFTER = 1024  # clean inline calls in a row that forgive one strike (a preempted process, not the node)
_NEVER = 1 << 62  # ``needed`` of a node pinned to threads: no streak of quick calls reaches it

_perf = time.perf_counter
_cpu = time.thread_time


async def call_sync(g: GNode, kwargs: dict[str, Any]) -> Any:
    """Call ``g``'s sync function with ``kwargs``: inline or in a worker thread, as its call mode says.

    A node with ``thread=`` given has no call mode: ``thread=True`` always hops, ``False`` never.
    The result may be a coroutine (a sync function handing one back): the caller awaits it.
    """
    func = g.spec.func
    mode = g.call_mode
    if mode is None:
        if g.spec.thread:
            return await in_thread(g.spec.name, _call, func, kwargs)
        try:
            return func(**kwargs)
        except RuntimeError as exc:
            if needs_thread(exc):
                _close_unstarted(exc)
                exc.add_note(
                    f"nbflow: node {g.spec.name!r} runs on the event loop's thread (thread=False), where this "
                    f"cannot run; declare it with thread=True (or leave thread= out)"
                )
            raise
    try:
        return await _learned(g, mode, func, kwargs)
    except NeedsThread:  # an inline call needs a worker thread after all: pinned to threads, called again there
        pass  # (below: a failure of the call in its thread is not chained to this handler)
    return await _learned(g, mode, func, kwargs)


async def _learned(g: GNode, mode: CallMode, func: Any, kwargs: dict[str, Any]) -> Any:
    """``call_sync`` of a node placed by what was learned: inline, or timed in a worker thread."""
    if mode.inline:
        return call_inline(mode, func, kwargs)
    # While it learns, and none of its calls was slow since it last left the loop, at most as many calls
    # as it needs quick ones go to threads at once (the probes); the others wait for their verdict, then
    # run inline, or hop once a probe was slow (or none came back within PROBE_WAIT). A wave of 250 rows
    # reaching it in one loop turn then costs ~3 hops (6 after an OS pause sent it back), not one per
    # worker-thread token (40) or per row.
    while not mode.slow_seen and mode.probing >= mode.needed and not mode.inline:
        if not await _verdict(mode):
            break
    if mode.inline:
        return call_inline(mode, func, kwargs)
    mode.probing += 1
    box: Any = NOT_RUN
    try:
        # Calls still waiting for a thread token when the node proves quick run inline (NOT_RUN).
        box = await in_thread_unless(g.spec.name, lambda: mode.inline, _timed, func, kwargs)
    finally:
        mode.probing -= 1
        if box is not NOT_RUN:
            wall, cpu = box[2], box[3]
            if wall < INLINE_BELOW and cpu * 2 >= wall:
                mode.fast += 1
                if mode.fast >= mode.needed:
                    mode.inline = True
                    mode.fast = 0
            else:
                mode.fast = 0
                mode.slow_seen = True
        if mode.changed is not None:
            _wake(mode)
    if box is NOT_RUN:
        return call_inline(mode, func, kwargs)
    if box[0]:
        return box[1]
    raise box[1]


async def _verdict(mode: CallMode) -> bool:
    """Wait until a probe of ``mode``'s node finishes; False (no wait) when they run on another loop."""
    loop = asyncio.get_running_loop()
    changed = mode.changed
    if changed is None:
        changed = mode.changed = (loop, [])
        loop.call_later(PROBE_WAIT, _expire, mode, changed)
    elif changed[0] is not loop:
        return False
    waiter = loop.create_future()
    changed[1].append(waiter)
    await waiter
    return True


def _wake(mode: CallMode) -> None:
    loop, waiters = mode.changed
    mode.changed = None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # (not reached: probes run on a loop)
        running = None
    if running is loop:
        _release(waiters)
        return
    try:  # the waiters wait on another thread's loop (a flow shared across loops)
        loop.call_soon_threadsafe(_release, waiters)
    except RuntimeError:  # that loop closed meanwhile: nobody waits any more
        pass


def _expire(mode: CallMode, changed: Any) -> None:
    """No probe came back within PROBE_WAIT: not quick (a quick call takes a hop's ~0.1-10 ms); calls hop."""
    if mode.changed is changed:
        mode.slow_seen = True
        _wake(mode)


def _release(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


class NeedsThread(Exception):
    """An inline call hit code that only runs off the loop's thread (``needs_thread``); its node is pinned to
    worker threads now, and the caller runs the call again there (``call_sync``)."""


# RuntimeErrors of code that cannot run on the thread of a running event loop: (module raising it, its text).
_OFF_LOOP_ONLY = (
    ("asyncio.runners", "cannot be called from a running event loop"),  # asyncio.run, asyncio.Runner.run
    ("asyncio.base_events", "another loop is running"),  # a new loop's run_until_complete
    ("asyncio.base_events", "already running"),  # the running loop's own run_until_complete, run_forever
    ("anyio.from_thread", "AnyIO worker thread"),  # anyio.from_thread.run/run_sync: only from a worker thread
)


def needs_thread(exc: BaseException) -> bool:
    """``exc`` is one of those errors, raised where they are (not a RuntimeError of the user's own)."""
    if not isinstance(exc, RuntimeError) or exc.__traceback__ is None:  # (anyio's is a subclass)
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__")
    text = str(exc)
    return any(module == where and part in text for where, part in _OFF_LOOP_ONLY)


def _close_unstarted(exc: BaseException) -> None:
    """Close the coroutine the refused call was handed (``asyncio.run(main())``: never started, it would warn
    "never awaited" once collected); the call runs again in a thread, making its own."""
    import inspect  # (here: a rare path)

    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if str(frame.f_globals.get("__name__")).startswith("asyncio."):
            for value in frame.f_locals.values():
                if type(value) is CoroutineType and inspect.getcoroutinestate(value) == inspect.CORO_CREATED:
                    value.close()
        tb = tb.tb_next


def call_inline(mode: CallMode, func: Any, kwargs: dict[str, Any]) -> Any:
    """Call a sync node learned quick on the loop, timed (the scheduler calls it directly, no coroutine).

    Raises NeedsThread when the call hit code that only runs off the loop: the caller runs it in a thread."""
    gc0 = _gc_time[0]
    t0 = _perf()
    try:
        return func(**kwargs)
    except RuntimeError as exc:
        if not needs_thread(exc):
            raise
        _pin_to_thread(mode)
        _close_unstarted(exc)
        raise NeedsThread from exc
    finally:
        took = _perf() - t0
        if took > BACK_TO_THREAD and took - (_gc_time[0] - gc0) > BACK_TO_THREAD:
            _back_to_thread(mode)
        else:
            mode.fast += 1  # while inline: the clean streak; a long one forgives a strike
            if mode.fast >= _FORGIVE_AFTER and mode.strikes:
                mode.strikes -= 1
                mode.needed = _NEEDED << mode.strikes
                mode.fast = 0


def _pin_to_thread(mode: CallMode) -> None:
    """Worker threads for good: calls hop without waiting for probes, and no streak moves the node inline."""
    mode.inline = False
    mode.fast = 0
    mode.slow_seen = True
    mode.needed = _NEVER


def _back_to_thread(mode: CallMode) -> None:
    if mode.needed == _NEVER:  # pinned by this very call (its finally): stays pinned
        return
    mode.inline = False
    mode.fast = 0
    mode.slow_seen = False  # quick until this call: its probes decide (see call_sync)
    mode.strikes = min(mode.strikes + 1, _MAX_STRIKES)
    mode.needed = _NEEDED << mode.strikes


# Seconds spent in garbage collection so far: an inline call is not blamed for a collection.
_gc_time = [0.0]
_gc_started = [0.0]


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_started[0] = _perf()
    else:
        _gc_time[0] += _perf() - _gc_started[0]


gc.callbacks.append(_on_gc)


def _call(func: Any, kwargs: dict[str, Any]) -> Any:
    return func(**kwargs)


def _timed(func: Any, kwargs: dict[str, Any]) -> tuple[bool, Any, float, float]:
    """In the worker thread: (ok, result or exception, wall seconds, CPU seconds of this thread)."""
    c0 = _cpu()
    t0 = _perf()
    try:
        out = func(**kwargs)
    except Exception as exc:  # re-raised on the loop, its traceback intact
        return False, exc, _perf() - t0, _cpu() - c0
    return True, out, _perf() - t0, _cpu() - c0
