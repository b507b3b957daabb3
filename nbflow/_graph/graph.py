"""Specs -> a validated, read-only graph. Pure data and traversals: nothing here runs a node."""

from __future__ import annotations

import gc
import heapq
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import field, replace
from typing import Any

from nbflow._core.errors import CycleError, GraphError, MissingInputError, UnknownInputError, UnknownNodeError, _suggest
from nbflow._core.missing import MISSING
from nbflow._core.records import record
from nbflow._dsl.resource import ResourceSpec
from nbflow._dsl.spec import NodeSpec
from nbflow._graph.validate import Validator, hints_of, make_validator, still_resolved

SUBFLOW_DEFAULT: Any = object()  # "not passed: the sub-flow uses its own default"

__all__ = [
    "BoundResource",
    "Dep",
    "GNode",
    "Graph",
    "InputInfo",
    "Plan",
    "compile_graph",
    "find_cycle",
    "recompile",
    "validate_inputs",
]


# Dep and GNode are made per parameter and per node by every compile, and never changed after: not
# frozen=True, whose __init__ (object.__setattr__ per field) made each of them 5-10x slower to build,
# most of compiling a big flow. Treat them as read-only; Dep stays hashable.
@record(unsafe_hash=True)
class Dep:
    """Parameter ``param`` is fed by ``source``: a node when ``is_node``, else a flow input."""

    param: str
    source: str
    is_node: bool
    alternatives: tuple[str, ...] = ()
    """A merge: the candidate nodes in order; the first that produced an output feeds ``param``."""
    optional: bool = False
    """The node runs even if ``source`` produced nothing; ``param`` then gets ``nf.MISSING``."""


@record(frozen=True, eq=False)
class BoundResource:
    """A resource with its factory's parameters resolved: other resources, and flow inputs."""

    spec: ResourceSpec
    resources: tuple[tuple[str, BoundResource], ...]
    """Factory parameters fed by other resources."""
    inputs: tuple[tuple[str, Any], ...]
    """Factory parameters fed by flow inputs: ``(name, default or MISSING)``."""
    key_inputs: tuple[tuple[str, Any], ...] = ()
    """Every flow input it is built from, through other resources too: an instance per their values."""

    @property
    def name(self) -> str:
        return self.spec.name

    def all_inputs(self) -> dict[str, bool]:
        """The flow inputs this resource depends on (through other resources too) -> required."""
        found = {n: d is MISSING for n, d in self.inputs}
        for _, r in self.resources:
            for n, req in r.all_inputs().items():
                found[n] = found.get(n, False) or req
        return found


@record()
class GNode:
    """A node in the compiled graph, with its edges and validators resolved."""

    spec: NodeSpec
    deps: tuple[Dep, ...]
    upstream: tuple[str, ...]
    downstream: tuple[str, ...]
    checks: tuple[tuple[str, Validator], ...]
    check_return: Validator | None
    simple: bool = True
    """Every upstream must succeed and feeds one parameter directly: the engine's fast path."""
    branches: tuple[str, ...] = ()
    """For a router: the branch names it may choose."""
    plain: bool = True
    """No control flow (router, map, loop, sub-flow): called directly."""
    resources: tuple[tuple[str, BoundResource], ...] = ()
    """Parameters fed by ``@flow.resource`` objects (never inputs, never validated or stored)."""
    call_mode: CallMode | None = field(default=None, compare=False)
    """A sync node without ``thread=``: what the engine has learned about running it inline."""

    @property
    def name(self) -> str:
        return self.spec.name


class CallMode:
    """Mutable, per compiled node: whether a sync node currently runs inline on the loop.

    The rule that updates it lives in ``nbflow._engine.sync_call``; this only holds the state.
    """

    __slots__ = ("changed", "fast", "inline", "needed", "probing", "slow_seen", "strikes")

    def __init__(self) -> None:
        self.inline = False  # every sync node starts in a worker thread
        self.fast = 0  # in a thread: quick calls in a row; inline: clean inline calls in a row
        self.needed = 3  # how many such calls move it inline (doubles after each move back)
        self.strikes = 0  # how often an inline call was too slow
        self.probing = 0  # timed calls in worker threads right now, while it learns
        self.slow_seen = False  # a timed call was not quick since it last left the loop: calls hop freely
        self.changed: Any = None  # (loop, future) the calls waiting for the probes' verdict await


@record(frozen=True)
class InputInfo:
    """A flow input: a parameter that no node feeds."""

    name: str
    required_by: tuple[str, ...]
    optional_for: tuple[str, ...]

    @property
    def consumers(self) -> tuple[str, ...]:
        return self.required_by + self.optional_for


@record(frozen=True)
class Plan:
    """What one run executes: the nodes needed for its targets (topological order) and the overrides."""

    nodes: tuple[str, ...]
    overridden: frozenset[str]
    inputs: frozenset[str]
    waiting: Mapping[str, int]
    """For each node to execute: how many planned upstreams it waits for (copied per run)."""
    prepared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What the engine derives from the plan once and reuses for each of its runs (``_engine/scheduler.py``)."""


@record(frozen=True)
class Graph:
    """A validated flow: nodes in topological order (ties broken by definition order) and its inputs."""

    name: str
    nodes: Mapping[str, GNode]
    inputs: Mapping[str, InputInfo]
    resources: Mapping[str, BoundResource] = field(default_factory=dict)
    """The flow's resources (``@flow.resource``), by name."""
    _plans: dict[Any, Plan] = field(default_factory=dict, compare=False, repr=False)
    _views: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """Caches of the front ends (e.g. the laid-out SVG): a graph never changes, so neither do they."""
    _returns: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """Each node's resolved return hint (a node without one is absent), for ``recompile``."""
    _memo: dict[Any, Any] | None = field(default=None, compare=False, repr=False)
    """How its hints were resolved (``hints_of``'s memo); None: not validated. For ``recompile``."""

    def node(self, name: str) -> GNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise UnknownNodeError(name, self.nodes) from None

    def ancestors(self, names: Iterable[str], stop: frozenset[str] = frozenset()) -> set[str]:
        """``names`` and everything upstream of them; nodes in ``stop`` are included but not walked past."""
        seen: set[str] = set()
        todo = list(names)
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n not in stop:
                todo.extend(self.nodes[n].upstream)
        return seen

    def descendants(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = list(self.nodes[name].downstream)
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(self.nodes[n].downstream)
        return seen

    def plan(
        self,
        given: Iterable[str],
        targets: Iterable[str] | None = None,
        overrides: Iterable[str] = (),
    ) -> Plan:
        """Check a run's request against the graph and say which nodes it executes.

        Raises UnknownNodeError, UnknownInputError and MissingInputError before anything runs.
        Plans are cached per (inputs given, targets, overrides): a batch of rows plans once.
        """
        key = (frozenset(given), None if targets is None else tuple(targets), frozenset(overrides))
        found = self._plans.get(key)
        if found is None:
            found = self._plans[key] = self._plan(key[0], key[1], key[2])
        return found

    def _plan(
        self,
        given: Iterable[str],
        targets: Iterable[str] | None,
        overrides: Iterable[str],
    ) -> Plan:
        overridden = frozenset(overrides)
        for name in overridden:
            if name not in self.nodes:
                raise UnknownNodeError(name, self.nodes, role="override")
        if targets is None:
            needed: Iterable[str] = self.nodes
            if overridden:
                needed = self.ancestors(self._sinks(), stop=overridden)
        else:
            targets = list(targets)
            for name in targets:
                if name not in self.nodes:
                    raise UnknownNodeError(name, self.nodes, role="target")
            needed = self.ancestors(targets, stop=overridden)
        needed_set = set(needed)
        order = tuple(n for n in self.nodes if n in needed_set)
        given = list(given)
        unknown = [g for g in given if g not in self.inputs]
        if unknown:
            raise UnknownInputError(unknown, self.inputs)
        running = [n for n in order if n not in overridden]
        missing: dict[str, list[str]] = {}
        for info in self.inputs.values():
            if info.name in given:
                continue
            who = [n for n in info.required_by if n in running]
            if who:
                missing[info.name] = who
        if missing:
            hints = {k: _suggest(k, self.nodes).replace("did you mean", "a node is named", 1) for k in missing}
            raise MissingInputError(missing, {k: v for k, v in hints.items() if v})
        planned = set(order)
        if len(planned) == len(self.nodes):
            waiting = {n: len(self.nodes[n].upstream) for n in order}
        else:
            waiting = {n: sum(1 for u in self.nodes[n].upstream if u in planned) for n in order}
        return Plan(order, overridden, frozenset(given), waiting)

    def _sinks(self) -> list[str]:
        return [n for n, g in self.nodes.items() if not g.downstream]


def find_cycle(upstream: Mapping[str, Iterable[str]], among: Iterable[str]) -> list[str]:
    """A cycle among ``among`` (each of which is on or leads to one), first node repeated at the end."""
    among = list(among)
    return _walk_to_cycle(upstream, among[0], dict.fromkeys(among, 1))


def _walk_to_cycle(upstream: Mapping[str, Iterable[str]], start: str, left: Mapping[str, int]) -> list[str]:
    """Walk upstream from ``start`` through nodes with ``left[n]`` (not ordered: on or behind a cycle)
    until a node repeats; that node's part of the path is the cycle. Linear: each node is visited once
    and the path is searched once (``start`` comes in definition order: the report starts there)."""
    path: list[str] = []
    seen: set[str] = set()
    node = start
    while node not in seen:
        seen.add(node)
        path.append(node)
        for u in upstream[node]:
            if left.get(u):
                node = u
                break
    cycle = path[path.index(node) :]
    cycle.reverse()  # report in data-flow direction: producer -> consumer
    cycle.append(cycle[0])
    return cycle


def compile_graph(
    name: str,
    specs: Mapping[str, NodeSpec],
    validate: bool = True,
    resources: Mapping[str, ResourceSpec] | None = None,
) -> Graph:
    """Resolve wiring, check for cycles, order topologically and build validators.

    The garbage collector is paused meanwhile: compiling allocates a few objects per node and none
    of them are garbage, yet above ~10,000 nodes collections took 30-50% of the time.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _compile(name, specs, validate, resources)
    finally:
        if paused:
            gc.enable()


def _compile(
    name: str, specs: Mapping[str, NodeSpec], validate: bool, resources: Mapping[str, ResourceSpec] | None
) -> Graph:
    bound = bind_resources(resources or {}, specs)
    res_params: dict[str, list[tuple[str, BoundResource]]] = {}
    order = list(specs)
    position = {n: i for i, n in enumerate(order)}
    deps: dict[str, tuple[Dep, ...]] = {}
    upstream: dict[str, tuple[str, ...]] = {}
    inputs_req: dict[str, list[str]] = {}
    inputs_opt: dict[str, list[str]] = {}
    if any(s.flow is not None for s in specs.values()):
        specs = {n: (s if s.flow is None else with_subflow_params(s)) for n, s in specs.items()}
    branches = collect_branches(specs)
    # The order first, from the wiring alone: a cycle is reported before any per-parameter work.
    done: set[str] | None = set()  # the nodes walked so far, while each one's upstream nodes are among them
    for n, spec in specs.items():
        ups: list[str] = []
        for p in spec.params:
            if p.alternatives or p.optional:
                for s in p.alternatives or (p.source,):
                    if s not in specs:
                        raise UnknownNodeError(s, specs, role=f"node {n!r}: inputs[{p.name!r}] names")
                if n in (p.alternatives or (p.source,)):
                    raise CycleError([n, n])
                ups.extend(p.alternatives or (p.source,))
            elif p.source in specs:  # a node (never also a resource: bind_resources refuses that)
                if p.source == n:
                    raise CycleError([n, n])
                ups.append(p.source)
        if spec.branch is not None:
            ups.insert(0, spec.branch[0])
        handled = spec.options.get("on_failure_of")
        if handled is not None:  # a failure handler runs after the node it handles, input or not
            if handled not in specs:
                raise UnknownNodeError(handled, specs, role=f"node {n!r}: on_failure_of")
            if handled == n:
                raise CycleError([n, n])
            ups.append(handled)
        upstream[n] = (ups[0],) if len(ups) == 1 else tuple(dict.fromkeys(ups))
        if done is not None:
            for u in ups:
                if u not in done:
                    done = None  # declared before a node it depends on: Kahn's algorithm orders them
                    break
            else:
                done.add(n)
    downstream: dict[str, list[str]] = {n: [] for n in order}
    for n in order:
        for u in upstream[n]:
            downstream[u].append(n)

    # Every node declared after the nodes it depends on (as a notebook usually does): the definition order
    # is the one Kahn's algorithm makes (each next node is the first ready one), and there is no cycle.
    topo = order if done is not None else _kahn(order, position, upstream, downstream)

    not_simple: set[str] = set()  # a node after a branch, a merge or an optional input (GNode.simple)
    for n, spec in specs.items():
        ds = []
        if spec.branch is not None:
            not_simple.add(n)
        for p in spec.params:
            if p.alternatives or p.optional:
                not_simple.add(n)
            elif p.source in bound:
                res_params.setdefault(n, []).append((p.name, bound[p.source]))
                for i, req in bound[p.source].all_inputs().items():
                    (inputs_req if req else inputs_opt).setdefault(i, []).append(n)
                continue
            is_node = p.source in specs
            ds.append(Dep(p.name, p.source, is_node, p.alternatives, p.optional))
            if not is_node:
                (inputs_req if p.required else inputs_opt).setdefault(p.source, []).append(n)
        deps[n] = tuple(ds)

    nodes: dict[str, GNode] = {}
    memo: dict[Any, Any] | None = {} if validate else None
    returns: dict[str, Any] = {}  # each node's resolved return hint, filled in order: a node's checks read
    # its upstream nodes' only, which come before it
    for n in topo:
        spec = specs[n]
        checks: tuple[tuple[str, Validator], ...] = ()
        check_return = None
        found = res_params.get(n)
        used = tuple(found) if found else ()
        if validate:
            own = hints_of(spec.func, memo) if spec.flow is None else {}
            hint = own.get("return", _NO_HINT)
            if hint is not _NO_HINT:
                returns[n] = hint
            if spec.params:
                checks = _checks(spec, own, returns, used)
            check_return = make_validator(own.get("return"), n, "return")
        down = downstream[n]
        # (GNode's fields in order, positionally: built once per node of every compile)
        nodes[n] = GNode(
            spec,
            deps[n],
            upstream[n],
            tuple(down) if len(down) < 2 else tuple(sorted(down, key=position.__getitem__)),
            checks,
            check_return,
            n not in not_simple,
            branches.get(n, ()) if branches else (),
            spec.plain,
            used,
            CallMode() if spec.auto_thread and spec.options.get("timeout") is None else None,
        )
    names = sorted(set(inputs_req) | set(inputs_opt))
    inputs = {i: InputInfo(i, tuple(dict.fromkeys(inputs_req.get(i, ()))), tuple(inputs_opt.get(i, ()))) for i in names}
    return Graph(name=name, nodes=nodes, inputs=inputs, resources=bound, _returns=returns, _memo=memo)


def _kahn(
    order: list[str],
    position: Mapping[str, int],
    upstream: Mapping[str, tuple[str, ...]],
    downstream: Mapping[str, list[str]],
) -> list[str]:
    """Kahn's algorithm, ties broken by definition order so runs and drawings are deterministic."""
    indegree = {n: len(upstream[n]) for n in order}
    heap = [position[n] for n in order if indegree[n] == 0]
    heapq.heapify(heap)
    topo: list[str] = []
    while heap:
        n = order[heapq.heappop(heap)]
        topo.append(n)
        for d in downstream[n]:
            indegree[d] -= 1
            if indegree[d] == 0:
                heapq.heappush(heap, position[d])
    if len(topo) != len(order):
        raise CycleError(_walk_to_cycle(upstream, next(n for n in order if indegree[n] > 0), indegree))
    return topo


def _checks(
    spec: NodeSpec, hints: Mapping[str, Any], returns: Mapping[str, Any], used: tuple[tuple[str, BoundResource], ...]
) -> tuple[tuple[str, Validator], ...]:
    """The validators of a node's parameters (``hints``: its own; ``returns``: every node's return hint)."""
    checks: list[tuple[str, Validator]] = []
    for p in spec.params:
        if used and any(p.name == r for r, _ in used):
            continue  # a resource: never validated
        hint = hints.get(p.name)
        # A value from a node whose return hint is the same was validated on the way out.
        if p.source in returns and returns[p.source] == hint:
            continue
        if p.optional or p.alternatives or (spec.map is not None and p.name == spec.map.over):
            continue  # MISSING, a merge or one item of a list: checked by the function's own hint
        v = make_validator(hint, spec.name, p.name)
        if v is not None:
            checks.append((p.name, v))
    return tuple(checks)


def _wiring(spec: NodeSpec) -> tuple[Any, ...]:
    """What of a node's declaration shapes the graph around it (its edges, inputs, branches, handler)."""
    params = tuple((p.name, p.source, p.required, p.alternatives, p.optional) for p in spec.params)
    options = spec.options
    return (
        params,
        spec.branch,
        spec.router,
        spec.map,
        spec.loop,
        spec.flow,
        options.get("on_failure_of"),
        options.get("on_error", "fail"),
    )


def recompile(old: Graph, specs: Mapping[str, NodeSpec], redeclared: Iterable[str], validate: bool) -> Graph | None:
    """The graph of ``specs`` when only the nodes ``redeclared`` changed since ``old`` was compiled from them.

    A notebook cell that redefines a node of a big flow: each such node moved to the end of the
    definition order (``Flow.add``) with the same wiring. Only what that touches is made again (its
    ``GNode`` and validators, its neighbours' edge order and checks, its inputs, the order of it and
    what is downstream of it); the result equals what ``compile_graph`` makes. None when the change
    is more than that (new wiring, a sub-flow, a resource parameter, a hint's name rebound since):
    the caller compiles in full.
    """
    if (old._memo is None) if validate else (old._memo is not None):
        return None
    changed = set(redeclared)
    for n in changed:
        g, spec = old.nodes.get(n), specs.get(n)
        if g is None or spec is None or g.resources or spec.flow is not None or _wiring(spec) != _wiring(g.spec):
            return None
    if len(specs) != len(old.nodes) or (old._memo and not still_resolved(old._memo)):
        return None
    order = list(specs)
    position = {n: i for i, n in enumerate(order)}
    # The order: no node outside the redeclared ones and their descendants depends on them, so those
    # keep their order and come first (a redeclared node is now last in definition order: it waits
    # until nothing else is ready); the rest is ordered among itself as _compile orders a graph.
    moved = set(changed)
    todo = list(changed)
    while todo:
        for d in old.nodes[todo.pop()].downstream:
            if d not in moved:
                moved.add(d)
                todo.append(d)
    topo = [n for n in old.nodes if n not in moved]
    if len(changed) == 1 and all(u in moved for n in moved - changed for u in old.nodes[n].upstream):
        # One source, and nothing outside waited on: the old order of those nodes is the one _compile makes
        # (what decided it was already among them), so they keep it.
        topo += [n for n in old.nodes if n in moved]
    else:
        indegree = {n: sum(1 for u in old.nodes[n].upstream if u in moved) for n in moved}
        heap = [position[n] for n in moved if indegree[n] == 0]
        heapq.heapify(heap)
        while heap:
            n = order[heapq.heappop(heap)]
            topo.append(n)
            for d in old.nodes[n].downstream:
                indegree[d] -= 1
                if indegree[d] == 0:
                    heapq.heappush(heap, position[d])
    memo = dict(old._memo) if old._memo is not None else None
    returns = dict(old._returns)
    hints: dict[str, Mapping[str, Any]] = {}
    for n in changed:
        resolved = hints[n] = hints_of(specs[n].func, memo) if validate else {}
        if "return" in resolved:
            returns[n] = resolved["return"]
        else:
            returns.pop(n, None)
    renew = set(changed)  # the nodes whose GNode is made again: the redeclared ones and their neighbours
    for n in changed:
        g = old.nodes[n]
        renew.update(g.upstream)  # the order of their downstream edges: n is last now
        if returns.get(n, _NO_HINT) != old._returns.get(n, _NO_HINT):
            renew.update(g.downstream)  # which checks they keep depends on n's return hint
    made: dict[str, GNode] = {}
    for n in renew:
        g, spec = old.nodes[n], specs[n]
        down = g.downstream if len(g.downstream) < 2 else tuple(sorted(g.downstream, key=position.__getitem__))
        if n in changed:
            own: Mapping[str, Any] = hints[n]
            made[n] = replace(
                g,
                spec=spec,
                downstream=down,
                checks=_checks(spec, own, returns, g.resources) if validate else (),
                check_return=make_validator(own.get("return"), n, "return") if validate else None,
                call_mode=CallMode() if spec.auto_thread and spec.options.get("timeout") is None else None,
            )
        elif validate and spec.flow is None:
            made[n] = replace(g, downstream=down, checks=_checks(spec, hints_of(spec.func, memo), returns, g.resources))
        else:
            made[n] = replace(g, downstream=down)
    nodes = {n: made.get(n) or old.nodes[n] for n in topo}
    inputs = dict(old.inputs)
    for n in sorted(changed, key=position.__getitem__):  # each is now the last consumer of its inputs
        required = [p.source for p in specs[n].params if p.source not in specs and p.required]
        optional = [p.source for p in specs[n].params if p.source not in specs and not p.required]
        for i in dict.fromkeys(required + optional):
            info = inputs[i]
            inputs[i] = InputInfo(
                i,
                tuple(dict.fromkeys([*(c for c in info.required_by if c != n), *(n for r in required if r == i)])),
                (*(c for c in info.optional_for if c != n), *(n for o in optional if o == i)),
            )
    return Graph(old.name, nodes, inputs, old.resources, _returns=returns, _memo=memo)


_NO_HINT: Any = object()


def bind_resources(resources: Mapping[str, ResourceSpec], specs: Mapping[str, NodeSpec]) -> dict[str, BoundResource]:
    """Resolve each resource factory's parameters: other resources, else flow inputs; never nodes."""
    for r in resources:
        if r in specs:
            raise GraphError(
                f"{r!r} is both a node and a resource of this flow; a parameter named {r!r} could not say "
                f"which one it receives. Rename one of them (e.g. @flow.resource(name='{r}_client'))"
            )
    bound: dict[str, BoundResource] = {}

    def bind(r: str, path: tuple[str, ...]) -> BoundResource:
        if r in bound:
            return bound[r]
        if r in path:
            cycle = [*path[path.index(r) :], r]
            raise GraphError(f"resources depend on each other in a cycle: {' -> '.join(cycle)}")
        spec = resources[r]
        deps: list[tuple[str, BoundResource]] = []
        ins: list[tuple[str, Any]] = []
        for pname, default in spec.params:
            if pname in resources:
                deps.append((pname, bind(pname, (*path, r))))
            elif pname in specs:
                raise GraphError(
                    f"resource {r!r}: parameter {pname!r} names a node, but a resource is built once per "
                    f"event loop and shared by every run, so it can depend only on other resources and on "
                    f"flow inputs; pass what it needs as a flow input, or make {r!r} a node"
                )
            else:
                ins.append((pname, default))
        keyed = dict(ins)
        for _, dep in deps:
            for n, d in dep.key_inputs:
                keyed.setdefault(n, d)
        found = bound[r] = BoundResource(spec, tuple(deps), tuple(ins), tuple(sorted(keyed.items())))
        return found

    for r in resources:
        bind(r, ())
    return bound


def collect_branches(specs: Mapping[str, NodeSpec]) -> dict[str, tuple[str, ...]]:
    """Each router's branch names; check every ``branch=`` names a router and one of its branches."""
    used: dict[str, list[str]] = {}
    for n, spec in specs.items():
        if spec.branch is None:
            continue
        router, branch = spec.branch
        if router not in specs:
            raise UnknownNodeError(router, specs, role=f"node {n!r}: branch router")
        if specs[router].router is None:
            raise GraphError(
                f"node {n!r} follows branch {branch!r} of {router!r}, but {router!r} is not a router; "
                f"declare it with @flow.router"
            )
        used.setdefault(router, []).append(branch)
    out: dict[str, tuple[str, ...]] = {}
    for n, spec in specs.items():
        if spec.router is None:
            continue
        declared = spec.router.branches
        names = tuple(dict.fromkeys(used.get(n, [])))
        if declared is not None:
            unknown = [b for b in names if b not in declared]
            if unknown:
                raise GraphError(
                    f"router {n!r} has no branch {unknown[0]!r}{_suggest(unknown[0], declared)}; "
                    f"its branches are {', '.join(declared)} (add it to @flow.router(branches=...))"
                )
            names = tuple(declared)
        out[n] = names
    return out


def with_subflow_params(spec: NodeSpec) -> NodeSpec:
    """A sub-flow node's parameters are the sub-flow's current inputs (it may have been edited)."""
    if spec.flow is None:
        return spec
    from nbflow._dsl.spec import wire_params

    child: Any = spec.flow
    declared = [
        (name, MISSING if info.required_by else SUBFLOW_DEFAULT, inspect.Parameter.empty)
        for name, info in child.graph.inputs.items()
    ]
    params = wire_params(spec.name, declared, spec.options.get("inputs"), f"sub-flow {child.name!r}")
    return replace(spec, params=params)


def validate_inputs(graph: Graph, plan: Plan, inputs: Mapping[str, Any]) -> None:
    """Check the caller's inputs against every consuming node's hint, before anything runs."""
    if not inputs:  # (most runs of a flow without inputs: no set of the plan's nodes, ~0.1 µs a node, per run)
        return
    planned = set(plan.nodes) - plan.overridden
    for name, value in inputs.items():
        for node in graph.inputs[name].consumers:
            if node not in planned:
                continue
            g = graph.nodes[node]
            for param, check in g.checks:
                if any(d.param == param and d.source == name and not d.is_node for d in g.deps):
                    check(value)
