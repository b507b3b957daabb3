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
import inspect
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from operator import itemgetter
from types import CoroutineType, FunctionType
from typing import Any

import anyio

from nbflow._core.config import config as _config
from nbflow._core.events import NodeCancelled, NodeSkipped, NodeSucceeded, RunFinished, RunPaused, RunStarted
from nbflow._core.states import NODE_FINAL, NodeStatus, RunStatus
from nbflow._core.usage import CURRENT_NODE
from nbflow._dsl.policies import ErrorInfo, Failed, error_info
from nbflow._engine.ask import ACTIVE, PinnedNode, WorkerContext
from nbflow._engine.control_flow import gather_kwargs, guard_reason, upstream_reason
from nbflow._engine.isolation import PLAIN_TYPES, MutationCheck, isolate_inputs
from nbflow._engine.lean import lean_failed, lean_started, lean_succeeded
from nbflow._engine.node import call_node
from nbflow._engine.policy import NO_POLICIES, FlowPolicies, NodePolicy, call_with_policy
from nbflow._engine.sync_call import NeedsThread, call_inline, call_sync
from nbflow._graph.graph import GNode, Graph, Plan
from nbflow._record.run import LEAN, NodeRecord, Run

__all__ = ["execute"]

_INLINE_BUDGET = 32  # nodes a worker runs back to back before it looks at the clock
_NONE_READY: tuple[int, ...] = ()  # a chain run's ``ready``: no node is ever handed to another worker
_BREATHE_EVERY = 0.001  # s: then it yields to the loop if it has held it this long (a loop turn costs ~µs per node)
_time = time.time
_perf = time.perf_counter
_RUNNING = NodeStatus.RUNNING

# Enum members bound once: ``NodeStatus.X`` costs ~0.1 µs a lookup on Python 3.11, several per node.
_CANCELLED = NodeStatus.CANCELLED
_FAILED = NodeStatus.FAILED
_PAUSED = NodeStatus.PAUSED
_PENDING = NodeStatus.PENDING
_SKIPPED = NodeStatus.SKIPPED
_SUCCEEDED = NodeStatus.SUCCEEDED
_RUN_PENDING = RunStatus.PENDING
_RUN_RUNNING = RunStatus.RUNNING
_RUN_SUCCEEDED = RunStatus.SUCCEEDED
_RUN_ENDS = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
_current_task = asyncio.current_task


class _Done:
    """``asyncio.Event`` for the scheduler's "the run is over": most runs are over when their own task
    (the first worker) returns, so the future a wait needs is made only if one does wait."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        if not self._set:
            if self._waiter is None:
                self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter


class _Program:
    """What the scheduler needs of a plan, by node index (the plan's order, which is the run's
    column order: ``Run._align``). Made once per plan and reused by each of its runs."""

    __slots__ = (
        "by_position",
        "chain",
        "deps",
        "down",
        "gnodes",
        "hot",
        "lean",
        "many",
        "names",
        "one",
        "planned",
        "returns",
        "returns_as_is",
        "roots",
        "simple",
        "waiting",
    )

    def __init__(self, graph: Graph, plan: Plan) -> None:
        names = plan.nodes
        index = {n: i for i, n in enumerate(names)}
        nodes = graph.nodes
        self.names = names
        self.planned = frozenset(names)
        self.gnodes = [nodes[n] for n in names]
        self.waiting = [plan.waiting[n] for n in names]
        self.roots = [i for i, left in enumerate(self.waiting) if not left]
        # Equal tuples are made once (``same``): a fan-out's branches share their wiring (one tuple each,
        # not one per branch: ~0.25 KB a node of a 1,000-node fan-out, kept as long as the plan).
        same: dict[Any, Any] = {}
        self.down = [
            same.setdefault(t, t) for t in (tuple(index[d] for d in g.downstream if d in index) for g in self.gnodes)
        ]
        # A simple node whose upstreams all succeeded is ready without looking at them (see ``bad``).
        self.simple = [g.simple for g in self.gnodes]
        # The lean path (lean.py): plain nodes, no resources, not in a worker process.
        self.lean = [
            g.plain and not g.resources and (g.spec.is_async or g.spec.options.get("executor") != "process")
            for g in self.gnodes
        ]
        # A simple node's arguments: (parameter, upstream index) or (parameter, flow input name). Made
        # in C where every argument comes from an upstream node: ``one`` for one (a chain), ``many``
        # (parameters, an itemgetter of their outputs) for several (a fan-in).
        deps: list[tuple[tuple[str, int | str, bool], ...] | None] = []
        one: list[tuple[str, int, bool] | None] = []
        many: list[tuple[tuple[str, ...], Callable[[list[Any]], tuple[Any, ...]], bool] | None] = []
        for g in self.gnodes:
            fed = g.simple and all(d.source in index for d in g.deps if d.is_node)
            by_nodes = fed and bool(g.deps) and all(d.is_node for d in g.deps)
            fed_by = (
                tuple((d.param, index[d.source] if d.is_node else d.source, d.is_node) for d in g.deps) if fed else None
            )  # None: merges, optional inputs: gather_kwargs reads the records
            deps.append(same.setdefault(fed_by, fed_by))
            single = (
                (g.deps[0].param, index[g.deps[0].source], _positional(g.spec.func, (g.deps[0].param,)))
                if by_nodes and len(g.deps) == 1
                else None
            )
            one.append(same.setdefault(single, single))
            params = tuple(d.param for d in g.deps)
            many.append(
                (params, itemgetter(*(index[d.source] for d in g.deps)), _positional(g.spec.func, params))
                if by_nodes and len(g.deps) > 1
                else None
            )
        self.deps = deps
        self.one = one
        self.many = many
        self.by_position = [m is not None and m[2] for m in many]
        # The return check, and the builtin type whose exact values it returns as they are (no call).
        self.returns = [g.check_return for g in self.gnodes]
        self.returns_as_is = [getattr(g.check_return, "exact", None) for g in self.gnodes]
        # What ``plain_loop`` reads of the program, in one tuple (one unpack per worker).
        self.hot = (
            self.gnodes,
            deps,
            self.down,
            self.simple,
            one,
            many,
            self.by_position,
            self.returns,
            self.returns_as_is,
        )
        # A chain: node i is fed by node i - 1 alone (and flow inputs), every node plain and on the lean
        # path. A fresh run of it needs none of the scheduler's bookkeeping (``execute``, ``plain_loop``).
        n = len(names)
        self.chain = (
            n > 0
            and all(self.lean)
            and all(self.simple)
            and None not in deps
            and self.waiting == [0] + [1] * (n - 1)
            and self.down == [(i + 1,) for i in range(n - 1)] + [()]
        )


if sys.version_info >= (3, 12):

    def _task_maker(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]:
        """How ``pump`` makes a worker's task: on the loop's default task factory, started eagerly (its first step
        runs right away, as ``asyncio.eager_task_factory`` does): a fan-out's branch then starts its wait as its
        task is made, with no loop turn and no handle of its own in between."""
        if loop.get_task_factory() is None:
            return partial(asyncio.Task, loop=loop, eager_start=True)
        return loop.create_task

else:

    def _task_maker(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]:
        """How ``pump`` makes a worker's task (no eager start before Python 3.12)."""
        return loop.create_task


def _positional(func: Any, params: tuple[str, ...]) -> bool:
    """Whether ``func``'s parameters are exactly ``params``, in this order, and can be passed by position."""
    if type(func) is not FunctionType or "__wrapped__" in func.__dict__:
        return False
    code = func.__code__
    return (
        code.co_argcount == len(params)
        and not code.co_kwonlyargcount
        and not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        and code.co_varnames[: len(params)] == params
    )


def _program(graph: Graph, plan: Plan) -> _Program:
    prog = plan.prepared.get("program")
    if prog is None:
        prog = plan.prepared["program"] = _Program(graph, plan)
    return prog


class _Scheduler:
    __slots__ = (
        "bad",
        "cache",
        "cap",
        "chain",
        "cols",
        "crash",
        "deadline_hit",
        "finished",
        "fresh",
        "graph",
        "in_flight",
        "inputs",
        "lean",
        "names",
        "overrides",
        "planned",
        "policies",
        "prog",
        "ready",
        "records",
        "run",
        "special",
        "tasks",
        "waiting",
        "why",
    )

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
        prog = self.prog = _program(graph, plan)
        self.graph = graph
        self.run = run
        self.cols = run._align(plan.nodes)  # index i of the columns is node i of the plan
        self.records = run.nodes
        self.names = prog.names
        self.inputs = inputs
        self.overrides = overrides
        self.cap = concurrency if concurrency else 1 << 30
        self.planned = prog.planned
        self.waiting = prog.waiting.copy()
        self.bad = [False] * len(prog.names)  # an upstream of the node ended without succeeding
        self.ready: deque[int] = deque()
        self.in_flight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.finished = _Done()
        self.crash: BaseException | None = None
        self.policies = policies
        self.fresh = run.status is RunStatus.PENDING  # not a resumed run: no record is final yet
        # The lean path takes a node PENDING and never tried: in a fresh run, every node (a node
        # PENDING now stays so until it runs or is skipped; a resumed run's PAUSED ones are not).
        self.lean = (
            prog.lean
            if self.fresh
            else [
                ok and a is None and st is _PENDING
                for ok, a, st in zip(prog.lean, self.cols.attempts, self.cols.status, strict=False)
            ]
        )
        self.special = policies.active  # False: the plain rules, none of the policy lookups below
        self.chain = False  # (``for_chain``)
        self.cache = policies.cache.session(run, inputs) if policies.cache is not None else None
        self.why = "run cancelled"
        self.deadline_hit = False

    @classmethod
    def for_chain(cls, prog: _Program, run: Run, inputs: Mapping[str, Any]) -> _Scheduler:
        """The scheduler of a fresh run of a chain (``_Program.chain``) without policies, overrides or a
        deadline: only what ``plain_loop`` reads (its one worker is the run's own task: ``execute``)."""
        self = cls.__new__(cls)
        self.prog = prog
        self.run = run
        self.cols = run._align(prog.names)
        self.inputs = inputs
        self.lean = prog.lean
        # What ``resolved`` and the skip rules read is made only if a node does not succeed (``off_chain``);
        # no node is ever ready (the next node is the chain's next, see ``plain_loop``).
        self.records = self.waiting = self.bad = None  # type: ignore[assignment]
        self.ready = _NONE_READY  # type: ignore[assignment]
        self.chain = True
        self.special = False
        self.why = "run cancelled"
        return self

    def off_chain(self) -> None:
        """A node of a chain run did not succeed: make what ``resolved`` and the skip rules read, as the
        general path has it (no node of the chain released a dependent: each is fed by the one before)."""
        self.records = self.run.nodes
        self.waiting = self.prog.waiting.copy()
        self.bad = [False] * len(self.prog.names)
        self.ready = deque()

    # --- bookkeeping -------------------------------------------------------------------------
    def start(self, inline: bool = False) -> int:
        """Find what can run. Records already final (overrides, or a resumed run's finished nodes) count as done.

        With ``inline``, returns the first ready node for the run's own task to work on (see ``execute``),
        else -1.
        """
        status = self.cols.status
        index = self.cols.index
        n = len(self.names)
        reused = self.run.reused  # outputs a batch fed from a stored row: marked as cached, not overridden
        for name in self.overrides:
            i = index.get(name, n)
            if i >= n or status[i].finished:
                continue  # not needed by the targets, or already recorded (a resumed run)
            self.waiting[i] = -1  # never released again: an upstream it would have waited for may still run
            rec = self.records[name]
            rec._to(_SUCCEEDED)
            rec.output = self.overrides[name]
            cached = reused is not None and name in reused
            if cached:
                assert reused is not None
                rec.cached = True
                rec.cache_key = reused[name]
            else:
                rec.overridden = True
            rec.started_at = rec.finished_at = time.time()
            if self.run._subscribers:
                self.run._emit(
                    NodeSucceeded(
                        run_id=self.run.run_id,
                        time=rec.finished_at,
                        node=name,
                        duration=0.0,
                        overridden=not cached,
                        cached=cached,
                    )
                )
            elif self.run._armed:  # only the run view watches: a coalesced notice, no event
                self.run._notice()
        if reused:
            self.record_fed_inputs(reused)
        down = self.prog.down
        bad = self.bad
        if self.fresh and not self.overrides:
            # A fresh run (the common case): no record is final yet, so what can start is what waits
            # for nothing; the loop below is for resumed runs and overrides.
            self.ready.extend(self.prog.roots)
            order: range = range(0)
        else:
            order = range(n)
        for i in order:  # topological: every upstream is decided before its node
            if status[i] not in NODE_FINAL:
                if self.waiting[i]:
                    continue
                reason = self.skip_reason(i)
                if reason is None:
                    self.ready.append(i)  # PENDING, or PAUSED in a run being resumed
                    continue
                self.skip(i, reason)
            failed = status[i] is not _SUCCEEDED
            for d in down[i]:
                self.waiting[d] -= 1
                if failed:
                    bad[d] = True
        first = -1
        if inline and self.ready and self.in_flight < self.cap and not self.run._pause_requested:
            first = self.ready.popleft()
            self.in_flight += 1
        if first < 0 or self.special:
            self.pump()  # else the first worker hands out the other ready nodes once it has to wait
        self.check_finished()
        return first

    def check_finished(self) -> None:
        """The run is over when no worker is busy and nothing can start (done, or blocked by pauses)."""
        if self.in_flight == 0 and (not self.ready or self.run._pause_requested):
            self.finished.set()

    def record_fed_inputs(self, reused: Mapping[str, str]) -> None:
        """A node a batch fed from a stored row records the inputs it was fed, as a node that ran does: its
        upstream nodes' outputs (the same objects, so a store keeps them once, by reference) and flow inputs.
        Every node upstream of a fed one is fed too (``nbflow/_batch/reuse.py``), so all are final here."""
        nodes = self.graph.nodes
        records = self.run.nodes
        for name in reused:
            rec = records.get(name)
            if rec is not None and rec.cached and rec.cache_key == reused[name] and name in nodes:
                rec.inputs = gather_kwargs(nodes[name], records, self.inputs)

    def resolved(self, i: int) -> None:
        """Node ``i`` reached a final state: release its dependents (iteratively: chains can be long)."""
        down = self.prog.down
        waiting = self.waiting
        bad = self.bad
        status = self.cols.status
        todo = [i]
        while todo:
            n = todo.pop()
            failed = status[n] is not _SUCCEEDED
            for d in down[n]:
                if failed:
                    bad[d] = True
                left = waiting[d] = waiting[d] - 1
                if left:
                    continue
                reason = self.skip_reason(d)
                if reason is None:
                    self.ready.append(d)
                else:
                    self.skip(d, reason)
                    todo.append(d)

    def skip_reason(self, i: int) -> str | None:
        g = self.prog.gnodes[i]
        if self.special:
            return self.policy_skip_reason(g)
        if not g.simple:
            return guard_reason(g, self.records)
        status = self.cols.status
        index = self.cols.index
        for u in g.upstream:
            if status[index[u]] is not _SUCCEEDED:
                return upstream_reason(u, self.records[u])
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

    def skip(self, i: int, reason: str) -> None:
        rec = self.cols.rec(i)
        rec._to(_SKIPPED)
        rec.skip_reason = reason
        if self.run._subscribers:
            self.run._emit(NodeSkipped(run_id=self.run.run_id, time=time.time(), node=rec.name, reason=reason))
        elif self.run._armed:  # only the run view watches: a coalesced notice, no event
            self.run._notice()

    def pump(self) -> None:
        if self.run._pause_requested:
            return  # paused from outside: nodes in flight finish, no new one starts
        ready = self.ready
        if not ready or self.in_flight >= self.cap:
            return
        run = self.run
        tasks = self.tasks
        if self.special:
            create_task = asyncio.get_running_loop().create_task  # (once: a fan-out pumps hundreds of workers)
            worker = self.worker
            while ready and self.in_flight < self.cap:
                self.in_flight += 1
                where = WorkerContext(run)  # for nf.ask() and nf.usage(): which node this task runs
                task = where.task = create_task(worker(ready.popleft(), where))
                ACTIVE[task] = where
                tasks.add(task)
            return
        # A plain run's worker is ``plain_loop`` itself (one coroutine a task: a fan-out's branch pays for no
        # frame in between), with the clocks read once for all of them. The nodes to start leave ``ready``
        # first: a worker started eagerly runs its node's first step in here, and must not see them as its own
        # to hand out (``arm``).
        starts = [ready.popleft() for _ in range(min(len(ready), self.cap - self.in_flight))]
        self.in_flight += len(starts)
        new_task = _task_maker(asyncio.get_running_loop())
        plain_loop = self.plain_loop
        breath = _perf()
        epoch = _time() - breath
        for i in starts:
            where = WorkerContext(run)
            task = new_task(plain_loop(i, where, breath, epoch, True))
            if not task.done():  # (an eager start may have run its nodes to their end already)
                tasks.add(task)
                if where.task is None:  # not started yet (no eager start): registered here, before its first step
                    where.task = task
                    ACTIVE[task] = where

    # --- running ---------------------------------------------------------------------------------
    async def worker(self, i: int, where: WorkerContext) -> None:
        """A policy run's worker task: run node ``i``, then keep taking ready nodes; extra ready nodes get workers
        of their own. (A plain run's worker task is ``plain_loop(..., spawned=True)``, which keeps these books
        itself: one coroutine less a branch.)"""
        CURRENT_NODE.set(where)  # nf.usage(): this task's (and its threads') node is where.node, of where.run
        try:
            await self.node_loop(i, where)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an engine bug or KeyboardInterrupt: never lose it
            self.crash = exc
            self.finished.set()
            raise
        finally:
            where.i = -1
            self.in_flight -= 1
            task, where.task = where.task, None  # (the task's context holds ``where``: no cycle for the collector)
            ACTIVE.pop(task, None)
            self.tasks.discard(task)
            self.check_finished()

    def node_loop(self, i: int, where: WorkerContext) -> Coroutine[Any, Any, None]:
        """The loop a worker runs, starting at node ``i`` (a coroutine: no frame of its own in between)."""
        return self.policy_loop(i, where) if self.special else self.plain_loop(i, where)

    async def plain_loop(
        self, i: int, where: WorkerContext, breath: float | None = None, epoch: float = 0.0, spawned: bool = False
    ) -> None:
        """The worker of a run without per-node policies: node after node, as long as one is ready.

        A lean node (lean.py) is run here, written out: the worker calls it, drives its coroutine
        and writes the run's columns itself. This loop is the engine's hot path: every name it
        uses per node is a local, and what is rare (events, waits, failures) is a call away.
        ``breath`` and ``epoch``: the clocks as ``execute`` or ``pump`` just read them (None: read them here).
        ``spawned``: this coroutine is a worker task of its own (``pump``): it sets ``CURRENT_NODE`` and, when it
        ends, leaves the run's books as ``worker`` does. ``pump`` puts a task not started yet in ``ACTIVE`` (no
        ``asyncio.current_task()`` here: a Python call on 3.11, ~0.5 µs of a branch's ~5); one started eagerly
        (3.12+) is running its node already, which may ``nf.ask``, and puts itself there.
        """
        gnodes, deps, down, simple, one, many, args_by_position, returns, returns_as_is = self.prog.hot
        bad = self.bad
        cols = self.cols
        lean = self.lean
        status = cols.status
        output = cols.output
        inputs_at = cols.inputs
        started_at = cols.started
        finished_at = cols.finished
        attempts = cols.attempts
        inputs = self.inputs
        run = self.run
        subscribers = run._subscribers  # (the lists themselves: subscribing appends to them)
        watchers = run._watchers
        ready = self.ready
        waiting = self.waiting
        modules = sys.modules
        config = _config
        budget = _INLINE_BUDGET
        if spawned:  # (``worker``'s bookkeeping, made here: see ``pump``)
            CURRENT_NODE.set(where)  # nf.usage(): this task's (and its threads') node is where.node, of where.run
            if where.task is None:  # started eagerly (else pump registered it, before this first step)
                task = where.task = _current_task()
                ACTIVE[task] = where
        if breath is None:
            breath = _perf()
            epoch = _time() - breath  # epoch seconds = perf_counter() + epoch: one clock read per node start
        last = len(gnodes) - 1 if self.chain else -1  # a chain run's last node (-1: not a chain run)
        try:
            while True:
                g = gnodes[i]
                where.i = i
                arg = one[i]
                if arg is not None:
                    kwargs: dict[str, Any] = {arg[0]: output[arg[1]]}
                else:
                    fed = deps[i]
                    if fed is None:
                        kwargs = gather_kwargs(g, run.nodes, inputs)
                    elif (fan_in := many[i]) is not None:
                        kwargs = dict(zip(fan_in[0], fan_in[1](output), strict=True))
                    else:
                        kwargs = {}
                        for param, src, is_node in fed:
                            if is_node:
                                kwargs[param] = output[src]  # type: ignore[index]
                            elif src in inputs:
                                kwargs[param] = inputs[src]  # type: ignore[index]
                if ready and not where.armed:  # should this node wait, the other ready nodes get workers
                    self.arm(where)
                try:
                    if lean[i]:
                        # --- the lean path (lean.py) ---
                        spec = g.spec
                        status[i] = _RUNNING  # PENDING -> RUNNING is always allowed
                        inputs_at[i] = kwargs
                        attempts[i] = LEAN
                        t0 = _perf()
                        started = started_at[i] = t0 + epoch
                        if subscribers or watchers:
                            lean_started(run, spec.name, started)
                        try:
                            for param, check in g.checks:
                                if param in kwargs:
                                    value = kwargs[param]
                                    checked = check(value)
                                    if checked is not value:  # the node gets another object than its source gave
                                        kwargs[param] = checked
                                        run._recast = True
                            guard = MutationCheck(spec.name, kwargs) if config.check_mutation else None
                            args = kwargs  # (a node's own views of shared frames and arrays: isolation.py)
                            if "pandas" in modules or "numpy" in modules:
                                if arg is not None:
                                    if type(kwargs[arg[0]]) not in PLAIN_TYPES:  # (a plain value: nothing to do)
                                        args = isolate_inputs(kwargs)
                                else:
                                    for value in kwargs.values():  # (isolate_inputs' own check, without the call)
                                        if type(value) not in PLAIN_TYPES:
                                            args = isolate_inputs(kwargs)
                                            break
                            # Awaited right here: a node that does not wait runs to its end without a
                            # loop turn (and without the StopIteration of a coroutine stepped by hand).
                            if spec.is_async:
                                # By position where the parameters allow: cheaper, and for many parameters
                                # by far (matching keywords to parameters is a search per keyword).
                                if arg is not None and arg[2]:
                                    out = await spec.func(args[arg[0]])
                                elif args_by_position[i]:
                                    out = await spec.func(*args.values())
                                else:
                                    out = await spec.func(**args)
                            else:  # inline or in a worker thread, as thread= or what was learned says
                                mode = g.call_mode
                                if mode is not None and mode.inline:  # learned quick: called right here
                                    try:
                                        out = call_inline(mode, spec.func, args)
                                    except NeedsThread:  # it needs a thread after all (asyncio.run...): pinned
                                        out = NeedsThread  # (called again below, not chained to this handler)
                                    if out is NeedsThread:
                                        out = await call_sync(g, args)
                                else:
                                    out = await call_sync(g, args)
                                if type(out) is CoroutineType:  # a sync function handing back a coroutine
                                    out = await out
                            if guard is not None:
                                guard.verify(kwargs)
                            check_out = returns[i]
                            if check_out is not None and type(out) is not returns_as_is[i]:
                                out = check_out(out)
                        except BaseException as exc:
                            if not lean_failed(cols, i, run, started, t0, exc):
                                raise
                        else:  # node_succeeded, on the columns
                            duration = _perf() - t0
                            done = finished_at[i] = started + duration
                            output[i] = out
                            if status[i] is _RUNNING:
                                status[i] = _SUCCEEDED  # RUNNING -> SUCCEEDED is always allowed
                            else:
                                cols.rec(i)._to(_SUCCEEDED)
                            if attempts[i] is not LEAN:  # the attempt was read meanwhile (nf.usage): it ends too
                                attempts[i][-1].finished_at = done
                            if subscribers or watchers:
                                lean_succeeded(run, spec.name, done, duration)
                    else:
                        await call_node(g, cols.rec(i), kwargs, run)
                except BaseException:
                    self.cancel_node(i, f"{self.why} while the node was running")
                    raise
                st = status[i]
                if last >= 0:  # a chain run: the next node is i + 1, ready once node i succeeded
                    if st is not _SUCCEEDED:
                        if st is not _PAUSED:  # a paused node blocks its dependents
                            self.off_chain()
                            self.resolved(i)
                        return
                    if i == last or run._pause_requested:
                        return
                    i += 1
                elif st is not _SUCCEEDED:
                    if st is not _PAUSED:  # a paused node blocks its dependents
                        self.resolved(i)
                else:  # ``resolved`` inlined: a dependent whose one upstream just succeeded is ready
                    for d in down[i]:
                        left = waiting[d] = waiting[d] - 1
                        if left:
                            continue
                        if simple[d] and not bad[d]:  # every upstream succeeded: nothing to look at
                            ready.append(d)
                            continue
                        reason = self.skip_reason(d)
                        if reason is None:
                            ready.append(d)
                        else:
                            self.skip(d, reason)
                            self.resolved(d)
                if last < 0:
                    if not ready or run._pause_requested:
                        return
                    i = ready.popleft()
                budget -= 1
                if not budget:
                    budget = _INLINE_BUDGET
                    if _perf() - breath >= _BREATHE_EVERY:
                        where.breathing = True
                        await asyncio.sleep(0)  # let the loop breathe during long inline chains
                        where.breathing = False
                        breath = _perf()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an engine bug or KeyboardInterrupt: never lose it
            if spawned:
                self.crash = exc
                self.finished.set()
            raise
        finally:
            if spawned:  # (``worker``'s bookkeeping)
                where.i = -1
                self.in_flight -= 1
                task, where.task = where.task, None  # (the task's context holds ``where``: no cycle for the collector)
                ACTIVE.pop(task, None)
                self.tasks.discard(task)
                if not self.in_flight:
                    self.check_finished()

    def arm(self, where: WorkerContext) -> None:
        """At the next loop turn, if ``where``'s worker is waiting in a node, hand the ready nodes to
        workers of their own (``stuck``).

        A worker awaits its node directly; a node that does not wait never lets the loop turn, so
        the callback only runs once the worker waits (in a node, or breathing). One is pending per
        worker at a time: a worker running a fan-out's branches back to back arms it once a turn,
        not once a node.
        """
        where.armed = True
        asyncio.get_running_loop().call_soon(self.stuck, where)

    def stuck(self, where: WorkerContext) -> None:
        where.armed = False
        if where.i >= 0 and not where.breathing:  # it waits in node where.i: the others run meanwhile
            self.pump()

    async def policy_loop(self, i: int, where: WorkerContext) -> None:
        """The worker of a run with per-node policies (retries, timeouts, error strategies, caching)."""
        ready = self.ready
        run = self.run
        budget = _INLINE_BUDGET
        breath = _perf()
        while True:
            g = self.prog.gnodes[i]
            where.i = i
            await self.execute_with_policy(g, self.cols.rec(i))  # error strategies decide what it receives
            if self.cols.status[i] is not _PAUSED:  # a paused node blocks its dependents
                self.resolved(i)
            if not ready or run._pause_requested:
                self.pump()
                return
            i = ready.popleft()  # this worker's next node; the other ready ones get workers of their own
            self.pump()
            budget -= 1
            if not budget:
                budget = _INLINE_BUDGET
                if _perf() - breath >= _BREATHE_EVERY:
                    await asyncio.sleep(0)  # let the loop breathe during long inline chains
                    breath = _perf()

    async def execute_with_policy(self, g: GNode, rec: NodeRecord) -> None:
        """Gather inputs as the error strategies say (errors as data, defaults), then run the node."""
        CURRENT_NODE.set(PinnedNode(rec, self.run))  # a call abandoned at its timeout keeps its own node (nf.usage)
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
            self.cancel_node(self.cols.index[name], f"{self.why} while the node was running")
            raise
        finally:
            if cache is not None and key is not None:
                cache.done(rec, key)

    def cancel_node(self, i: int, reason: str) -> None:
        if self.cols.status[i].finished:
            return
        rec = self.cols.rec(i)
        rec._to(_CANCELLED)
        rec.skip_reason = reason
        if self.run._subscribers:
            self.run._emit(NodeCancelled(run_id=self.run.run_id, time=time.time(), node=rec.name, reason=reason))
        elif self.run._armed:  # only the run view watches: a coalesced notice, no event
            self.run._notice()

    async def cancel_all(self) -> None:
        """Cancel every worker and wait for them (shielded: the run's own scope may be cancelled)."""
        tasks = [] if self.chain else list(self.tasks)  # (a chain run's one worker is the run's own task)
        for task in tasks:
            task.cancel()
        if tasks:
            with anyio.CancelScope(shield=True):
                await asyncio.wait(tasks)
        # A task cancelled before its first step never ran its ``finally``: forget it here.
        for task in tasks:
            ACTIVE.pop(task, None)
        if tasks:
            self.tasks.clear()
        for i in range(len(self.prog.names)):
            self.cancel_node(i, f"{self.why} before the node started")

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
    prog = _program(graph, plan)
    # A fresh run of a chain with none of what the scheduler's bookkeeping is for (policies, overrides,
    # a deadline): its own task runs the nodes one after the other (most batch rows).
    chain = prog.chain and run.status is _RUN_PENDING and timeout is None and not overrides and not policies.active
    if chain:
        sched = _Scheduler.for_chain(prog, run, inputs)
        run.status = _RUN_RUNNING  # (PENDING -> RUNNING is always allowed)
    else:
        sched = _Scheduler(graph, plan, run, inputs, overrides, concurrency, policies)
        if run.status is _RUN_PENDING:  # a fresh run (PENDING -> RUNNING is always allowed)
            run.status = _RUN_RUNNING
        elif run.status is not _RUN_RUNNING:  # a resume claims RUNNING before it gets here
            run._to(_RUN_RUNNING)
    now = _time()
    breath = _perf()
    started = run.started_at = run.started_at or now
    t0 = breath - (now - started)  # the run's start on the perf_counter clock
    if run._subscribers or run._watchers:
        run._emit(RunStarted(run_id=run.run_id, time=run.started_at, flow=run.flow, nodes=plan.nodes))
    deadline = None if timeout is None else asyncio.get_running_loop().call_later(timeout, sched.on_deadline, timeout)
    try:
        # The run's own task works as the first worker: no task to spawn and no wake-up hop for a
        # chain, which is most of the per-run cost when many runs share the loop (batch). Not with
        # a deadline: that wakes this task through ``finished`` to cancel the workers.
        first = 0 if chain else sched.start(inline=deadline is None)
        if first >= 0:
            # This task works as the run's first worker. It may itself be a worker of an outer run (a
            # sub-flow node): its entry and what nf.usage() reads are put back after.
            # (``_Scheduler.worker``'s bookkeeping, for this task: an exception goes straight up to the
            # handler below instead of through ``crash``.)
            task = _current_task()
            where = WorkerContext(run)
            where.task = task
            outer = ACTIVE.get(task)
            outer_node = CURRENT_NODE.get()
            ACTIVE[task] = where
            CURRENT_NODE.set(where)  # nf.usage(): this task's (and its threads') node is where.node, of where.run
            try:
                if chain:  # (node_loop's choice, known: no policies) with the clocks just read
                    await sched.plain_loop(0, where, breath, now - breath)
                else:
                    await sched.node_loop(first, where)
            finally:
                where.i = -1
                if outer is not None:
                    ACTIVE[task] = outer
                else:
                    ACTIVE.pop(task, None)
                CURRENT_NODE.set(outer_node)  # (also None: a finished run is not kept alive by its task's context)
                if not chain:
                    sched.in_flight -= 1
                    sched.check_finished()
        if not chain:
            if not sched.finished.is_set():
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
    cols = run._c
    status = cols.status
    if status.count(_SUCCEEDED) == len(status):  # every node succeeded (most runs): counted in C
        _finish(run, _RUN_SUCCEEDED, t0)
        return run
    if _unfinished(run):  # blocked by a question, or paused
        _pause(run, t0)
        return run
    # Skipped is a normal outcome (a branch not taken); only a failed node fails the run, unless
    # its failure was handled by design (on_error="continue", a failure handler).
    if sched.special:
        failed = any(st is _FAILED and not sched.handled(n) for n, st in zip(cols.names, cols.status, strict=True))
    else:
        failed = _FAILED in cols.status
    _finish(run, RunStatus.FAILED if failed else RunStatus.SUCCEEDED, t0)
    return run


def _unfinished(run: Run) -> bool:
    """Whether a node of ``run`` is not final (counted in C: no Python step per node)."""
    status = run._c.status
    return sum(map(status.count, NODE_FINAL)) != len(status)


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
    if run.status is _RUN_RUNNING and status in _RUN_ENDS:  # RUNNING -> an end is always allowed
        run.status = status
    else:
        run._to(status)
    if run._subscribers or run._watchers:
        run._emit(
            RunFinished(run_id=run.run_id, time=run.finished_at, status=status, duration=duration, reason=run.reason)
        )
