"""Applying per-node policies: retries with backoff, timeouts, shared limits, error strategies.

A node with no policy never comes here (``node.call_node`` is the fast path). A node with one runs
through ``call_with_policy``: inputs are validated once, then each attempt takes the node's named
limits, runs under its timeout and validates its output; a failed attempt is retried while its
``Retry`` says so, sleeping on the flow's clock; the last failure goes to the error strategy.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from nbflow._core.clock import Clock
from nbflow._core.errors import NodeTimeoutError
from nbflow._core.events import NodeFailed, NodeRetrying, NodeStarted, NodeSucceeded
from nbflow._core.states import NodeStatus
from nbflow._dsl.limits import Limit
from nbflow._dsl.policies import Default, Failed
from nbflow._engine.ask import PauseSignal
from nbflow._engine.escapes import escaped
from nbflow._engine.node import invoke, mark_paused
from nbflow._engine.tracebacks import format_user_traceback
from nbflow._graph.graph import GNode
from nbflow._graph.policies import NO_POLICIES, FlowPolicies, NodePolicy, build_policies
from nbflow._record.run import Attempt, NodeRecord, Run

__all__ = ["NO_POLICIES", "FlowPolicies", "NodePolicy", "build_policies", "call_with_policy"]


async def _attempt(g: GNode, rec: NodeRecord, kwargs: dict[str, Any], run: Run, pol: NodePolicy, number: int) -> Any:
    """One try: take the limits, call under the timeout (the output is checked by ``invoke``).

    A control-flow node (map, loop, sub-flow) takes its limits per body call instead, inside.
    """
    taken: list[Limit] = []
    inner: tuple[Limit, ...] = ()
    try:
        if g.plain:
            for limit in pol.limits:
                await limit.acquire()
                taken.append(limit)
        else:
            inner = pol.limits
        try:
            if pol.timeout is None:
                out = await invoke(g, rec, kwargs, run, inner)
            else:
                try:
                    async with asyncio.timeout(pol.timeout) as cm:
                        out = await invoke(g, rec, kwargs, run, inner)
                except TimeoutError as exc:
                    if cm.expired():
                        raise NodeTimeoutError(g.spec.name, pol.timeout, number) from exc
                    raise
        except (SystemExit, asyncio.CancelledError) as exc:
            # Also under timeout=: a CancelledError the node raised itself passes through
            # asyncio.timeout unchanged (it did not expire), and is the node's failure.
            own = escaped(exc, g.spec.name)
            if own is None:
                raise
            raise own from exc
    finally:
        for limit in reversed(taken):
            limit.release()
    return out


async def call_with_policy(
    g: GNode, rec: NodeRecord, kwargs: dict[str, Any], run: Run, pol: NodePolicy, clock: Clock
) -> None:
    """Run node ``g`` under ``pol``, leaving ``rec`` SUCCEEDED or FAILED. Cancellation propagates."""
    name = g.spec.name
    rec._to(NodeStatus.RUNNING)
    rec.inputs = kwargs
    rec.started_at = time.time()
    t0 = time.perf_counter()
    retry = pol.retry
    number = 0
    while True:
        number += 1
        attempt = Attempt(number, time.time())
        rec.attempts.append(attempt)
        if run._subscribers:
            run._emit(NodeStarted(run_id=run.run_id, time=attempt.started_at, node=name, attempt=number))
        elif run._armed:  # only the run view watches: a coalesced notice, no event
            run._notice()
        a0 = time.perf_counter()
        try:
            if number == 1:
                try:  # once: the same inputs would fail every attempt the same way, so never retried
                    for param, check in g.checks:
                        if param in kwargs and not isinstance(kwargs[param], Failed):
                            kwargs[param] = check(kwargs[param])
                except Exception as exc:
                    attempt.finished_at = attempt.started_at + (time.perf_counter() - a0)
                    attempt.error = exc
                    error: Exception = exc
                    break
            out = await _attempt(g, rec, kwargs, run, pol, number)
        except Exception as exc:
            attempt.finished_at = attempt.started_at + (time.perf_counter() - a0)
            attempt.error = exc
            delay = retry.next_delay(number, exc) if retry is not None else None
            if delay is None:
                error = exc
                break
            attempt.delay = delay
            if run._subscribers:
                run._emit(
                    NodeRetrying(
                        run_id=run.run_id, time=attempt.finished_at, node=name, attempt=number, error=exc, delay=delay
                    )
                )
            elif run._armed:  # only the run view watches: a coalesced notice, no event
                run._notice()
            if delay > 0:
                await clock.sleep(delay)
            continue
        except PauseSignal as signal:  # nf.ask(): not a failure, never retried
            attempt.finished_at = attempt.started_at + (time.perf_counter() - a0)
            rec.finished_at = rec.started_at + (time.perf_counter() - t0)
            mark_paused(rec, run, signal)
            return
        except BaseException:
            attempt.finished_at = attempt.started_at + (time.perf_counter() - a0)
            rec.finished_at = rec.started_at + (time.perf_counter() - t0)
            raise
        attempt.finished_at = attempt.started_at + (time.perf_counter() - a0)
        _succeed(rec, run, out, t0)
        return
    _fail(rec, run, error, pol, t0)


def _succeed(rec: NodeRecord, run: Run, out: Any, t0: float, recovered: bool = False) -> None:
    duration = time.perf_counter() - t0
    assert rec.started_at is not None
    rec.finished_at = rec.started_at + duration
    rec.output = out
    rec.recovered = recovered
    rec._to(NodeStatus.SUCCEEDED)
    if run._subscribers:
        run._emit(
            NodeSucceeded(
                run_id=run.run_id, time=rec.finished_at, node=rec.name, duration=duration, recovered=recovered
            )
        )
    elif run._armed:  # only the run view watches: a coalesced notice, no event
        run._notice()


def _fail(rec: NodeRecord, run: Run, exc: Exception, pol: NodePolicy, t0: float) -> None:
    rec.error = exc
    rec.traceback = format_user_traceback(exc)
    if isinstance(pol.on_error, Default):
        _succeed(rec, run, pol.on_error.value, t0, recovered=True)
        return
    duration = time.perf_counter() - t0
    assert rec.started_at is not None
    rec.finished_at = rec.started_at + duration
    rec._to(NodeStatus.FAILED)
    if run._subscribers:
        run._emit(NodeFailed(run_id=run.run_id, time=rec.finished_at, node=rec.name, error=exc, duration=duration))
    elif run._armed:  # only the run view watches: a coalesced notice, no event
        run._notice()
