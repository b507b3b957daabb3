"""Run a planned graph: every node once, as soon as its upstreams are done, branches concurrently.

Design (measured, see docs/engine.md): a ready-queue scheduler. A worker task runs a node, resolves
its dependents and carries on with the next ready node itself, spawning extra workers only for
extra ready nodes. The run's own task is the first worker, so a chain costs no extra task (and no
wake-up hop: what dominates when many runs share the loop, as in a batch); a fan-out costs one
task per extra branch. Node tasks are
plain asyncio tasks owned by the run: anyio's ``start_soon`` costs 4-6x more per task here, which
alone would break the overhead budget. Structure is kept by hand: the run awaits every task it
started, and cancelling the run cancels them all before it returns.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import anyio

from ..graph import Graph, Plan
from ..run import NodeRecord, Run
from .control import gather_kwargs, guard_reason, upstream_reason
from .events import NodeCancelled, NodeSkipped, NodeSucceeded, RunFinished, RunStarted
from .node import call_node
from .states import NodeStatus, RunStatus

__all__ = ["execute", "validate_inputs"]

_INLINE_BUDGET = 32  # nodes a worker runs back to back before yielding to the loop


def validate_inputs(graph: Graph, plan: Plan, inputs: Mapping[str, Any]) -> None:
    """Check the caller's inputs against every consuming node's hint, before anything runs."""
    planned = set(plan.nodes) - plan.overridden
    for name, value in inputs.items():
        for node in graph.inputs[name].consumers:
            if node not in planned:
                continue
            g = graph.nodes[node]
            for param, check in g.checks:
                if any(d.param == param and d.source == name and not d.is_node for d in g.deps):
                    check(value)


class _Scheduler:
    def __init__(
        self,
        graph: Graph,
        plan: Plan,
        run: Run,
        inputs: Mapping[str, Any],
        overrides: Mapping[str, Any],
        concurrency: int | None,
    ) -> None:
        self.graph = graph
        self.run = run
        self.records = run.nodes
        self.inputs = inputs
        self.overrides = overrides
        self.cap = concurrency if concurrency else 1 << 30
        planned = set(plan.nodes)
        self.planned = planned
        self.waiting = {
            n: sum(1 for u in graph.nodes[n].upstream if u in planned) for n in plan.nodes if n not in plan.overridden
        }
        self.remaining = len(plan.nodes)
        self.ready: deque[str] = deque()
        self.in_flight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.finished = asyncio.Event()
        self.crash: BaseException | None = None
        self.loop = asyncio.get_running_loop()

    # --- bookkeeping -------------------------------------------------------------------------
    def start(self) -> str | None:
        """Queue the ready nodes; return the first one, for the caller's own task to run inline."""
        for name, count in self.waiting.items():
            if count == 0:
                self.ready.append(name)
        for name in self.overrides:
            if name not in self.planned:
                continue  # overridden but not needed by the targets
            rec = self.records[name]
            rec._to(NodeStatus.SUCCEEDED)
            rec.output = self.overrides[name]
            rec.overridden = True
            rec.started_at = rec.finished_at = time.time()
            if self.run._subscribers:
                self.run._emit(
                    NodeSucceeded(
                        run_id=self.run.run_id, time=rec.finished_at, node=name, duration=0.0, overridden=True
                    )
                )
            self.resolved(name)
        first = None
        if self.ready and self.in_flight < self.cap:
            first = self.ready.popleft()
            self.in_flight += 1
        self.pump()
        if self.remaining == 0:
            self.finished.set()
        return first

    def resolved(self, name: str) -> None:
        """``name`` reached a final state: release its dependents (iteratively: chains can be long)."""
        todo = [name]
        while todo:
            n = todo.pop()
            self.remaining -= 1
            for d in self.graph.nodes[n].downstream:
                if d not in self.waiting:
                    continue
                self.waiting[d] -= 1
                if self.waiting[d]:
                    continue
                reason = self.skip_reason(d)
                if reason is None:
                    self.ready.append(d)
                else:
                    self.skip(d, reason)
                    todo.append(d)

    def skip_reason(self, name: str) -> str | None:
        g = self.graph.nodes[name]
        if not g.simple:
            return guard_reason(g, self.records)
        for u in g.upstream:
            rec = self.records[u]
            if rec.status is not NodeStatus.SUCCEEDED:
                return upstream_reason(u, rec)
        return None

    def skip(self, name: str, reason: str) -> None:
        rec = self.records[name]
        rec._to(NodeStatus.SKIPPED)
        rec.skip_reason = reason
        if self.run._subscribers:
            self.run._emit(NodeSkipped(run_id=self.run.run_id, time=time.time(), node=name, reason=reason))

    def pump(self) -> None:
        while self.ready and self.in_flight < self.cap:
            self.in_flight += 1
            self.tasks.add(self.loop.create_task(self.worker(self.ready.popleft())))

    # --- running ---------------------------------------------------------------------------------
    async def worker(self, name: str | None) -> None:
        """Run ``name``, then keep taking ready nodes; extra ready nodes get workers of their own."""
        nodes = self.graph.nodes
        records = self.records
        inputs = self.inputs
        run = self.run
        budget = _INLINE_BUDGET
        try:
            while name is not None:
                g = nodes[name]
                kwargs: dict[str, Any] = {}
                if g.simple:
                    for dep in g.deps:
                        if dep.is_node:
                            kwargs[dep.param] = records[dep.source].output
                        elif dep.source in inputs:
                            kwargs[dep.param] = inputs[dep.source]
                else:
                    kwargs = gather_kwargs(g, records, inputs)
                try:
                    await call_node(g, records[name], kwargs, run)
                except BaseException:
                    self.cancel_node(records[name], "run cancelled while the node was running")
                    raise
                self.resolved(name)
                name = self.ready.popleft() if self.ready else None
                self.pump()
                budget -= 1
                if not budget and name is not None:
                    budget = _INLINE_BUDGET
                    await asyncio.sleep(0)  # let the loop breathe during long inline chains
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an engine bug or KeyboardInterrupt: never lose it
            self.crash = exc
            self.finished.set()
            raise
        finally:
            self.in_flight -= 1
            self.tasks.discard(asyncio.current_task())  # type: ignore[arg-type,unused-ignore]
            if self.remaining == 0 and self.in_flight == 0:
                self.finished.set()

    def cancel_node(self, rec: NodeRecord, reason: str) -> None:
        if rec.status.finished:
            return
        rec._to(NodeStatus.CANCELLED)
        rec.skip_reason = reason
        if self.run._subscribers:
            self.run._emit(NodeCancelled(run_id=self.run.run_id, time=time.time(), node=rec.name, reason=reason))

    async def cancel_all(self) -> None:
        """Cancel every worker and wait for them (shielded: the run's own scope may be cancelled)."""
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            with anyio.CancelScope(shield=True):
                await asyncio.wait(tasks)
        # A task cancelled before its first step never ran its ``finally``: forget it here.
        self.tasks.clear()
        for rec in self.records.values():
            if rec.name in self.planned:
                self.cancel_node(rec, "run cancelled before the node started")


async def execute(
    graph: Graph,
    plan: Plan,
    run: Run,
    inputs: Mapping[str, Any],
    overrides: Mapping[str, Any],
    concurrency: int | None = None,
) -> Run:
    """Execute ``plan`` on the running loop, filling in ``run``. Cancelling this cancels every node.

    Node failures are data in the record. Cancellation (task cancel, anyio scope, KeyboardInterrupt)
    marks unfinished nodes CANCELLED, keeps every finished output, sets the run CANCELLED and
    propagates.
    """
    sched = _Scheduler(graph, plan, run, inputs, overrides, concurrency)
    run._to(RunStatus.RUNNING)
    run.started_at = time.time()
    t0 = time.perf_counter()
    if run._subscribers:
        run._emit(RunStarted(run_id=run.run_id, time=run.started_at, flow=run.flow, nodes=plan.nodes))
    try:
        first = sched.start()
        if first is not None:
            # The run's own task works as the first worker: no task to spawn and no wake-up hop
            # for a chain, which is most of the per-run cost when many runs share the loop (batch).
            await sched.worker(first)
        await sched.finished.wait()
        if sched.crash is not None:
            raise sched.crash
    except BaseException:
        await sched.cancel_all()
        _finish(run, RunStatus.CANCELLED, t0)
        raise
    # Skipped is a normal outcome (a branch not taken); only a failed node fails the run.
    failed = any(r.status is NodeStatus.FAILED for r in run.nodes.values())
    _finish(run, RunStatus.FAILED if failed else RunStatus.SUCCEEDED, t0)
    return run


def _finish(run: Run, status: RunStatus, t0: float) -> None:
    duration = time.perf_counter() - t0
    run.finished_at = (run.started_at or time.time()) + duration
    run._to(status)
    if run._subscribers:
        run._emit(RunFinished(run_id=run.run_id, time=run.finished_at, status=status, duration=duration))
