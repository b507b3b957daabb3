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
from .events import NodeCancelled, NodeSkipped, NodeSucceeded, RunFinished, RunPaused, RunStarted
from .node import call_node
from .pause import ACTIVE, WorkerContext
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
        self.order = plan.nodes
        self.waiting = {n: sum(1 for u in graph.nodes[n].upstream if u in planned) for n in plan.nodes}
        self.ready: deque[str] = deque()
        self.in_flight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.finished = asyncio.Event()
        self.crash: BaseException | None = None
        self.loop = asyncio.get_running_loop()

    # --- bookkeeping -------------------------------------------------------------------------
    def start(self) -> str | None:
        """Find what can run. Records already final (overrides, or a resumed run's finished nodes) count as done.

        Returns the first ready node, for the run's own task to work on inline (see ``execute``).
        """
        for name in self.overrides:
            if name not in self.planned or self.records[name].status.finished:
                continue  # not needed by the targets, or already recorded (a resumed run)
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
        nodes = self.graph.nodes
        for name in self.order:  # topological: every upstream is decided before its node
            if not self.records[name].status.finished:
                if self.waiting[name]:
                    continue
                reason = self.skip_reason(name)
                if reason is None:
                    self.ready.append(name)  # PENDING, or PAUSED in a run being resumed
                    continue
                self.skip(name, reason)
            for d in nodes[name].downstream:
                if d in self.waiting:
                    self.waiting[d] -= 1
        first = None
        if self.ready and self.in_flight < self.cap and not self.run._pause_requested:
            first = self.ready.popleft()
            self.in_flight += 1
        self.pump()
        self.check_finished()
        return first

    def check_finished(self) -> None:
        """The run is over when no worker is busy and nothing can start (done, or blocked by pauses)."""
        if self.in_flight == 0 and (not self.ready or self.run._pause_requested):
            self.finished.set()

    def resolved(self, name: str) -> None:
        """``name`` reached a final state: release its dependents (iteratively: chains can be long)."""
        todo = [name]
        while todo:
            n = todo.pop()
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
        if self.run._pause_requested:
            return  # paused from outside: nodes in flight finish, no new one starts
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
        task = asyncio.current_task()
        # The run's own task can be a worker while it is itself a worker of an outer run (a
        # sub-flow node): keep the outer entry and put it back at the end.
        outer = ACTIVE.get(task)
        where = ACTIVE[task] = WorkerContext(run)  # for nf.ask(): which node this task runs
        try:
            while name is not None:
                g = nodes[name]
                where.node = records[name]
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
                if records[name].status is not NodeStatus.PAUSED:  # a paused node blocks its dependents
                    self.resolved(name)
                name = self.ready.popleft() if self.ready and not run._pause_requested else None
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
            if outer is None:
                ACTIVE.pop(task, None)
            else:
                ACTIVE[task] = outer
            self.tasks.discard(task)  # type: ignore[arg-type,unused-ignore]
            self.check_finished()

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
    if run.status is not RunStatus.RUNNING:  # a resume claims RUNNING before it gets here
        run._to(RunStatus.RUNNING)
    run.started_at = run.started_at or time.time()
    t0 = time.perf_counter() - (time.time() - run.started_at)
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
    run._pause_requested = False
    if any(not r.status.finished for r in run.nodes.values()):  # blocked by a question, or paused
        _pause(run, t0)
        return run
    # Skipped is a normal outcome (a branch not taken); only a failed node fails the run.
    failed = any(r.status is NodeStatus.FAILED for r in run.nodes.values())
    _finish(run, RunStatus.FAILED if failed else RunStatus.SUCCEEDED, t0)
    return run


def _pause(run: Run, t0: float) -> None:
    run.finished_at = (run.started_at or time.time()) + (time.perf_counter() - t0)
    run._to(RunStatus.PAUSED)
    run.pause_version += 1
    if run._subscribers:
        run._emit(
            RunPaused(
                run_id=run.run_id,
                time=run.finished_at,
                questions=tuple(run.pending.values()) if run._root is run else (),
                version=run.pause_version,
            )
        )


def _finish(run: Run, status: RunStatus, t0: float) -> None:
    duration = time.perf_counter() - t0
    run.finished_at = (run.started_at or time.time()) + duration
    run._to(status)
    if run._subscribers:
        run._emit(RunFinished(run_id=run.run_id, time=run.finished_at, status=status, duration=duration))
