"""Drawing a flow or a run: a Graphviz digraph (SVG in notebooks) and a plain-text fallback."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import NbflowWarning
from nbflow._core.states import NodeStatus

if TYPE_CHECKING:
    import graphviz

    from nbflow._graph.graph import Graph
    from nbflow._record.run import Run

__all__ = [
    "SEGMENTS",
    "STATE_COLORS",
    "SYMBOLS",
    "count_nodes",
    "graph_shape",
    "mimebundle",
    "shape_svg",
    "text_graph",
    "to_dot",
]

# fill, border: readable on light and dark themes; failed must stand out.
STATE_COLORS: dict[NodeStatus, tuple[str, str]] = {
    NodeStatus.PENDING: ("#f2f2f2", "#9e9e9e"),
    NodeStatus.RUNNING: ("#fff3bf", "#f08c00"),
    NodeStatus.PAUSED: ("#e5dbff", "#7048e8"),
    NodeStatus.SUCCEEDED: ("#d3f9d8", "#2b8a3e"),
    NodeStatus.FAILED: ("#ffc9c9", "#c92a2a"),
    NodeStatus.SKIPPED: ("#e9ecef", "#adb5bd"),
    NodeStatus.CANCELLED: ("#ffe8cc", "#d9480f"),
}
_INPUT_COLOR = ("#e7f5ff", "#1971c2")
# One symbol per state beside its colour (told apart without colour vision too); widgets/style.py and the
# viewer's pages (nbflow/_front) show the same.
SYMBOLS: dict[str, str] = {
    "pending": "○",
    "running": "▶",
    "paused": "‖",  # U+2016: in the common fonts (U+23F8 is not, and showed as a box)
    "succeeded": "✓",
    "failed": "✗",
    "skipped": "–",
    "cancelled": "⊘",
}

# How a state fills its share of a bar of row counts (the batch's bar, each variant's bar, the viewer's bars):
# a colour, and a pattern for the states a colour alone would not tell apart (failed, paused, cancelled).
SEGMENTS: dict[str, str] = {
    "succeeded": "#2b8a3e",
    "failed": "repeating-linear-gradient(45deg, #c92a2a 0 4px, #fff 4px 6px)",
    "paused": "repeating-linear-gradient(90deg, #7048e8 0 3px, #fff 3px 5px)",
    "cancelled": "repeating-linear-gradient(0deg, #d9480f 0 3px, #fff 3px 5px)",
    "skipped": "repeating-linear-gradient(0deg, #868e96 0 2px, #fff 2px 5px)",
    "running": "#f08c00",
    "from store": "#74c0fc",
    "pending": "#dee2e6",
}

_warned = False


def has_dot() -> bool:
    import shutil  # here, not at import: shutil pulls in bz2/lzma (~8 ms of `import nbflow`)

    return shutil.which("dot") is not None


def node_id(name: str) -> str:
    return f"node-{name}"


def input_id(name: str) -> str:
    return f"input__{name}"


def to_dot(graph: Graph, run: Run | None = None, collapsed: frozenset[str] = frozenset()) -> graphviz.Digraph:
    """The graph as a ``graphviz.Digraph``; with ``run``, nodes are coloured by their state.

    The sub-flows named in ``collapsed`` (their paths: ``"sub"``, ``"sub.inner"``) are drawn as one node each.
    """
    import graphviz

    dot = graphviz.Digraph(graph.name, graph_attr={"rankdir": "TB", "fontname": "Helvetica", "bgcolor": "transparent"})
    dot.attr("node", fontname="Helvetica", fontsize="11")
    dot.attr("edge", fontname="Helvetica", fontsize="9", color="#868e96")
    _draw_graph(dot, graph, run, collapsed)
    return dot


def _draw_graph(dot: Any, graph: Graph, run: Run | None, collapsed: frozenset[str]) -> None:
    """What ``to_dot`` draws, onto ``dot`` (a ``graphviz.Digraph``, or ``_Recorder`` for ``graph_shape``)."""
    if graph.inputs:
        with dot.subgraph(name="cluster_inputs") as inputs:
            inputs.attr(label="inputs", style="dashed", color="#adb5bd", fontcolor="#868e96", fontsize="10")
            for name in graph.inputs:
                fill, line = _INPUT_COLOR
                inputs.node(
                    input_id(name),
                    name,
                    shape="ellipse",
                    style="filled",
                    fillcolor=fill,
                    color=line,
                    id=f"input-{name}",
                    **{"class": "nbflow-input"},
                )
    edges: list[tuple[str, str, dict[str, str]]] = []
    _draw_nodes(dot, edges, graph, run, "", {}, collapsed)
    for src, dst, attrs in edges:  # at the top level: an edge inside a cluster would pull its ends in
        dot.edge(src, dst, **attrs)
    _draw_resources(dot, graph)


class _Recorder:
    """Stands in for a ``graphviz.Digraph``: what ``to_dot`` draws, recorded as plain data (``graph_shape``)."""

    def __init__(self, shape: dict[str, Any], cluster: int | None = None) -> None:
        self.shape, self.cluster = shape, cluster

    def attr(self, *args: Any, **attrs: Any) -> None:
        if self.cluster is not None and not args:
            self.shape["clusters"][self.cluster]["label"] = str(attrs.get("label", ""))

    def node(self, name: str, label: str | None = None, **attrs: Any) -> None:
        kind = (
            "input"
            if "nbflow-input" in attrs.get("class", "")
            else "resource"
            if name.startswith("resource__")
            else "node"
        )
        entry: dict[str, Any] = {"id": name, "label": label or name, "kind": kind, "cluster": self.cluster}
        entry.update({k: str(attrs[k]) for k in ("shape", "style", "tooltip") if k in attrs})
        self.shape["nodes"].append(entry)

    def edge(self, src: str, dst: str, **attrs: Any) -> None:
        self.shape["edges"].append([src, dst, {k: str(v) for k, v in attrs.items()}])

    @contextmanager
    def subgraph(self, name: str) -> Iterator[_Recorder]:
        self.shape["clusters"].append({"name": name, "label": "", "parent": self.cluster})
        yield _Recorder(self.shape, len(self.shape["clusters"]) - 1)


def graph_shape(graph: Graph) -> dict[str, Any]:
    """The flow's picture as plain JSON data (nodes, clusters, edges; no code, no states): what a batch store
    records with its experiment, so ``nbflow view`` and ``nbflow report`` draw the graph (``shape_svg``)
    without the flow's code."""
    shape: dict[str, Any] = {"name": graph.name, "nodes": [], "clusters": [], "edges": []}
    _draw_graph(_Recorder(shape), graph, None, frozenset())
    return shape


_SHAPES = frozenset({"box", "box3d", "hexagon", "ellipse"})
_STYLES = frozenset({"filled", "rounded,filled", "dashed", "dotted", "solid", "bold", "rounded,dashed"})
_ARROWS = frozenset({"none", "normal"})
_COLOR = re.compile(r"#[0-9a-fA-F]{6}")


def shape_svg(shape: Mapping[str, Any]) -> str | None:
    """``graph_shape``'s data laid out by Graphviz as SVG, every node pending (``nbflow-node nbflow-pending``,
    id ``node-<name>``; a page recolours them by state), or None without ``dot``. The data may come from a
    file someone else wrote: only known attribute values are used, and every text is given to Graphviz as
    plain text (never an HTML-like label), which escapes it in the SVG."""
    if not has_dot():
        return None
    import graphviz

    dot = graphviz.Digraph("flow", graph_attr={"rankdir": "TB", "fontname": "Helvetica", "bgcolor": "transparent"})
    dot.attr("node", fontname="Helvetica", fontsize="11")
    dot.attr("edge", fontname="Helvetica", fontsize="9", color="#868e96")
    text = graphviz.nohtml
    clusters = list(shape.get("clusters") or [])
    members: dict[int | None, list[dict[str, Any]]] = {}
    for node in shape.get("nodes") or []:
        members.setdefault(node.get("cluster"), []).append(node)

    def fill(target: Any, cluster: int | None) -> None:
        for node in members.get(cluster, []):
            name, kind = str(node.get("id")), node.get("kind")
            label = str(node.get("label") or name)
            attrs = {
                "shape": node.get("shape") if node.get("shape") in _SHAPES else "box",
                "style": node.get("style") if node.get("style") in _STYLES else "filled",
                "tooltip": text(str(node.get("tooltip") or "")[:200]),
            }
            if kind == "node":
                label += f"\n{SYMBOLS['pending']} pending"
                attrs.update(
                    fillcolor="#ffffff", color="#495057", id=node_id(name), **{"class": "nbflow-node nbflow-pending"}
                )
            else:
                attrs.update(fillcolor="#e7f5ff" if kind == "input" else "#f1f3f5", color="#868e96")
            target.node(text(name), text(label), **attrs)
        for i, c in enumerate(clusters):
            if c.get("parent") == cluster:
                with target.subgraph(name=f"cluster_{i}") as sub:
                    sub.attr(
                        label=text(str(c.get("label") or "")), style="rounded,dashed", color="#adb5bd", fontsize="10"
                    )
                    fill(sub, i)

    fill(dot, None)
    for src, dst, attrs in shape.get("edges") or []:
        kept = {
            "label": text(str(attrs.get("label") or "")),
            "style": attrs.get("style") if attrs.get("style") in _STYLES else "solid",
            "arrowhead": attrs.get("arrowhead") if attrs.get("arrowhead") in _ARROWS else "normal",
        }
        for key in ("color", "fontcolor"):
            if _COLOR.fullmatch(str(attrs.get(key, ""))):
                kept[key] = str(attrs[key])
        if attrs.get("constraint") == "false":
            kept["constraint"] = "false"
        dot.edge(text(str(src)), text(str(dst)), **kept)
    try:
        svg = dot.pipe(format="svg", encoding="utf-8")
    except Exception:  # a broken Graphviz: the page lists the nodes instead
        return None
    return svg[max(svg.find("<svg"), 0) :]


def _draw_resources(dot: Any, graph: Graph) -> None:
    """Resources apart, as small boxes on the side, with dotted lines to the nodes that use them."""
    if not graph.resources:
        return
    with dot.subgraph(name="cluster_resources") as box:
        box.attr(label="resources", style="dashed", color="#adb5bd", fontcolor="#868e96", fontsize="10")
        for name in graph.resources:
            box.node(
                f"resource__{name}",
                name,
                shape="box",
                style="rounded,filled",
                fillcolor="#f1f3f5",
                color="#adb5bd",
                fontsize="9",
                height="0.25",
                tooltip=(graph.resources[name].spec.doc.splitlines() or [f"resource {name}"])[0],
                id=f"resource-{name}",
                **{"class": "nbflow-resource"},
            )
        for name, bound in graph.resources.items():
            for _, dep in bound.resources:
                box.edge(f"resource__{dep.name}", f"resource__{name}", style="dotted", arrowhead="none")
    for node, g in graph.nodes.items():
        for param, bound in g.resources:
            label = "" if param == bound.name else param
            dot.edge(
                f"resource__{bound.name}",
                node,  # the node's name in the DOT source (node_id is its SVG id)
                style="dotted",
                arrowhead="none",
                label=label,
                constraint="false",
            )


def _draw_nodes(
    dot: Any,
    edges: list[tuple[str, str, dict[str, str]]],
    graph: Graph,
    run: Run | None,
    prefix: str,
    feeds: dict[str, tuple[str, str]],
    collapsed: frozenset[str] = frozenset(),
) -> None:
    """Nodes and edges of ``graph``; sub-flows are drawn as clusters of their own nodes (or, when their path
    is in ``collapsed``, as one node that says how many nodes it holds).

    ``feeds`` maps a sub-flow's input names to the parent's (source id, edge label).
    """
    for name, g in graph.nodes.items():
        rec = run.nodes.get(name) if run is not None else None
        status = rec.status if rec is not None else NodeStatus.PENDING
        fill, line = STATE_COLORS[status]
        spec = g.spec
        title = name
        if spec.map is not None:
            title += f"\n[map over {spec.map.over}]"
        elif spec.loop is not None:
            title += f"\n[loop on {spec.loop.feed}]"
        here = prefix + name
        folded = spec.flow is not None and here in collapsed
        if folded:
            assert spec.flow is not None
            title += f"\n[▸ sub-flow {spec.flow.name!r}: {count_nodes(spec.flow.graph)} nodes]"
        label = title if run is None else f"{title}\n{status.value}"
        if rec is not None:
            label += f" ×{len(rec.attempts)}" if len(rec.attempts) > 1 else ""  # retries show in the picture
            label += " (recovered)" if rec.recovered else ""
            label += " (cached)" if rec.cached else ""
        tooltip = (spec.doc.splitlines() or [name])[0]
        if rec is not None:
            if rec.error is not None:
                tooltip = f"{type(rec.error).__name__}: {rec.error}"[:200]
            elif rec.skip_reason:
                tooltip = rec.skip_reason
        attrs = dict(
            shape="hexagon" if spec.router is not None else "box3d" if spec.map is not None else "box",
            style="rounded,filled" if spec.router is None else "filled",
            fillcolor=fill if run is not None else "#ffffff",
            color=line if run is not None else "#495057",
            penwidth="2" if status is NodeStatus.FAILED else "1",
            tooltip=tooltip,
            id=node_id(prefix + name),
            **{"class": f"nbflow-node nbflow-{status.value}"},
        )
        if spec.flow is not None and not folded:
            with dot.subgraph(name=f"cluster_{here}") as cluster:
                cluster.attr(
                    label=f"sub-flow {spec.flow.name!r}",
                    style="rounded,dashed",
                    color="#868e96",
                    fontsize="10",
                    fontcolor="#495057",
                )
                cluster.node(here, label, **attrs)
                child = spec.flow.graph
                sub = rec.subrun if rec is not None else None
                inner = {}
                for dep in g.deps:
                    src = prefix + dep.source if dep.is_node else (input_id(dep.source) if not prefix else None)
                    if src is None and dep.source in feeds:
                        src = feeds[dep.source][0]
                    if src is not None:
                        inner[dep.param] = (src, "" if dep.param == dep.source else dep.param)
                _draw_nodes(cluster, edges, child, sub, here + ".", inner, collapsed)
                for leaf, lg in child.nodes.items():
                    if spec.output in (None, leaf) and not lg.downstream:
                        edges.append((f"{here}.{leaf}", here, {"style": "dotted", "arrowhead": "none"}))
        else:
            dot.node(here, label, **attrs)
        if spec.branch is not None:
            router, branch = spec.branch
            edges.append((prefix + router, here, branch_edge(branch, here, rec.status if rec is not None else None)))
        handled = spec.options.get("on_failure_of")
        if handled is not None:  # the fail branch: one red edge, whether or not it takes the error
            edges.append(
                (
                    prefix + handled,
                    here,
                    {"label": "on failure", "style": "dashed", "color": "#c92a2a", "fontcolor": "#c92a2a"},
                )
            )
        for dep in [] if spec.flow is not None and not folded else g.deps:  # a sub-flow's go to its inner nodes
            if dep.is_node and dep.source == handled:
                continue
            if dep.alternatives:
                for alt in dep.alternatives:
                    edges.append((prefix + alt, here, {"label": f"{dep.param} (first of)", "style": "dashed"}))
                continue
            label = "" if dep.param == dep.source else dep.param
            if dep.optional:
                label = f"{dep.param}?"
            if dep.is_node:
                edges.append(
                    (prefix + dep.source, here, {"label": label, "style": "dotted" if dep.optional else "solid"})
                )
            elif not prefix:
                edges.append((input_id(dep.source), here, {"label": label, "style": "dashed"}))
            elif dep.source in feeds:
                src, outer_label = feeds[dep.source]
                edges.append((src, here, {"label": outer_label or label, "style": "solid"}))


_RAN = frozenset({NodeStatus.RUNNING, NodeStatus.PAUSED, NodeStatus.SUCCEEDED, NodeStatus.FAILED, NodeStatus.CANCELLED})


def branch_edge(branch: str, target: str, status: NodeStatus | None) -> dict[str, str]:
    """A router's edge to a node of one of its branches: bold violet, solid, once the branch is taken (its node
    ran) or while undecided; thin, grey and dashed when it was not taken (its node skipped). Its SVG id is
    ``branch__<target path>`` and its class ``nbflow-branch`` (+ ``nbflow-taken`` / ``nbflow-not-taken``): the
    live view and the snapshot restyle it as the run goes (``nbflow/widgets/graph_pane.py``)."""
    attrs = {"label": branch, "id": f"branch__{target}", "class": "nbflow-branch"}
    if status is NodeStatus.SKIPPED:
        attrs.update(
            style="dashed", color="#adb5bd", fontcolor="#495057", **{"class": "nbflow-branch nbflow-not-taken"}
        )
    else:
        attrs.update(style="bold", color="#7048e8", fontcolor="#7048e8")
        if status in _RAN:
            attrs["class"] = "nbflow-branch nbflow-taken"
    return attrs


def count_nodes(graph: Graph) -> int:
    """How many nodes ``graph`` has, the nodes of its sub-flows included."""
    return sum(1 + (count_nodes(g.spec.flow.graph) if g.spec.flow is not None else 0) for g in graph.nodes.values())


def text_graph(graph: Graph, run: Run | None = None) -> str:
    """A readable text drawing: one line per node with what feeds it (and its state)."""
    lines = [f"flow {graph.name!r}: {len(graph.nodes)} nodes, inputs: {', '.join(graph.inputs) or '(none)'}"]
    for name, g in graph.nodes.items():
        handled = g.spec.options.get("on_failure_of")
        feeds = [d.source if d.is_node else f"<{d.source}>" for d in g.deps if not (d.is_node and d.source == handled)]
        if handled is not None:
            feeds.insert(0, f"{handled} (on failure)")
        state = ""
        if run is not None and name in run.nodes:
            rec = run.nodes[name]
            state = f"  [{rec.status.value}{', cached' if rec.cached else ''}]"
        arrow = f" <- {', '.join(feeds)}" if feeds else ""
        lines.append(f"  {name}{arrow}{state}")
    for res in graph.resources:
        users = [n for n, g in graph.nodes.items() if any(b.name == res for _, b in g.resources)]
        lines.append(f"  [resource] {res}: used by {', '.join(users) or '(no node)'}")
    return "\n".join(lines)


def render_svg(graph: Graph, run: Run | None = None) -> str | None:
    """SVG text, or None (after one warning) when Graphviz's ``dot`` is not installed."""
    global _warned
    if not has_dot():
        if not _warned:
            _warned = True
            warnings.warn(
                "Graphviz's 'dot' program is not installed, so graphs are shown as text; install it with "
                "'apt-get install graphviz' (Debian/Ubuntu), 'brew install graphviz' or 'conda install graphviz'",
                NbflowWarning,
                stacklevel=3,
            )
        return None
    try:
        return to_dot(graph, run).pipe(format="svg", encoding="utf-8")
    except Exception as exc:  # a broken Graphviz must not break the notebook
        warnings.warn(f"Graphviz failed to render the graph ({exc}); showing text", NbflowWarning, stacklevel=3)
        return None


def mimebundle(graph: Graph | None, run: Run | None = None, text: str | None = None) -> dict[str, Any]:
    if graph is None:
        return {"text/plain": text or ""}
    bundle: dict[str, Any] = {"text/plain": text if text is not None else text_graph(graph, run)}
    svg = render_svg(graph, run)
    if svg is not None:
        bundle["image/svg+xml"] = svg
    return bundle
