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
from collections.abc import Awaitable, Coroutine, Mapping
from typing import Any

import anyio

from nbflow._core.events import NodeCancelled, NodeSkipped, NodeSucceeded, RunFinished, RunPaused, RunStarted
from nbflow._core.states import NODE_FINAL, NodeStatus, RunStatus
from nbflow._core.usage import CURRENT_NODE, CURRENT_RUN
from nbflow._dsl.policies import ErrorInfo, Failed, error_info
from nbflow._engine.ask import ACTIVE, WorkerContext
from nbflow._engine.control_flow import gather_kwargs, guard_reason, upstream_reason
from nbflow._engine.lean import drive, run_lean
from nbflow._engine.node import call_node
from nbflow._engine.policy import NO_POLICIES, FlowPolicies, NodePolicy, call_with_policy
from nbflow._graph.graph import GNode, Graph, Plan
from nbflow._record.run import NodeRecord, Run

__all__ = ["execute"]

_INLINE_BUDGET = 32  # nodes a worker runs back to back before it looks at the clock
_BREATHE_EVERY = 0.001  # s: then it yields to the loop if it has held it this long (a loop turn costs ~µs per node)

# Enum members bound once: ``NodeStatus.X`` costs ~0.1 µs a lookup on Python 3.11, several per node.
_CANCELLED = NodeStatus.CANCELLED
_FAILED = NodeStatus.FAILED
_PAUSED = NodeStatus.PAUSED
_SKIPPED = NodeStatus.SKIPPED
_SUCCEEDED = NodeStatus.SUCCEEDED


class _Scheduler:
    def __init__(
        self,
        graph: Graph,
        plan: Plan,
        run: Run,
        inputs: Mapping[str, Any],
        overrides: Mapping[str, Any],
        concurrency: int | None,
        policies: FlowPolicies,
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
        self.waiting = dict(plan.waiting)
        self.ready: deque[str] = deque()
        self.in_flight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.finished = asyncio.Event()
        self.crash: BaseException | None = None
        self.loop = asyncio.get_running_loop()
        self.policies = policies
        self.fresh = run.status is RunStatus.PENDING  # not a resumed run: no record is final yet
        self.special = policies.active  # False: the plain rules, none of the policy lookups below
        self.cache = policies.cache.session(run, inputs) if policies.cache is not None else None
        self.why = "run cancelled"
        self.deadline_hit = False

    # --- bookkeeping -------------------------------------------------------------------------
    def start(self, inline: bool = False) -> str | None:
        """Find what can run. Records already final (overrides, or a resumed run's finished nodes) count as done.

        With ``inline``, returns the first ready node for the run's own task to work on (see ``execute``).
        """
        for name in self.overrides:
            if name not in self.planned or self.records[name].status.finished:
                continue  # not needed by the targets, or already recorded (a resumed run)
            rec = self.records[name]
            rec._to(_SUCCEEDED)
            rec.output = self.overrides[name]
            rec.overridden = True
            rec.started_at = rec.finished_at = time.time()
            if self.run._subscribers:
                self.run._emit(
                    NodeSucceeded(
                        run_id=self.run.run_id, time=rec.finished_at, node=name, duration=0.0, overridden=True
                    )
                )
            elif self.run._armed:  # only the run view watches: a coalesced notice, no event
                self.run._notice()
        nodes = self.graph.nodes
        if self.fresh and not self.overrides:
            # A fresh run (the common case): no record is final yet, so what can start is what waits
            # for nothing; the loop below is for resumed runs and overrides.
            self.ready.extend(name for name, count in self.waiting.items() if not count)
            self.order = ()
        records = self.records
        for name in self.order:  # topological: every upstream is decided before its node
            if records[name].status not in NODE_FINAL:
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
        if inline and self.ready and self.in_flight < self.cap and not self.run._pause_requested:
            first = self.ready.popleft()
            self.in_flight += 1
        if first is None or self.special:
            self.pump()  # else the first worker hands out the other ready nodes once it has to wait
        self.check_finished()
        return first

    def check_finished(self) -> None:
        """The run is over when no worker is busy and nothing can start (done, or blocked by pauses)."""
        if self.in_flight == 0 and (not self.ready or self.run._pause_requested):
            self.finished.set()

    def resolved(self, name: str) -> None:
        """``name`` reached a final state: release its dependents (iteratively: chains can be long)."""
        nodes = self.graph.nodes
        waiting = self.waiting
        todo = [name]
        while todo:
            n = todo.pop()
            for d in nodes[n].downstream:
                left = waiting.get(d)
                if left is None:
                    continue  # not planned
                left = waiting[d] = left - 1
                if left:
                    continue
                reason = self.skip_reason(d)
                if reason is None:
                    self.ready.append(d)
                else:
                    self.skip(d, reason)
                    todo.append(d)

    def skip_reason(self, name: str) -> str | None:
        g = self.graph.nodes[name]
        if self.special:
            return self.policy_skip_reason(g)
        if not g.simple:
            return guard_reason(g, self.records)
        for u in g.upstream:
            rec = self.records[u]
            if rec.status is not _SUCCEEDED:
                return upstream_reason(u, rec)
        return None

    def policy_skip_reason(self, g: GNode) -> str | None:
        """The skip rule when error strategies are in play (the plain rules plus three cases).

        A failure handler runs only when the node it handles FAILED (it gets the error as data).
        A node FAILED with ``on_error="continue"`` counts as having produced a value (the
        ``nf.Failed`` marker). A failure taken over by a handler skips the normal descendants with
        a reason that says so. Everything else (branches, ``first_of``, ``optional``) as usual.
        """
        records = self.records
        handles = self.policies.handles.get(g.name)
        if handles is not None:
            rec = records[handles]
            if rec.status is _SUCCEEDED:
                return f"{handles!r} did not fail, so its failure handler did not run"
            if rec.status is not _FAILED:
                return upstream_reason(handles, rec)

        def ok(u: str) -> bool:
            status = records[u].status
            if status is _SUCCEEDED:
                return True
            return status is _FAILED and (u == handles or self.policies.continues(u))

        if not g.simple:
            return guard_reason(g, records, ok, self.failure_reason)
        for u in g.upstream:
            if not ok(u):
                return self.failure_reason(u, records[u])
        return None

    def failure_reason(self, u: str, rec: NodeRecord) -> str:
        handler = self.policies.handler_of.get(u)
        if rec.status is _FAILED and handler is not None and handler in self.planned:
            return f"upstream {u!r} failed; its failure handler {handler!r} runs instead"
        return upstream_reason(u, rec)

    def handled(self, name: str) -> bool:
        """A FAILED node whose failure was dealt with by design (it does not fail the run)."""
        handler = self.policies.handler_of.get(name)
        return self.policies.continues(name) or (handler is not None and handler in self.planned)

    def skip(self, name: str, reason: str) -> None:
        rec = self.records[name]
        rec._to(_SKIPPED)
        rec.skip_reason = reason
        if self.run._subscribers:
            self.run._emit(NodeSkipped(run_id=self.run.run_id, time=time.time(), node=name, reason=reason))
        elif self.run._armed:  # only the run view watches: a coalesced notice, no event
            self.run._notice()

    def pump(self) -> None:
        if self.run._pause_requested:
            return  # paused from outside: nodes in flight finish, no new one starts
        while self.ready and self.in_flight < self.cap:
            self.in_flight += 1
            where = WorkerContext(self.run)  # for nf.ask(): which node this task runs
            task = where.task = self.loop.create_task(self.worker(self.ready.popleft(), where))
            ACTIVE[task] = where
            self.tasks.add(task)

    # --- running ---------------------------------------------------------------------------------
    async def worker(self, name: str | None, where: WorkerContext) -> None:
        """Run ``name``, then keep taking ready nodes; extra ready nodes get workers of their own."""
        nodes = self.graph.nodes
        records = self.records
        inputs = self.inputs
        run = self.run
        special = self.special
        ready = self.ready
        waiting = self.waiting

        budget = _INLINE_BUDGET
        breath = time.perf_counter()
        CURRENT_RUN.set(run)  # nf.usage(): the run this task's nodes belong to (for its events)
        try:
            while name is not None:
                g = nodes[name]
                rec = where.node = records[name]
                CURRENT_NODE.set(rec)  # nf.usage(): this task's (and its threads') node
                if special:  # error strategies decide what the node receives
                    await self.execute_with_policy(g, rec)
                else:
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
                        spec = g.spec
                        if g.plain and not g.resources and (spec.is_async or spec.options.get("executor") != "process"):
                            rest = run_lean(g, rec, kwargs, run)  # no coroutine of its own: lean.py
                            if rest is not None:  # the node waits: the other ready nodes get workers meanwhile
                                self.pump()
                        else:
                            rest = self.step_node(call_node(g, rec, kwargs, run))
                        if rest is not None:
                            await rest
                    except BaseException:
                        self.cancel_node(rec, f"{self.why} while the node was running")
                        raise
                if special or rec.status is not _SUCCEEDED:
                    if rec.status is not _PAUSED:  # a paused node blocks its dependents
                        self.resolved(name)
                else:  # ``resolved`` inlined: a dependent whose one upstream just succeeded is ready
                    for d in g.downstream:
                        left = waiting.get(d)
                        if left is None:
                            continue  # not planned
                        left = waiting[d] = left - 1
                        if left:
                            continue
                        gd = nodes[d]
                        if gd.simple and len(gd.upstream) == 1:
                            ready.append(d)
                            continue
                        reason = self.skip_reason(d)
                        if reason is None:
                            ready.append(d)
                        else:
                            self.skip(d, reason)
                            self.resolved(d)
                name = ready.popleft() if ready and not run._pause_requested else None
                if special:
                    self.pump()
                budget -= 1
                if not budget and name is not None:
                    budget = _INLINE_BUDGET
                    if time.perf_counter() - breath >= _BREATHE_EVERY:
                        await asyncio.sleep(0)  # let the loop breathe during long inline chains
                        breath = time.perf_counter()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an engine bug or KeyboardInterrupt: never lose it
            self.crash = exc
            self.finished.set()
            raise
        finally:
            self.in_flight -= 1
            ACTIVE.pop(where.task, None)
            self.tasks.discard(where.task)
            self.check_finished()

    def step_node(self, coro: Coroutine[Any, Any, None]) -> Awaitable[None] | None:
        """Run ``coro`` (one node) up to its first suspension, on this worker; see ``lean.drive``.

        Most nodes finish without ever waiting (compute, a cache hit, a sync node learned to run
        inline): they cost no task and no loop turn. A node that does wait first hands the other
        ready nodes to workers of their own (so they run meanwhile, as before), then this worker
        waits for it. The node runs in this worker's task throughout, so ``current_task()``,
        ``asyncio.timeout`` and anyio cancel scopes inside it behave as in any task.
        """
        try:
            pending = coro.send(None)
        except StopIteration:
            return None  # done without waiting
        self.pump()
        return drive(coro, pending)

    async def execute_with_policy(self, g: GNode, rec: NodeRecord) -> None:
        """Gather inputs as the error strategies say (errors as data, defaults), then run the node."""
        name = g.spec.name
        records = self.records
        handles = self.policies.handles.get(name)
        kwargs = gather_kwargs(g, records, self.inputs)
        marked = False
        for dep in g.deps:  # a failed source's parameter gets the failure as data, when asked for
            if not dep.is_node or dep.alternatives:
                continue
            src = records[dep.source]
            if src.status is not _FAILED or src.error is None:
                continue
            if dep.source == handles:
                kwargs[dep.param] = _info(ErrorInfo, src)
            elif self.policies.continues(dep.source):
                kwargs[dep.param] = _info(Failed, src)
                marked = True
        key = None
        cache = self.cache
        if cache is not None:  # a hit records the node SUCCEEDED (cached) without running it
            key = await cache.lookup(g, rec, kwargs, fed_failure=marked or handles is not None)
            if rec.cached:
                return
        pol = self.policies.nodes.get(name)
        try:
            if pol is None and not marked:
                await call_node(g, rec, kwargs, self.run)
            else:
                await call_with_policy(g, rec, kwargs, self.run, pol or _PLAIN, self.policies.clock)
        except BaseException:
            self.cancel_node(rec, f"{self.why} while the node was running")
            raise
        finally:
            if cache is not None and key is not None:
                cache.done(rec, key)

    def cancel_node(self, rec: NodeRecord, reason: str) -> None:
        if rec.status.finished:
            return
        rec._to(_CANCELLED)
        rec.skip_reason = reason
        if self.run._subscribers:
            self.run._emit(NodeCancelled(run_id=self.run.run_id, time=time.time(), node=rec.name, reason=reason))
        elif self.run._armed:  # only the run view watches: a coalesced notice, no event
            self.run._notice()

    async def cancel_all(self) -> None:
        """Cancel every worker and wait for them (shielded: the run's own scope may be cancelled)."""
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            with anyio.CancelScope(shield=True):
                await asyncio.wait(tasks)
        # A task cancelled before its first step never ran its ``finally``: forget it here.
        for task in tasks:
            ACTIVE.pop(task, None)
        self.tasks.clear()
        for rec in self.records.values():
            if rec.name in self.planned:
                self.cancel_node(rec, f"{self.why} before the node started")

    def on_deadline(self, timeout: float) -> None:
        self.deadline_hit = True
        self.why = f"run deadline of {timeout:g}s exceeded"
        self.finished.set()


_PLAIN = NodePolicy()


def _info(cls: type[ErrorInfo], rec: NodeRecord) -> ErrorInfo:
    assert rec.error is not None
    return error_info(cls, rec.name, rec.error, rec.traceback or "", len(rec.attempts))


async def execute(
    graph: Graph,
    plan: Plan,
    run: Run,
    inputs: Mapping[str, Any],
    overrides: Mapping[str, Any],
    concurrency: int | None = None,
    policies: FlowPolicies = NO_POLICIES,
    timeout: float | None = None,
) -> Run:
    """Execute ``plan`` on the running loop, filling in ``run``. Cancelling this cancels every node.

    Node failures are data in the record. Cancellation (task cancel, anyio scope, KeyboardInterrupt)
    marks unfinished nodes CANCELLED, keeps every finished output, sets the run CANCELLED and
    propagates. A run still going after ``timeout`` seconds is cancelled the same way but returned,
    not raised: its status is CANCELLED and ``run.reason`` names the deadline.
    """
    sched = _Scheduler(graph, plan, run, inputs, overrides, concurrency, policies)
    if run.status is not RunStatus.RUNNING:  # a resume claims RUNNING before it gets here
        run._to(RunStatus.RUNNING)
    run.started_at = run.started_at or time.time()
    t0 = time.perf_counter() - (time.time() - run.started_at)
    if run._subscribers or run._watchers:
        run._emit(RunStarted(run_id=run.run_id, time=run.started_at, flow=run.flow, nodes=plan.nodes))
    deadline = None if timeout is None else sched.loop.call_later(timeout, sched.on_deadline, timeout)
    try:
        # The run's own task works as the first worker: no task to spawn and no wake-up hop for a
        # chain, which is most of the per-run cost when many runs share the loop (batch). Not with
        # a deadline: that wakes this task through ``finished`` to cancel the workers.
        first = sched.start(inline=deadline is None)
        if first is not None:
            await _inline_worker(sched, first)
        await sched.finished.wait()
        if sched.crash is not None:
            raise sched.crash
        if sched.deadline_hit and _unfinished(run):
            await sched.cancel_all()
            run.reason = sched.why
            _finish(run, RunStatus.CANCELLED, t0)
            return run
    except BaseException:
        await sched.cancel_all()
        _finish(run, RunStatus.CANCELLED, t0)
        raise
    finally:
        if deadline is not None:
            deadline.cancel()
    run._pause_requested = False
    if _unfinished(run):  # blocked by a question, or paused
        _pause(run, t0)
        return run
    # Skipped is a normal outcome (a branch not taken); only a failed node fails the run, unless
    # its failure was handled by design (on_error="continue", a failure handler).
    if sched.special:
        failed = any(r.status is _FAILED and not sched.handled(r.name) for r in run.nodes.values())
    else:
        failed = any(r.status is _FAILED for r in run.nodes.values())
    _finish(run, RunStatus.FAILED if failed else RunStatus.SUCCEEDED, t0)
    return run


def _unfinished(run: Run) -> bool:
    """Whether a node of ``run`` is not final (the common outcomes first: an enum's hash is a Python call)."""
    for r in run.nodes.values():
        status = r.status
        if status is not _SUCCEEDED and status is not _SKIPPED and status not in NODE_FINAL:
            return True
    return False


async def _inline_worker(sched: _Scheduler, first: str) -> None:
    task = asyncio.current_task()
    where = WorkerContext(sched.run)
    where.task = task
    # This task may itself be a worker of an outer run (a sub-flow node): put its entry back after.
    outer = ACTIVE.get(task)
    ACTIVE[task] = where
    try:
        await sched.worker(first, where)
    finally:
        if outer is not None:
            ACTIVE[task] = outer


def _pause(run: Run, t0: float) -> None:
    run.finished_at = (run.started_at or time.time()) + (time.perf_counter() - t0)
    run._to(RunStatus.PAUSED)
    run.pause_version += 1
    if run._subscribers or run._watchers:
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
    if run._subscribers or run._watchers:
        run._emit(
            RunFinished(run_id=run.run_id, time=run.finished_at, status=status, duration=duration, reason=run.reason)
        )
