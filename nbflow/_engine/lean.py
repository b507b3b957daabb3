"""The engine's lean path: a plain node run by the scheduler's worker without a coroutine of its own.

``call_node`` is an ``async def``: every node paid for a coroutine object, a frame and its first
``send`` on top of the node's own coroutine. Here the same steps run as a plain function that drives
the node's coroutine itself: a node that finishes without waiting (most of them) costs no extra
coroutine at all; one that does wait hands back an awaitable that finishes the job (``_rest``).

Taken by plain nodes only (no control flow, no ``@flow.resource`` parameter, not ``executor="process"``),
and only where the flow has no per-node policies (the scheduler's ``special`` path). What is
recorded and emitted is exactly what ``call_node`` records and emits: the success and failure
bookkeeping are ``node_succeeded`` / ``node_failed``, shared with it.
"""

from __future__ import annotations

import time
import types
from collections.abc import Awaitable, Coroutine, Generator
from types import CoroutineType
from typing import Any

from nbflow._core.config import config as _config_obj
from nbflow._core.events import NodeStarted
from nbflow._core.states import NodeStatus
from nbflow._engine.isolation import MutationCheck, isolate_inputs
from nbflow._engine.node import node_failed, node_succeeded
from nbflow._engine.sync_call import call_sync
from nbflow._graph.graph import GNode
from nbflow._record.run import Attempt, NodeRecord, Run

__all__ = ["run_lean"]

_PENDING = NodeStatus.PENDING
_RUNNING = NodeStatus.RUNNING
_time = time.time
_perf = time.perf_counter
_NOT_STARTED = object()  # _rest: the coroutine has not run yet


def run_lean(g: GNode, rec: NodeRecord, kwargs: dict[str, Any], run: Run) -> Awaitable[None] | None:
    """Run node ``g`` up to its first wait; None when it is done (record final), else what finishes it.

    A real cancellation or exit raised by the node propagates, as from ``call_node``.
    """
    spec = g.spec
    if rec.status is _PENDING:
        rec.status = _RUNNING  # PENDING -> RUNNING is always allowed
    else:
        rec._to(_RUNNING)  # a resumed node: the checked transition
    rec.inputs = kwargs
    started = rec.started_at = _time()
    if run._subscribers:
        run._emit(NodeStarted(run_id=run.run_id, time=started, node=spec.name, attempt=1))
    elif run._armed:  # only the run view watches: a coalesced notice, no event
        run._notice()
    t0 = _perf()
    attempts = rec.attempts
    attempt = Attempt(len(attempts) + 1, started)
    attempts.append(attempt)
    guard = None
    try:
        for param, check in g.checks:
            if param in kwargs:
                kwargs[param] = check(kwargs[param])
        if _config_obj.check_mutation:
            guard = MutationCheck(spec.name, kwargs)
        args = isolate_inputs(kwargs)
        coro = spec.func(**args) if spec.is_async else call_sync(g, args)
        if type(coro) is not CoroutineType:  # an awaitable of another kind (or none): awaited as call_node does
            return _rest(g, rec, kwargs, run, attempt, started, t0, guard, coro, _NOT_STARTED, False)
        try:
            pending = coro.send(None)
        except StopIteration as stop:
            out = stop.value
        else:
            return _rest(g, rec, kwargs, run, attempt, started, t0, guard, coro, pending, not spec.is_async)
        if type(out) is CoroutineType and not spec.is_async:  # a sync function handing back a coroutine
            return _rest(g, rec, kwargs, run, attempt, started, t0, guard, out, _NOT_STARTED, False)
        if guard is not None:
            guard.verify(kwargs)
        if g.check_return is not None:
            out = g.check_return(out)
    except BaseException as exc:
        if not node_failed(rec, run, attempt, started, t0, exc):
            raise
        return None
    node_succeeded(rec, run, attempt, started, t0, out)
    return None


async def _rest(
    g: GNode,
    rec: NodeRecord,
    kwargs: dict[str, Any],
    run: Run,
    attempt: Attempt,
    started: float,
    t0: float,
    guard: MutationCheck | None,
    coro: Coroutine[Any, Any, Any],
    pending: Any,
    unwrap: bool,
) -> None:
    """The node waited (``pending`` is what it yielded, or ``_NOT_STARTED``): finish it.

    ``unwrap``: ``coro`` is ``call_sync``'s, so what it returns may be the sync function's coroutine, awaited too.
    """
    try:
        out = await (coro if pending is _NOT_STARTED else drive(coro, pending))
        if unwrap and type(out) is CoroutineType:  # a sync function handing back a coroutine
            out = await out
        if guard is not None:
            guard.verify(kwargs)
        if g.check_return is not None:
            out = g.check_return(out)
    except BaseException as exc:
        if not node_failed(rec, run, attempt, started, t0, exc):
            raise
        return
    node_succeeded(rec, run, attempt, started, t0, out)


@types.coroutine
def drive(coro: Coroutine[Any, Any, Any], pending: Any) -> Generator[Any, Any, Any]:
    """Drive ``coro`` on from its first suspension (what yielded ``pending``), as ``await coro`` would;
    returns its result. What the task sends or throws in (a result, a cancellation) goes to ``coro``;
    ``close()`` too. The one driver for nodes first stepped by hand (here and the scheduler's workers)."""
    while True:
        try:
            value = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                pending = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                pending = coro.send(value)
            except StopIteration as stop:
                return stop.value
