"""Drawing a flow or a run: a Graphviz digraph (SVG in notebooks) and a plain-text fallback."""

from __future__ import annotations

import shutil
import warnings
from typing import TYPE_CHECKING, Any

from .engine.states import NodeStatus
from .errors import NbflowWarning

if TYPE_CHECKING:
    import graphviz

    from .graph import Graph
    from .run import Run

__all__ = ["STATE_COLORS", "mimebundle", "text_graph", "to_dot"]

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

_warned = False


def has_dot() -> bool:
    return shutil.which("dot") is not None


def node_id(name: str) -> str:
    return f"node-{name}"


def input_id(name: str) -> str:
    return f"input__{name}"


def to_dot(graph: Graph, run: Run | None = None) -> graphviz.Digraph:
    """The graph as a ``graphviz.Digraph``; with ``run``, nodes are coloured by their state."""
    import graphviz

    dot = graphviz.Digraph(graph.name, graph_attr={"rankdir": "TB", "fontname": "Helvetica", "bgcolor": "transparent"})
    dot.attr("node", fontname="Helvetica", fontsize="11")
    dot.attr("edge", fontname="Helvetica", fontsize="9", color="#868e96")
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
    for name, g in graph.nodes.items():
        status = run.nodes[name].status if run is not None and name in run.nodes else NodeStatus.PENDING
        fill, line = STATE_COLORS[status]
        label = name if run is None else f"{name}\n{status.value}"
        tooltip = (g.spec.doc.splitlines() or [name])[0]
        if run is not None and name in run.nodes:
            rec = run.nodes[name]
            if rec.error is not None:
                tooltip = f"{type(rec.error).__name__}: {rec.error}"[:200]
            elif rec.skip_reason:
                tooltip = rec.skip_reason
        dot.node(
            name,
            label,
            shape="box",
            style="rounded,filled",
            fillcolor=fill if run is not None else "#ffffff",
            color=line if run is not None else "#495057",
            penwidth="2" if status is NodeStatus.FAILED else "1",
            tooltip=tooltip,
            id=node_id(name),
            **{"class": f"nbflow-node nbflow-{status.value}"},
        )
        for dep in g.deps:
            label = "" if dep.param == dep.source else dep.param
            src = dep.source if dep.is_node else input_id(dep.source)
            style = "solid" if dep.is_node else "dashed"
            dot.edge(src, name, label=label, style=style)
    return dot


def text_graph(graph: Graph, run: Run | None = None) -> str:
    """A readable text drawing: one line per node with what feeds it (and its state)."""
    lines = [f"flow {graph.name!r}: {len(graph.nodes)} nodes, inputs: {', '.join(graph.inputs) or '(none)'}"]
    for name, g in graph.nodes.items():
        feeds = [d.source if d.is_node else f"<{d.source}>" for d in g.deps]
        state = ""
        if run is not None and name in run.nodes:
            state = f"  [{run.nodes[name].status.value}]"
        arrow = f" <- {', '.join(feeds)}" if feeds else ""
        lines.append(f"  {name}{arrow}{state}")
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
