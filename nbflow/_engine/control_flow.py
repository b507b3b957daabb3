"""Control flow at run time: guards (branches, merges, optional inputs), routers, map, loop, sub-flows.

The scheduler's fast path handles plain nodes; everything here runs only for nodes that declare
control flow, so a plain flow pays nothing for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import anyio
import anyio.to_thread

from nbflow._core.errors import LoopLimitError, MapItemError, RoutingError, SubflowFailedError, TypeValidationError
from nbflow._core.events import Event, NodeEvent
from nbflow._core.missing import MISSING
from nbflow._core.question import Question
from nbflow._core.states import NodeStatus, RunStatus
from nbflow._dsl.control import ItemFailed
from nbflow._dsl.limits import Limit
from nbflow._engine.ask import ACTIVE, AskContext, PauseSignal, current
from nbflow._engine.call import call_function
from nbflow._engine.escapes import escaped
from nbflow._engine.tracebacks import format_user_traceback
from nbflow._graph.graph import GNode
from nbflow._record.run import ItemRecord, Iteration, NodeRecord, Run

__all__ = ["gather_kwargs", "guard_reason", "run_control", "taken_branches", "upstream_reason"]

Call = Callable[[dict[str, Any], str, Any], Awaitable[Any]]
"""call(kwargs, label, holder): one body call; a sub-flow's run is kept on ``holder.run``."""


# --- deciding whether a node runs -------------------------------------------------------------------
def upstream_reason(name: str, rec: NodeRecord) -> str:
    """Why a node downstream of ``rec`` cannot run: the root cause travels down the graph."""
    if rec.status is NodeStatus.SKIPPED and rec.skip_reason:
        return rec.skip_reason
    return f"upstream {name!r} {rec.status.value}"


def taken_branches(output: Any) -> frozenset[str]:
    if isinstance(output, str):
        return frozenset((output,))
    return frozenset(output)


def guard_reason(
    g: GNode,
    records: Mapping[str, NodeRecord],
    ok: Callable[[str], bool] | None = None,
    why: Callable[[str, NodeRecord], str] = upstream_reason,
) -> str | None:
    """None if node ``g`` can run now that its upstreams are final, else why it is skipped.

    ``ok(name)`` says whether a (non-merge) source counts as having produced a value (default:
    it SUCCEEDED; error strategies also accept e.g. an ``on_error="continue"`` failure), and
    ``why(name, record)`` words the reason when it did not.
    """
    if g.spec.branch is not None:
        router, branch = g.spec.branch
        rec = records[router]
        if rec.status is not NodeStatus.SUCCEEDED:
            return why(router, rec)  # e.g. "...; its failure handler 'h' runs instead"
        if branch not in taken_branches(rec.output):
            return f"branch {branch!r} of {router!r} not taken"
    for dep in g.deps:
        if not dep.is_node or dep.optional:
            continue
        if dep.alternatives:
            if not any(records[a].status is NodeStatus.SUCCEEDED for a in dep.alternatives):
                names = ", ".join(repr(a) for a in dep.alternatives)
                return f"none of {names} produced an output for {dep.param!r}"
            continue
        rec = records[dep.source]
        if not (rec.status is NodeStatus.SUCCEEDED if ok is None else ok(dep.source)):
            return why(dep.source, rec)
    return None


def gather_kwargs(g: GNode, records: Mapping[str, NodeRecord], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for a node with merges or optional inputs (``output`` is MISSING unless succeeded)."""
    kwargs: dict[str, Any] = {}
    for dep in g.deps:
        if dep.alternatives:
            kwargs[dep.param] = next(
                records[a].output for a in dep.alternatives if records[a].status is NodeStatus.SUCCEEDED
            )
        elif dep.is_node:
            kwargs[dep.param] = records[dep.source].output
        elif dep.source in inputs:
            kwargs[dep.param] = inputs[dep.source]
    return kwargs


# --- running a control-flow node --------------------------------------------------------------------
async def run_control(g: GNode, rec: NodeRecord, kwargs: dict[str, Any], run: Run, limits: Sequence[Limit] = ()) -> Any:
    """The output of a router, map, loop or sub-flow node (raises what fails it).

    ``limits`` (a node's ``uses=``) are taken around each call of the body: per item of a map,
    per iteration of a loop.
    """
    spec = g.spec
    call: Call = partial(_call_once, g, rec, run)
    if limits:
        call = partial(_call_limited, call, limits)
    if spec.map is not None:
        return await _run_map(g, rec, kwargs, call)
    if spec.loop is not None:
        return await _run_loop(g, rec, kwargs, call)
    out = await call(kwargs, "", None)
    if spec.router is not None:
        # An empty list (or tuple, set) takes no branch: every branch is skipped (docs/control_flow.md).
        chosen = taken_branches(out) if isinstance(out, str | list | tuple | set | frozenset) else None
        if chosen is None or any(b not in g.branches for b in chosen):
            bad = out if chosen is None else next(b for b in chosen if b not in g.branches)
            raise RoutingError(spec.name, bad, g.branches)
    return out


async def _call_limited(call: Call, limits: Sequence[Limit], kwargs: dict[str, Any], label: str, holder: Any) -> Any:
    taken: list[Limit] = []
    try:
        for limit in limits:
            await limit.acquire()
            taken.append(limit)
        return await call(kwargs, label, holder)
    finally:
        for limit in reversed(taken):
            limit.release()


async def _call_once(g: GNode, rec: NodeRecord, run: Run, kwargs: dict[str, Any], label: str, holder: Any) -> Any:
    """One call of the node's body: its function, or its sub-flow. Validates the output."""
    spec = g.spec
    if spec.flow is not None:
        previous = rec.subrun if holder is None else holder.run

        def attach(child: Run) -> None:  # at its start: a cancelled or timed-out sub-run is kept
            if holder is None:
                rec.subrun = child
            else:
                holder.run = child

        child = await _run_subflow(g, run, kwargs, label, previous, attach)
        if child.status is RunStatus.PAUSED:
            raise PauseSignal(_question_in(child))
        if child.status.value != "succeeded":
            raise SubflowFailedError(f"{spec.name}{'.' + label if label else ''}", child)
        if spec.output is not None:
            return child[spec.output]
        leaves = [n for n in child.nodes if not child.graph or not child.graph.nodes[n].downstream]
        return {n: child.nodes[n].output for n in leaves if child.nodes[n].status is NodeStatus.SUCCEEDED}
    return await call_function(g, kwargs)


async def _run_subflow(
    g: GNode,
    parent: Run,
    kwargs: dict[str, Any],
    label: str,
    previous: Run | None,
    attach: Callable[[Run], None] | None = None,
) -> Run:
    """A sub-flow's run, fresh or resumed, through the one path its flow owns (policies included)."""
    path = g.spec.name + (f"[{label}]" if label else "")
    resumed = previous if previous is not None and previous.status is RunStatus.PAUSED else None
    if parent._subscribers:
        forward: Callable[[Event], None] | None = partial(_forward, parent, path)
    else:  # only the run view watches the parent: the sub-flow's changes reach it as notices
        forward = partial(_notice_parent, parent) if parent._watchers else None
    return await g.spec.flow._execute_child(parent, path, kwargs, resumed, forward, attach)


def _forward(parent: Run, path: str, event: Event) -> None:
    """Sub-flow node events reach the parent's subscribers as ``"<subflow>.<node>"``."""
    if isinstance(event, NodeEvent):
        parent._emit(replace(event, run_id=parent.run_id, node=f"{path}.{event.node}"))


def _notice_parent(parent: Run, event: Event) -> None:
    """A sub-flow's change, for a parent run that only the run view watches (``Run._watch``)."""
    if parent._armed:
        parent._notice()


def _items_of(g: GNode, value: Any) -> list[Any]:
    if isinstance(value, str | bytes | dict) or not hasattr(value, "__iter__"):
        raise TypeValidationError(
            g.name, g.spec.map.over if g.spec.map else "?", "a list to map over", value, "a map iterates over items"
        )
    return list(value)


async def _run_map(g: GNode, rec: NodeRecord, kwargs: dict[str, Any], call: Call) -> list[Any]:
    spec = g.spec
    assert spec.map is not None
    over, mode = spec.map.over, spec.map.errors
    items = _items_of(g, kwargs[over])
    resumed = rec.items is not None and len(rec.items) == len(items)  # a paused map going on
    records: list[ItemRecord] = (
        rec.items if resumed and rec.items is not None else [ItemRecord(i) for i in range(len(items))]
    )
    rec.items = records
    results: list[Any] = [r.output for r in records]
    context = current()
    limiter = anyio.CapacityLimiter(spec.map.concurrency or max(1, len(items)))
    first_failure: list[ItemRecord] = []
    paused: list[PauseSignal] = []

    async def one(i: int, scope: anyio.CancelScope) -> None:
        ir = records[i]
        if ir.status is NodeStatus.SUCCEEDED:
            return  # finished before the map paused: kept, not run again
        async with limiter:
            ir.status = NodeStatus.RUNNING
            ir.started_at = time.time()
            ir.error = ir.traceback = None  # (an item failed in an earlier attempt of the map: called again)
            task = asyncio.current_task()
            if context is not None:
                ACTIVE[task] = AskContext(context.root, f"{context.path}[{i}]", rec)
            try:
                results[i] = await call({**kwargs, over: items[i]}, str(i), ir)
            except PauseSignal as signal:
                ir.status, ir.finished_at = NodeStatus.PAUSED, time.time()
                paused.append(signal)
                return
            except BaseException as caught:
                exc = caught if isinstance(caught, Exception) else escaped(caught, f"{spec.name}[{i}]")
                if exc is None:  # a real cancellation (or exit): the item is CANCELLED, it propagates
                    ir.status = NodeStatus.CANCELLED
                    ir.finished_at = time.time()
                    raise
                if exc is not caught:  # the item's own sys.exit()/CancelledError is its failure
                    exc.__cause__ = caught
                ir.finished_at = time.time()
                ir.status, ir.error, ir.traceback = NodeStatus.FAILED, exc, format_user_traceback(caught)
                if mode == "terminate" and not first_failure:
                    first_failure.append(ir)
                    scope.cancel()
                return
            finally:
                ACTIVE.pop(task, None)
            ir.finished_at = time.time()
            ir.status, ir.output = NodeStatus.SUCCEEDED, results[i]

    try:
        async with anyio.create_task_group() as tg:
            for i in range(len(items)):
                tg.start_soon(one, i, tg.cancel_scope)
    finally:  # also when the run itself is cancelled: no item is left PENDING
        for ir in records:
            if ir.status in (NodeStatus.PENDING, NodeStatus.RUNNING):
                ir.status = NodeStatus.CANCELLED
    if first_failure:
        failed = first_failure[0]
        assert failed.error is not None
        raise MapItemError(spec.name, failed.index, len(items), failed.error) from failed.error
    if paused:
        raise paused[0]  # the node pauses; its finished items are kept for the resume
    out: list[Any] = []
    for ir in records:
        if ir.status is NodeStatus.SUCCEEDED:
            out.append(ir.output)
        elif mode == "continue":
            assert ir.error is not None
            out.append(ItemFailed(ir.index, type(ir.error).__name__, str(ir.error), ir.error))
    return out


async def _run_loop(g: GNode, rec: NodeRecord, kwargs: dict[str, Any], call: Call) -> Any:
    loop = g.spec.loop
    assert loop is not None
    # A paused loop goes on after its last finished iteration.
    iterations = [it for it in rec.iterations or [] if it.error is None and it.output is not MISSING]
    rec.iterations = iterations
    value = iterations[-1].output if iterations else kwargs[loop.feed]
    if iterations and loop.until is not None and loop.until(value):
        return value
    task = asyncio.current_task()
    outer = ACTIVE.get(task)
    context = current()
    for i in range(len(iterations), loop.max_iterations):
        it = Iteration(i, time.time())
        iterations.append(it)
        if context is not None:
            ACTIVE[task] = AskContext(context.root, f"{context.path}@{i}", rec)
        try:
            value = await call({**kwargs, loop.feed: value}, f"iter{i}", it)
        except Exception as exc:
            it.error, it.finished_at = exc, time.time()
            raise
        finally:
            if outer is not None:
                ACTIVE[task] = outer
        it.output, it.finished_at = value, time.time()
        if loop.until is not None and loop.until(value):
            return value
    if loop.until is not None:
        rec.capped = True
        if loop.on_max == "fail":
            raise LoopLimitError(g.spec.name, loop.max_iterations, value)
    return value


def _question_in(child: Run) -> Question:
    """The question that paused a sub-flow run (its questions live on the top-level run)."""
    mine = [q for k, q in child._root.pending.items() if k.startswith(child._path)]
    return mine[-1] if mine else Question(key=f"{child._path}#pause", node=child._path, prompt="(paused)")
