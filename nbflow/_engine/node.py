"""Running one node: validate its inputs, call it (async, in a thread, or inline), validate and record.

This is where per-node policies (retries, timeouts, error strategies) live.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import CoroutineType
from typing import Any

from nbflow._core.events import NodeFailed, NodePaused, NodeStarted, NodeSucceeded
from nbflow._core.states import NodeStatus
from nbflow._dsl.limits import Limit
from nbflow._engine.ask import PauseSignal
from nbflow._engine.call import call_function
from nbflow._engine.control_flow import run_control
from nbflow._engine.escapes import NodeEscaped, escaped
from nbflow._engine.executors import call_in_process
from nbflow._engine.isolation import MutationCheck, isolate_inputs
from nbflow._engine.resources import ready_kwargs, resource_kwargs
from nbflow._engine.sync_call import call_sync
from nbflow._engine.tracebacks import format_user_traceback
from nbflow._graph.graph import GNode
from nbflow._record.run import Attempt, NodeRecord, Run

__all__ = ["NodeEscaped", "call_node", "escaped", "invoke", "mark_paused", "node_failed", "node_succeeded"]

# Enum members bound once: ``NodeStatus.X`` costs ~0.1 µs a lookup on Python 3.11, several per node.
_FAILED = NodeStatus.FAILED
_PAUSED = NodeStatus.PAUSED
_RUNNING = NodeStatus.RUNNING
_SUCCEEDED = NodeStatus.SUCCEEDED


async def call_node(g: GNode, rec: NodeRecord, kwargs: dict[str, Any], run: Run) -> None:
    """Run node ``g`` with ``kwargs``, leaving ``rec`` SUCCEEDED or FAILED.

    A node's exception is recorded, not raised. Cancellation propagates (the caller marks the
    record CANCELLED).
    """
    spec = g.spec
    name = spec.name
    rec._to(_RUNNING)
    rec.inputs = kwargs
    started = rec.started_at = time.time()
    if run._subscribers:
        run._emit(NodeStarted(run_id=run.run_id, time=started, node=name, attempt=1))
    elif run._armed:  # only the run view watches: a coalesced notice, no event
        run._notice()
    t0 = time.perf_counter()
    attempt = Attempt(len(rec.attempts) + 1, started)
    rec.attempts.append(attempt)
    try:
        for param, check in g.checks:
            if param in kwargs:
                kwargs[param] = check(kwargs[param])
        guard = MutationCheck.start(name, kwargs)  # nf.config.check_mutation: isolation.py
        args = isolate_inputs(kwargs)  # the node's own views of shared inputs (frames, arrays)
        if g.resources:  # the record keeps kwargs without them: resources are never stored
            args = ready_kwargs(args, g.resources, run) or await resource_kwargs(args, g.resources, run)
        if not g.plain:
            out = await run_control(g, rec, args, run)
        elif spec.is_async:
            out = await spec.func(**args)
        elif spec.options.get("executor") == "process":  # a worker process an interrupt kills: executors.py
            out = await call_in_process(g, args)
        else:  # sync: inline or in a worker thread, as thread= or what was learned says (sync_call.py)
            out = await call_sync(g, args)
            if type(out) is CoroutineType:  # a sync function handing back a coroutine (e.g. a lambda): await it
                out = await out
        if guard is not None:
            guard.verify(kwargs)
        if g.check_return is not None and g.plain:
            out = g.check_return(out)
    except BaseException as exc:
        if not node_failed(rec, run, attempt, started, t0, exc):
            raise
        return
    node_succeeded(rec, run, attempt, started, t0, out)


def node_succeeded(rec: NodeRecord, run: Run, attempt: Attempt, started: float, t0: float, out: Any) -> None:
    """The node's call returned ``out``: record it SUCCEEDED (and tell subscribers)."""
    duration = time.perf_counter() - t0
    rec.finished_at = attempt.finished_at = started + duration
    rec.output = out
    if rec.status is _RUNNING:
        rec.status = _SUCCEEDED  # RUNNING -> SUCCEEDED is always allowed
    else:
        rec._to(_SUCCEEDED)
    if run._subscribers:
        run._emit(NodeSucceeded(run_id=run.run_id, time=rec.finished_at, node=rec.name, duration=duration))
    elif run._armed:  # only the run view watches: a coalesced notice, no event
        run._notice()


def node_failed(rec: NodeRecord, run: Run, attempt: Attempt, started: float, t0: float, exc: BaseException) -> bool:
    """The node's call raised ``exc``: record it FAILED (or PAUSED by ``nf.ask``). False: a real
    cancellation or exit, for the caller to re-raise (the caller marks the record CANCELLED)."""
    name = rec.name
    if isinstance(exc, Exception):
        duration = time.perf_counter() - t0
        rec.finished_at = attempt.finished_at = started + duration
        attempt.error = rec.error = exc
        rec.traceback = format_user_traceback(exc)
        rec._to(_FAILED)
        if run._subscribers:
            run._emit(NodeFailed(run_id=run.run_id, time=rec.finished_at, node=name, error=exc, duration=duration))
        elif run._armed:  # only the run view watches: a coalesced notice, no event
            run._notice()
        return True
    rec.finished_at = attempt.finished_at = started + (time.perf_counter() - t0)
    if isinstance(exc, PauseSignal):
        mark_paused(rec, run, exc)
        return True
    own = escaped(exc, name)
    if own is None:
        return False
    own.__cause__ = exc
    attempt.error = rec.error = own
    rec.traceback = format_user_traceback(exc)
    rec._to(_FAILED)
    if run._subscribers:
        run._emit(NodeFailed(run_id=run.run_id, time=rec.finished_at, node=name, error=own, duration=0.0))
    elif run._armed:  # only the run view watches: a coalesced notice, no event
        run._notice()
    return True


async def invoke(g: GNode, rec: NodeRecord, kwargs: dict[str, Any], run: Run, limits: Sequence[Limit] = ()) -> Any:
    """One call of the node, as ``call_node`` makes it (control flow, async, thread or inline), output checked.

    Used by the policy path (``policy.py``) for each attempt; the fast path above inlines the same
    steps. ``limits`` are for a control-flow node's body calls (a plain node's caller takes them).
    """
    guard = MutationCheck.start(g.spec.name, kwargs)
    args = isolate_inputs(kwargs)
    if g.resources:  # per attempt: a factory that failed is built again on a retry
        args = ready_kwargs(args, g.resources, run) or await resource_kwargs(args, g.resources, run)
    if not g.plain:
        out = await run_control(g, rec, args, run, limits)  # validates its outputs itself
    else:
        out = await call_function(g, args)
    if guard is not None:
        guard.verify(kwargs)
    return out


def mark_paused(rec: NodeRecord, run: Run, signal: PauseSignal) -> None:
    """The node asked a question (``nf.ask``): it is PAUSED and blocks its dependents until resumed."""
    rec._to(_PAUSED)
    if run._subscribers:
        run._emit(
            NodePaused(run_id=run.run_id, time=rec.finished_at or time.time(), node=rec.name, question=signal.question)
        )
    elif run._armed:  # only the run view watches: a coalesced notice, no event
        run._notice()
