"""The node cache at run time: look a node's result up before it runs, store it after it succeeded.

Only flows with caching come here (the scheduler's policy path); a flow without it never does.

The key of a node's result is a digest of the node's fingerprint (flow name, the function's code
in its normalized form -- docstrings, comments and formatting do not count --, its declaration:
name, wiring, control-flow options, the validate flag), the simple globals its code reads (now, at
run time), and the data version of each input: the content digest of the value (a flow input, a
node's output). A cached output's data version is stored with it, so a hit costs no hashing. So a
cosmetic edit re-runs nothing, and an edit whose output is identical re-runs that node only: its
dependents' keys did not change. A hit always means "this code got exactly these inputs before".

Concurrent lookups of one key (batch rows, grid variants sharing an upstream) wait for the first
to finish and then hit, so the work is done once. Only SUCCEEDED outputs are stored: not failures,
not ``nf.Default`` recoveries, not nodes that asked a person (``nf.ask``), not maps with failed items.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from nbflow._core.errors import NbflowWarning
from nbflow._core.events import NodeSucceeded
from nbflow._core.missing import MISSING
from nbflow._core.secrets import Secret, is_secret_name, known_secrets
from nbflow._core.states import NodeStatus
from nbflow._engine.fingerprint import Unhashable, code_fingerprint, digest, globals_fingerprint
from nbflow._graph.graph import BoundResource, Dep, GNode, Graph
from nbflow._record.run import NodeRecord, Run

__all__ = [
    "PER_SAMPLE",
    "SAMPLE",
    "CacheBackend",
    "CachePlan",
    "CacheSession",
    "Unstorable",
    "node_fingerprints",
    "plan_cache",
]


PER_SAMPLE = "per-sample"  # @flow.node(cache="per-sample"): not deterministic, one entry per repeat


class Unstorable(Exception):
    """A backend cannot keep this value (a persistent cache cannot pickle it, or it holds a secret)."""


class CacheBackend(Protocol):
    """Where entries live (``nbflow.cache.NodeCache``). ``get``: (entry id, value) or None."""

    def get(self, key: str) -> tuple[str, Any] | None: ...

    def put(
        self,
        key: str,
        flow: str,
        node: str,
        value: Any,
        secrets: tuple[str, ...] = (),
        entry: str | None = None,
        code: str = "",
    ) -> str: ...


@dataclass(eq=False)
class CachePlan:
    """Which nodes of one compiled graph are cached, where, and their fingerprints (computed lazily)."""

    backend: CacheBackend
    flow: str
    validate: bool
    nodes: frozenset[str]
    per_sample: frozenset[str] = frozenset()
    by_default: frozenset[str] = frozenset()
    """Nodes cached only by the flow's default (no ``cache=`` of their own): not declared deterministic, so in a
    batch with ``repeats=N`` each sample gets its own entry (never N samples served by one call)."""
    _fingerprints: dict[str, str | None] = field(default_factory=dict)
    _warned: set[tuple[str, str]] = field(default_factory=set)
    _inflight: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=dict)

    def fingerprint(self, g: GNode) -> str | None:
        name = g.spec.name
        if name not in self._fingerprints:
            try:
                self._fingerprints[name] = _node_fingerprint(self.flow, self.validate, g)
            except Unhashable as exc:
                self._fingerprints[name] = None
                self.warn(name, "code", f"its code cannot be fingerprinted ({exc})")
        return self._fingerprints[name]

    def warn(self, node: str, what: str, why: str) -> None:
        """One NbflowWarning per node and reason per definition of the flow (not one per batch row)."""
        if (node, what) in self._warned:
            return
        self._warned.add((node, what))
        warnings.warn(
            f"node {node!r} of flow {self.flow!r} runs uncached: {why}; make it picklable data to cache "
            f"the node, or declare it with cache=False to silence this",
            NbflowWarning,
            stacklevel=2,
        )

    def session(self, run: Run, inputs: Mapping[str, Any]) -> CacheSession:
        return CacheSession(self, run, inputs)


def plan_cache(graph: Graph, backend: CacheBackend | None, default: bool, validate: bool) -> CachePlan | None:
    """The cache plan of ``graph``: nodes with ``cache=True``, or all but ``cache=False`` ones when on.

    Sub-flow nodes are never cached as a whole (their own flow's cache covers their nodes).
    """
    nodes = frozenset(
        name
        for name, g in graph.nodes.items()
        if g.spec.flow is None and g.spec.options.get("cache", default) in (True, PER_SAMPLE)
    )
    if not nodes or backend is None:
        return None
    per_sample = frozenset(n for n in nodes if graph.nodes[n].spec.options.get("cache") == PER_SAMPLE)
    by_default = frozenset(n for n in nodes if "cache" not in graph.nodes[n].spec.options)
    return CachePlan(backend, graph.name, validate, nodes, per_sample, by_default)


def _node_fingerprint(flow: str, validate: bool, g: GNode) -> str:
    spec = g.spec
    loop = spec.loop
    declaration: tuple[Any, ...] = (
        flow,
        validate,
        spec.name,
        tuple((d.param, d.source, d.is_node, d.alternatives, d.optional) for d in g.deps),
        spec.branch,
        g.branches,
        (spec.map.over, spec.map.errors) if spec.map is not None else None,
        (loop.feed, loop.max_iterations, loop.on_max, code_fingerprint(loop.until) if loop.until else None)
        if loop is not None
        else None,
    )
    if g.resources:  # the resource's definition counts, never the object (docs/resources.md)
        declaration = (*declaration, tuple((param, _resource_fingerprint(r)) for param, r in g.resources))
    return digest((code_fingerprint(spec.func), declaration))


def _resource_fingerprint(bound: BoundResource) -> Any:
    return (
        bound.name,
        code_fingerprint(bound.spec.func),
        tuple((n, repr(d)) for n, d in bound.inputs),
        tuple((p, _resource_fingerprint(r)) for p, r in bound.resources),
    )


class CacheSession:
    """The cache as one run sees it: keys, lookups (with hits recorded) and stores."""

    def __init__(self, plan: CachePlan, run: Run, inputs: Mapping[str, Any]) -> None:
        self.plan = plan
        self.run = run
        self.inputs = inputs
        self._input_ids: dict[str, str] = {}
        self._secrets: tuple[str, ...] | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values of the run's secret inputs: a file cache refuses values containing them.

        Validation turns an ``nf.Secret`` into a plain ``str`` inside a node, so a file cache looks
        for the text itself in what it would write, not for the Secret type.
        """
        if self._secrets is None:
            inputs = self.run._root.inputs
            found = {
                str.__str__(v)
                for k, v in inputs.items()
                if isinstance(v, Secret) or (is_secret_name(k) and isinstance(v, str))
            }
            found |= known_secrets()  # and every secret known by value (the environment, other nf.Secret values)
            self._secrets = tuple(s for s in found if len(s) >= 4)
        return self._secrets

    def _identity(self, dep: Dep, value: Any) -> str:
        """What stands for one input in the key (raises Unhashable)."""
        if not dep.is_node:
            found = self._input_ids.get(dep.source)
            if found is None:
                found = self._input_ids[dep.source] = digest(value)
            return found
        if value is MISSING:
            return "missing"
        records = self.run.nodes
        source = dep.source
        if dep.alternatives:
            source = next(a for a in dep.alternatives if records[a].status is NodeStatus.SUCCEEDED)
        rec = records[source]
        if rec._cache_id is None:  # not from the cache: its value stands for it (computed once)
            rec._cache_id = "v:" + digest(value)
        return rec._cache_id

    def key(self, g: GNode, kwargs: Mapping[str, Any]) -> str | None:
        name = g.spec.name
        fp = self.plan.fingerprint(g)
        if fp is None:
            return None
        parts: list[Any] = [fp, globals_fingerprint(g.spec.func)]
        if name in self.plan.per_sample:
            parts.append(("sample", SAMPLE.get()))
        elif name in self.plan.by_default:
            sample = SAMPLE.get()  # (None outside a repeats=N batch: the key is what it always was)
            if sample is not None:
                parts.append(("sample", sample))
        for dep in g.deps:
            if dep.param not in kwargs:
                parts.append((dep.param, "default"))
                continue
            try:
                parts.append((dep.param, self._identity(dep, kwargs[dep.param])))
            except Unhashable as exc:
                self.plan.warn(name, f"input {dep.param}", f"its input {dep.param!r} has no stable digest ({exc})")
                return None
        for _, bound in g.resources:  # the flow inputs a resource is built from count like inputs
            for i in sorted(bound.all_inputs()):
                try:
                    parts.append(("resource input", i, digest(self.inputs.get(i, MISSING))))
                except Unhashable as exc:
                    self.plan.warn(name, f"input {i}", f"resource input {i!r} has no stable digest ({exc})")
                    return None
        return digest(parts)

    async def lookup(self, g: GNode, rec: NodeRecord, kwargs: dict[str, Any], fed_failure: bool) -> str | None:
        """Record a hit (``rec.cached``) and return None, or return the key to store the result under.

        None too when the node is not cached this time (not covered, fed a failure, unhashable input).
        """
        if g.spec.name not in self.plan.nodes or fed_failure or rec.status is not NodeStatus.PENDING:
            return None
        key = self.key(g, kwargs)
        if key is None:
            return None
        rec.cache_key = key
        plan = self.plan
        loop = asyncio.get_running_loop()
        while True:
            entry = plan.backend.get(key)
            if entry is not None:
                self._hit(rec, kwargs, entry)
                return None
            busy = plan._inflight.get(key)
            if busy is None or busy[0] is not loop:
                break
            await busy[1].wait()  # the same work is running (another row): wait, then look again
        if key not in plan._inflight:
            plan._inflight[key] = (loop, asyncio.Event())
        return key

    def _hit(self, rec: NodeRecord, kwargs: dict[str, Any], entry: tuple[str, Any]) -> None:
        run = self.run
        rec._to(NodeStatus.SUCCEEDED)
        rec.inputs = kwargs
        rec._cache_id, rec.output = entry
        rec.cached = True
        rec.started_at = rec.finished_at = time.time()
        if run._subscribers:
            run._emit(NodeSucceeded(run_id=run.run_id, time=rec.finished_at, node=rec.name, duration=0.0, cached=True))
        elif run._armed:  # only the run view watches: a coalesced notice, no event
            run._notice()

    def done(self, rec: NodeRecord, key: str) -> None:
        """After the node ran: store a storable success; always let waiters for ``key`` go on."""
        plan = self.plan
        try:
            if self._storable(rec):
                try:
                    version = data_version(rec.output)
                    code = plan._fingerprints.get(rec.name) or ""
                    entry = plan.backend.put(key, plan.flow, rec.name, rec.output, self.secrets, version, code)
                    rec._cache_id = entry
                except Unstorable as exc:
                    plan.warn(rec.name, "output", f"its output cannot be kept: {exc}")
        finally:
            busy = plan._inflight.get(key)
            if busy is not None and busy[0] is asyncio.get_running_loop():
                del plan._inflight[key]
                busy[1].set()

    def _storable(self, rec: NodeRecord) -> bool:
        if rec.status is not NodeStatus.SUCCEEDED or rec.recovered:
            return False
        if rec.items is not None and any(i.status is not NodeStatus.SUCCEEDED for i in rec.items):
            return False  # a map with failed items: a transient failure must not be kept
        path = self.run._path + rec.name
        # A node that asked a person: its output holds their answer, which the key does not.
        return not any(p == path or p.startswith((path + "[", path + "@")) for p, _ in self.run._root._ask_counts)


# --- the flow's fingerprint per node, for batch stores (resume) --------------------------------------
def node_fingerprints(graph: Graph, validate: bool) -> dict[str, str | None]:
    """Each node's fingerprint as the cache computes it (code, declaration, simple globals and closure settings it reads).

    A sub-flow node counts by its own flow's fingerprints; a node whose code cannot be read is None
    (a batch store then treats it as changed: it cannot tell). The same rule as cache keys, so a
    batch resumed after an edit re-runs exactly what a cache would.
    """
    out: dict[str, str | None] = {}
    for name, g in graph.nodes.items():
        sub = g.spec.flow
        try:
            if sub is not None:
                out[name] = digest(
                    ("subflow", g.spec.output, sorted(node_fingerprints(sub.graph, sub.validate).items()))
                )
            else:
                out[name] = digest((_node_fingerprint(graph.name, validate, g), globals_fingerprint(g.spec.func)))
        except Unhashable:
            out[name] = None
    return out


# The repeat index of the batch row being run (``flow.batch(..., repeats=N)``); None outside one.
# Part of the key of nodes declared ``cache="per-sample"`` (not deterministic): each sample is its own call.
SAMPLE: contextvars.ContextVar[int | None] = contextvars.ContextVar("nbflow_sample", default=None)


def data_version(value: Any) -> str | None:
    """The content digest that stands for a node's output in its dependents' keys (None: not hashable)."""
    try:
        return "v:" + digest(value)
    except Unhashable:
        return None
