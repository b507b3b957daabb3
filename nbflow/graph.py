"""Specs -> a validated, read-only graph. Pure data and traversals: nothing here runs a node."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ._validate import Validator, hints_of, make_validator
from .errors import CycleError, MissingInputError, UnknownInputError, UnknownNodeError, _suggest
from .spec import NodeSpec

__all__ = ["Dep", "GNode", "Graph", "InputInfo", "Plan", "compile_graph", "find_cycle"]


@dataclass(frozen=True, slots=True)
class Dep:
    """Parameter ``param`` is fed by ``source``: a node when ``is_node``, else a flow input."""

    param: str
    source: str
    is_node: bool


@dataclass(frozen=True, slots=True)
class GNode:
    """A node in the compiled graph, with its edges and validators resolved."""

    spec: NodeSpec
    deps: tuple[Dep, ...]
    upstream: tuple[str, ...]
    downstream: tuple[str, ...]
    checks: tuple[tuple[str, Validator], ...]
    check_return: Validator | None

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True, slots=True)
class InputInfo:
    """A flow input: a parameter that no node feeds."""

    name: str
    required_by: tuple[str, ...]
    optional_for: tuple[str, ...]

    @property
    def consumers(self) -> tuple[str, ...]:
        return self.required_by + self.optional_for


@dataclass(frozen=True, slots=True)
class Plan:
    """What one run executes: the nodes needed for its targets (topological order) and the overrides."""

    nodes: tuple[str, ...]
    overridden: frozenset[str]
    inputs: frozenset[str]
    waiting: Mapping[str, int]
    """For each node to execute: how many planned upstreams it waits for (copied per run)."""


@dataclass(frozen=True, slots=True)
class Graph:
    """A validated flow: nodes in topological order (ties broken by definition order) and its inputs."""

    name: str
    nodes: Mapping[str, GNode]
    inputs: Mapping[str, InputInfo]

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
        """
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
        waiting = {
            n: sum(1 for u in self.nodes[n].upstream if u in planned)
            if needed is not self.nodes
            else len(self.nodes[n].upstream)
            for n in running
        }
        return Plan(order, overridden, frozenset(given), waiting)

    def _sinks(self) -> list[str]:
        return [n for n, g in self.nodes.items() if not g.downstream]


def find_cycle(upstream: Mapping[str, Iterable[str]], among: Iterable[str]) -> list[str]:
    """A cycle among ``among`` (each of which is on or leads to one), first node repeated at the end."""
    among_set = set(among)
    start = min(among_set, key=list(upstream).index)
    path: list[str] = []
    index: dict[str, int] = {}
    node = start
    while node not in index:
        index[node] = len(path)
        path.append(node)
        node = next(u for u in upstream[node] if u in among_set)
    cycle = path[index[node] :]
    cycle.reverse()  # report in data-flow direction: producer -> consumer
    return [*cycle, cycle[0]]


def compile_graph(name: str, specs: Mapping[str, NodeSpec], validate: bool = True) -> Graph:
    """Resolve wiring, check for cycles, order topologically and build validators."""
    order = list(specs)
    position = {n: i for i, n in enumerate(order)}
    deps: dict[str, tuple[Dep, ...]] = {}
    upstream: dict[str, tuple[str, ...]] = {}
    inputs_req: dict[str, list[str]] = {}
    inputs_opt: dict[str, list[str]] = {}
    for n, spec in specs.items():
        ds = []
        for p in spec.params:
            is_node = p.source in specs
            if is_node and p.source == n:
                raise CycleError([n, n])
            ds.append(Dep(p.name, p.source, is_node))
            if not is_node:
                (inputs_req if p.required else inputs_opt).setdefault(p.source, []).append(n)
        deps[n] = tuple(ds)
        upstream[n] = tuple(dict.fromkeys(d.source for d in ds if d.is_node))
    downstream: dict[str, list[str]] = {n: [] for n in order}
    for n in order:
        for u in upstream[n]:
            downstream[u].append(n)

    # Kahn's algorithm, ties broken by definition order so runs and drawings are deterministic.
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
        raise CycleError(find_cycle(upstream, [n for n in order if indegree[n] > 0]))

    nodes: dict[str, GNode] = {}
    hints = {n: hints_of(specs[n].func) for n in topo} if validate else {}
    for n in topo:
        spec = specs[n]
        checks: list[tuple[str, Validator]] = []
        check_return = None
        if validate:
            for p in spec.params:
                hint = hints[n].get(p.name)
                # A value from a node whose return hint is the same was validated on the way out.
                if p.source in specs and "return" in hints[p.source] and hints[p.source]["return"] == hint:
                    continue
                v = make_validator(hint, n, p.name)
                if v is not None:
                    checks.append((p.name, v))
            check_return = make_validator(hints[n].get("return"), n, "return")
        nodes[n] = GNode(
            spec=spec,
            deps=deps[n],
            upstream=upstream[n],
            downstream=tuple(sorted(downstream[n], key=position.__getitem__)),
            checks=tuple(checks),
            check_return=check_return,
        )
    names = sorted(set(inputs_req) | set(inputs_opt))
    inputs = {i: InputInfo(i, tuple(inputs_req.get(i, ())), tuple(inputs_opt.get(i, ()))) for i in names}
    return Graph(name=name, nodes=nodes, inputs=inputs)
