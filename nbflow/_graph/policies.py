"""Resolving every node's policy (retry, timeout, on_error, limits) and the failure handlers of a graph.

Pure data and checks, done when a flow compiles (``flow.graph`` raises a conflict where it is
written); applying them is the engine's (``engine/policy.py``), imported at the first run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from nbflow._core.clock import SYSTEM_CLOCK, Clock
from nbflow._core.errors import FlowDefinitionError, _suggest
from nbflow._core.records import record
from nbflow._dsl.limits import Limit
from nbflow._dsl.policies import OnError, Retry
from nbflow._graph.graph import Graph

if TYPE_CHECKING:
    from nbflow._engine.caching import CachePlan

__all__ = ["NO_POLICIES", "FlowPolicies", "NodePolicy", "build_policies", "update_policies"]


@record(frozen=True)
class NodePolicy:
    """What to do around one node's call; only nodes with something to do get one."""

    retry: Retry | None = None
    timeout: float | None = None
    on_error: OnError = "fail"
    limits: tuple[Limit, ...] = ()


@record(frozen=True)
class FlowPolicies:
    """Every node's policy, the failure handlers, and the clock retry delays sleep on."""

    nodes: Mapping[str, NodePolicy]
    handler_of: Mapping[str, str]  # failed node -> the node that handles its failure
    handles: Mapping[str, str]  # handler -> the node whose failure it handles
    clock: Clock = SYSTEM_CLOCK
    cache: CachePlan | None = None  # node caching (engine/caching.py); None: off
    # Whether any of it is in play (False: the engine's plain rules); read once per run, so set once here.
    active: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "active", bool(self.nodes or self.handles) or self.cache is not None)

    def continues(self, name: str) -> bool:
        pol = self.nodes.get(name)
        return pol is not None and pol.on_error == "continue"


NO_POLICIES = FlowPolicies({}, {}, {})


def build_policies(
    graph: Graph, default_retry: Retry | None, limits: Mapping[str, Limit], clock: Clock
) -> FlowPolicies:
    """Resolve each node's options against the flow's defaults; raise FlowDefinitionError on conflicts."""
    nodes: dict[str, NodePolicy] = {}
    handler_of: dict[str, str] = {}
    handles: dict[str, str] = {}
    for name, g in graph.nodes.items():
        opts = g.spec.options
        if not opts and default_retry is None:
            continue  # no option and no flow default: the plain policy, which no node keeps
        pol = _node_policy(graph.name, name, opts, default_retry, limits)
        if pol is not None:
            nodes[name] = pol
        target = opts.get("on_failure_of")
        if target is not None:
            if target in handler_of:
                raise FlowDefinitionError(
                    f"node {name!r}: on_failure_of={target!r}, but {handler_of[target]!r} already handles the "
                    f"failure of {target!r}; a node has at most one failure handler"
                )
            strategy = graph.nodes[target].spec.options.get("on_error", "fail")
            if strategy != "fail":
                raise FlowDefinitionError(
                    f"node {name!r} handles failures of {target!r}, whose on_error={strategy!r} means it never "
                    f"fails that way; use either on_error= on {target!r} or a failure handler, not both"
                )
            handler_of[target] = name
            handles[name] = target
    return FlowPolicies(nodes, handler_of, handles, clock)


def _node_policy(
    flow: str, name: str, opts: Mapping[str, Any], default_retry: Retry | None, limits: Mapping[str, Limit]
) -> NodePolicy | None:
    """A node's policy from its options and the flow's defaults (None: the plain one)."""
    retry = opts.get("retry", default_retry)
    if retry is False:
        retry = None
    uses: tuple[str, ...] = opts.get("uses", ())
    for u in uses:
        if u not in limits:
            raise FlowDefinitionError(
                f"node {name!r}: uses={u!r} names no limit of flow {flow!r}{_suggest(u, limits)}; "
                f"declare it with nf.Flow(..., limits={{{u!r}: nf.Limit(...)}}); "
                f"known limits: {', '.join(sorted(limits)) or '(none)'}"
            )
    on_error = opts.get("on_error", "fail")
    pol = NodePolicy(
        retry=retry if isinstance(retry, Retry) and retry.attempts > 1 else None,
        timeout=opts.get("timeout"),
        on_error=on_error,
        # Sorted by name: nodes taking several limits always take them in the same order (no deadlock).
        limits=tuple(limits[u] for u in sorted(set(uses))),
    )
    return None if pol == NodePolicy() else pol


def update_policies(
    old: FlowPolicies,
    graph: Graph,
    redeclared: Iterable[str],
    default_retry: Retry | None,
    limits: Mapping[str, Limit],
    clock: Clock,
) -> FlowPolicies:
    """``build_policies`` after ``recompile``: only the redeclared nodes' policies are made again.

    Their failure handling is unchanged (``recompile`` asks for the same ``on_failure_of`` and
    ``on_error``), so the handlers stand; the flow's defaults are the ones ``old`` was built with.
    """
    nodes = dict(old.nodes)
    for name in redeclared:
        opts = graph.nodes[name].spec.options
        pol = _node_policy(graph.name, name, opts, default_retry, limits) if opts or default_retry else None
        if pol is None:
            nodes.pop(name, None)
        else:
            nodes[name] = pol
    return FlowPolicies(nodes, old.handler_of, old.handles, clock, old.cache)
