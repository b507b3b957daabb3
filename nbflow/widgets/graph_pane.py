"""The graph part of the run view: a Graphviz SVG laid out once and recoloured per redraw, or a table.

Laying a graph out with ``dot`` costs ~25 ms for 50 nodes and seconds for thousands, and a new
layout would make the picture jump as labels change. So the SVG is laid out once per view (with
every status label as wide as the widest) and each redraw only rewrites the per-node attributes
(class, fill, stroke, tooltip, status text), reusing the text of nodes whose state did not change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, cast

from nbflow._core.records import record
from nbflow._core.states import NodeStatus
from nbflow._show.draw import STATE_COLORS, has_dot, to_dot
from nbflow.widgets.redact import Redactor
from nbflow.widgets.style import chip, esc

if TYPE_CHECKING:
    from nbflow._graph.graph import GNode, Graph
    from nbflow._record.run import NodeRecord, Run

__all__ = [
    "NodeLook",
    "SvgTemplate",
    "can_draw",
    "escaped_paths",
    "first_doc_lines",
    "initial_collapse",
    "looks",
    "node_paths",
    "path_index",
    "subflow_paths",
    "table_html",
    "tries",
    "visible_nodes",
]

_DASH = r"(?:&#45;|-)"
_START = re.compile(rf'<g id="node{_DASH}(?P<name>[\w.]+)" class="node nbflow{_DASH}node nbflow{_DASH}\w+">')
_TITLE = re.compile(r'(<a [^>]*?title=")[^"]*(")')
_PAINT = re.compile(r'<(path|polygon) fill="[^"]*" stroke="[^"]*"(?: stroke-width="[^"]*")?')
_STATUS_TEXT = re.compile(r"(<text[^>]*>)succeeded(</text>)(?![\s\S]*<text)")
_GRAPH_TITLE = re.compile(r'(<g id="graph0" class="graph"[^>]*>\s*)<title>[^<]*</title>')
_LAYOUT_STATUS = NodeStatus.SUCCEEDED  # "succeeded" is as wide as any status label
# a router's edge to a branch's node (nbflow._show.draw.branch_edge), laid out as taken: restyled per render
_BRANCH = re.compile(rf'<g id="branch__(?P<name>[\w.]+)" class="edge nbflow{_DASH}branch[^"]*">(?P<body>[\s\S]*?)</g>')
_RAN = frozenset({NodeStatus.RUNNING, NodeStatus.PAUSED, NodeStatus.SUCCEEDED, NodeStatus.FAILED, NodeStatus.CANCELLED})


@record(frozen=True)
class NodeLook:
    """How one node is drawn: its state (or None when not part of the run), tooltip and selection."""

    status: NodeStatus | None
    tooltip: str
    selected: bool = False
    note: str = ""  # after the state in the label: " ×3" (attempts), " (recovered)", " (cached)"


def node_paths(graph: Graph, prefix: str = "") -> Iterator[tuple[str, GNode]]:
    """Every node with its path; the nodes of a sub-flow ``sub`` follow it as ``sub.node``."""
    for name, g in graph.nodes.items():
        yield prefix + name, g
        child = getattr(g.spec, "flow", None)
        if child is not None:
            yield from node_paths(child.graph, f"{prefix}{name}.")


def path_index(graph: Graph) -> dict[str, GNode]:
    """``node_paths`` as a dict, made once per graph (a sub-flow edited recompiles its parent's graph too)."""
    found = graph._views.get("path_index")
    if found is None:
        found = graph._views["path_index"] = dict(node_paths(graph))
    return dict(cast("dict[str, GNode]", found))


def escaped_paths(graph: Graph) -> dict[str, str]:
    """Each node's path escaped for HTML, made once per graph (a snapshot lists every node at each update)."""
    found = graph._views.get("escaped_paths")
    if found is None:
        found = graph._views["escaped_paths"] = {path: esc(path) for path, _ in node_paths(graph)}
    return cast("dict[str, str]", found)


def first_doc_lines(graph: Graph) -> dict[str, str]:
    """The first line of each node's docstring (computed once per view: ``inspect.getdoc`` is slow)."""
    return {path: (g.spec.doc.splitlines() or [""])[0] for path, g in node_paths(graph)}


def looks(
    graph: Graph, run: Run, selected: str | None, redact: Redactor, docs: Mapping[str, str]
) -> dict[str, NodeLook]:
    """The look of every node of ``graph`` (sub-flow nodes included) for the current state of ``run``."""
    out: dict[str, NodeLook] = {}
    _looks(graph, run, "", True, selected, redact, docs, out)
    return out


def _looks(
    graph: Graph,
    run: Run | None,
    prefix: str,
    planned: bool,
    selected: str | None,
    redact: Redactor,
    docs: Mapping[str, str],
    out: dict[str, NodeLook],
) -> None:
    records = run.nodes if run is not None else {}
    for name, g in graph.nodes.items():
        path = prefix + name
        rec = records.get(name)
        if rec is None:
            # inside a sub-flow that has not started yet, its nodes are pending; elsewhere: not planned
            status = NodeStatus.PENDING if planned and run is None else None
            tip = f"{path}: pending" if status is not None else f"{path}: not part of this run"
            out[path] = NodeLook(status, tip, path == selected)
        else:
            if rec.error is not None:
                tip = f"{path}: {type(rec.error).__name__}: {rec.error}"
            elif rec.skip_reason:
                tip = f"{path} {rec.status.value}: {rec.skip_reason}"
            else:
                doc = docs.get(path, "")
                tip = f"{path}: {rec.status.value}" + (f" — {doc}" if doc else "")
            attempts = tries(rec)
            note = (
                (f" ×{attempts}" if attempts > 1 else "")
                + (" (recovered)" if getattr(rec, "recovered", False) else "")
                + (" (cached)" if getattr(rec, "cached", False) else "")
            )
            out[path] = NodeLook(rec.status, redact(tip[:300]), path == selected, note)
        child = getattr(g.spec, "flow", None)
        if child is not None:
            sub = getattr(rec, "subrun", None) if rec is not None else None
            _looks(child.graph, sub, f"{path}.", rec is not None, selected, redact, docs, out)


def tries(rec: NodeRecord) -> int:
    """How many times a node was tried: attempts that raised, plus the last one if it did not.

    A node that paused on a question and was resumed has two attempts but was tried once: not a retry.
    """
    attempts = getattr(rec, "attempts", ())
    failed = sum(1 for a in attempts if a.error is not None)
    return failed + (1 if attempts and attempts[-1].error is None else 0)


def _layout_record(name: str, subrun: _LayoutRun | None) -> NodeRecord:
    """A real (detached) NodeRecord that says 'succeeded': whatever to_dot reads from a record exists."""
    from nbflow._record.run import NodeRecord

    rec = NodeRecord(name)
    rec.status = _LAYOUT_STATUS  # set directly: this record is never part of a run
    rec.subrun = cast("Run | None", subrun)
    return rec


class _LayoutRun:
    """Stands in for a Run when laying out: every node 'succeeded', so every box fits any label."""

    def __init__(self, graph: Graph) -> None:
        self.nodes = {
            name: _layout_record(
                name, _LayoutRun(g.spec.flow.graph) if getattr(g.spec, "flow", None) is not None else None
            )
            for name, g in graph.nodes.items()
        }


_MAX_LAYOUTS = 64
_LAYOUTS: dict[str, SvgTemplate] = {}  # DOT text (without the flow's name) -> its layout; least recently used first


class SvgTemplate:
    """A laid-out SVG of a graph whose node attributes can be rewritten cheaply."""

    def __init__(self, svg: str) -> None:
        svg = svg[max(svg.find("<svg"), 0) :]  # drop the XML prolog and DOCTYPE: this goes inside HTML
        svg = _GRAPH_TITLE.sub(r"\1", svg, count=1)  # the flow's name: layouts are shared by name-blind shape
        self._parts: list[str | tuple[str, str]] = []  # static text, or (node name, block template)
        pos = 0
        for m in _START.finditer(svg):
            end = svg.find("<!--", m.end())
            end = end if end != -1 else svg.rfind("</g>")
            self._parts.append(svg[pos : m.start()])
            block = "\x00C\x00" + svg[m.end() : end]
            block = _TITLE.sub(lambda t: t.group(1) + "\x00T\x00" + t.group(2), block, count=1)
            block = _PAINT.sub(lambda p: f"<{p.group(1)} \x00P\x00", block, count=1)
            block = _STATUS_TEXT.sub(lambda s: s.group(1) + "\x00S\x00" + s.group(2), block, count=1)
            self._parts.append((m.group("name"), block))
            pos = end
        self._parts.append(svg[pos:])
        self.nodes = [p[0] for p in self._parts if isinstance(p, tuple)]
        self._branches = "branch__" in svg
        self._cache: dict[tuple[str, NodeLook], str] = {}
        # Every node pending: what the live view sends once (one string shared by every view of the graph);
        # the browser recolours it from the views' node states.
        self.blank = self.render({n: NodeLook(NodeStatus.PENDING, n) for n in self.nodes})

    @classmethod
    def layout(cls, graph: Graph, collapsed: frozenset[str] = frozenset()) -> SvgTemplate:
        """Lay ``graph`` out with Graphviz (needs the ``dot`` program), once per graph and set of collapsed
        sub-flows.

        Cached on the graph: ten concurrent runs of a flow open ten views, and running ``dot`` for
        each would block the kernel's loop (~25 ms a time) while their nodes run.
        """
        key = "svg_template:" + ",".join(sorted(collapsed))
        found = graph._views.get(key)
        if found is None:
            dot = to_dot(graph, cast("Run", _LayoutRun(graph)), collapsed)
            # Also shared by graphs of the same shape (a flow defined again when its cell runs again):
            # the DOT text without its first line (the flow's name, which the picture does not show).
            shape = dot.source.partition("\n")[2]
            found = _LAYOUTS.pop(shape, None)
            if found is None:
                found = cls(dot.pipe(format="svg", encoding="utf-8"))
            _LAYOUTS[shape] = found
            while len(_LAYOUTS) > _MAX_LAYOUTS:
                _LAYOUTS.pop(next(iter(_LAYOUTS)))
            graph._views[key] = found
        return cast("SvgTemplate", found)

    def render(self, node_looks: Mapping[str, NodeLook]) -> str:
        out: list[str] = []
        for part in self._parts:
            if isinstance(part, str):
                out.append(part)
                continue
            name, block = part
            look = node_looks.get(name) or NodeLook(None, name)
            key = (name, look)
            text = self._cache.get(key)
            if text is None:
                text = self._cache[key] = _fill(name, block, look)
            out.append(text)
        text = "".join(out)
        if self._branches:
            text = _BRANCH.sub(
                lambda m: _branch(m.group("name"), m.group("body"), node_looks.get(m.group("name"))), text
            )
        return text


def _branch(name: str, body: str, look: NodeLook | None) -> str:
    """A branch edge for its node's state: taken (the node ran: solid violet), not taken (skipped: thin dashed
    grey), or undecided (solid violet, no mark). Inline attributes: the snapshot's picture is an image."""
    status = look.status if look is not None else None
    if status is NodeStatus.SKIPPED:
        body = (
            body.replace('stroke="#7048e8" stroke-width="2"', 'stroke="#adb5bd" stroke-dasharray="5,2"', 1)
            .replace('stroke="#7048e8" stroke-width="2"', 'stroke="#adb5bd"')
            .replace('fill="#7048e8"', 'fill="#adb5bd"', 1)
            .replace('fill="#7048e8"', 'fill="#495057"')
        )
        mark = " nbflow-not-taken"
    else:
        mark = " nbflow-taken" if status in _RAN else ""
    return f'<g id="branch__{name}" class="edge nbflow-branch{mark}">{body}</g>'


def _fill(name: str, block: str, look: NodeLook) -> str:
    status = look.status or NodeStatus.PENDING
    fill, line = STATE_COLORS[status]
    cls = f"node nbflow-node nbflow-{status.value}" + (" nbflow-selected" if look.selected else "")
    width = ' stroke-width="2"' if status is NodeStatus.FAILED else ""
    paint = f'fill="{fill}" stroke="{line}"{width}'
    label = status.value + look.note if look.status is not None else "not in run"
    return f'<g id="node-{name}" class="{cls}">' + block.replace("\x00C\x00", "").replace(
        "\x00T\x00", esc(look.tooltip)
    ).replace("\x00P\x00", paint).replace("\x00S\x00", esc(label))


def table_html(
    paths: Mapping[str, GNode],
    record: Callable[[str], NodeRecord | None],
    selected: str | None,
    redact: Redactor,
    max_rows: int = 60,
    states: Mapping[str, NodeStatus] | None = None,
) -> str:
    """The graph as a table (no ``dot``, or too many nodes to draw): state, node, fed by, time, note.

    ``states``: each path's state (a path left out has no record: not in the run), if the caller knows
    them (the live view reads them from the run's columns): the order is then decided without making a
    record, and only the rows shown make theirs."""
    made: dict[str, NodeRecord | None] = {}
    if states is None:
        made = {path: record(path) for path in paths}
        states = {path: rec.status for path, rec in made.items() if rec is not None}
    names = list(paths)
    if len(names) > max_rows and (  # what needs attention first, then the flow's order
        not _URGENT.keys().isdisjoint(states.values()) or not paths.keys() <= states.keys()
    ):
        names = _urgent_first(names, states)
    rows = []
    for name in names[:max_rows]:
        rec = made[name] if name in made else record(name)
        state = chip(rec.status.value) if rec is not None else '<span class="nbflow-muted">not in run</span>'
        took = rec.duration if rec is not None else None
        dur = f"{took:.3f}s" if took is not None else ""
        note = ""
        if rec is not None and rec.error is not None:
            note = esc(redact(f"{type(rec.error).__name__}: {rec.error}"[:300]))
        elif rec is not None and rec.skip_reason:
            note = esc(redact(rec.skip_reason))
        sel = ' style="outline:2px solid #1c7ed6"' if name == selected else ""
        rows.append(
            f'<tr class="nbflow-node" id="node-{name}"{sel}><td>{state}</td>{_row_head(name, paths[name])}'
            f"<td>{dur}</td><td>{note}</td></tr>"
        )
    more = ""
    if len(names) > max_rows:
        # (also in a saved notebook's snapshot, which has no selector: run.nodes is named too)
        more = (
            f'<div class="nbflow-muted">… {len(names) - max_rows:,} more nodes (each one: the selector, or '
            f"<code>run.nodes</code>)</div>"
        )
    return (
        '<table class="nbflow-table"><thead><tr><th>state</th><th>node</th><th>fed by</th><th>time</th>'
        f"<th>note</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"
    )


_HEADS: dict[int, tuple[GNode, str, str]] = {}  # id(node) -> (node, path, its row's name and "fed by" cells)


def _row_head(path: str, g: GNode) -> str:
    """A table row's name and "fed by" cells: the same for every redraw of a graph, so made once per node."""
    found = _HEADS.get(id(g))
    if found is not None and found[0] is g and found[1] == path:
        return found[2]
    feeds = ", ".join(d.source if d.is_node else f"‹{d.source}›" for d in g.deps)
    head = f"<td><b>{esc(path)}</b></td><td>{esc(feeds)}</td>"
    if len(_HEADS) >= 8192:
        _HEADS.clear()
    _HEADS[id(g)] = (g, path, head)
    return head


_URGENT = {NodeStatus.FAILED: 0, NodeStatus.RUNNING: 1, NodeStatus.CANCELLED: 2, NodeStatus.SKIPPED: 3}


def _urgent_first(names: list[str], states: Mapping[str, NodeStatus]) -> list[str]:
    """Failed, running, cancelled, skipped nodes first (in that order), then the others, then the nodes not
    in the run; each group in the flow's order. One pass, then a sort of the (few) urgent ones only."""
    urgent: list[tuple[int, int, str]] = []
    others: list[str] = []
    absent: list[str] = []
    for i, name in enumerate(names):
        state = states.get(name)
        if state is None:
            absent.append(name)
            continue
        rank = _URGENT.get(state)
        if rank is None:
            others.append(name)
        else:
            urgent.append((rank, i, name))
    urgent.sort()
    return [name for _, _, name in urgent] + others + absent


def subflow_paths(graph: Graph) -> list[str]:
    """The paths of every sub-flow node (``"sub"``, ``"sub.inner"``), outer ones first (cached per graph)."""
    found = graph._views.get("subflow_paths")
    if found is None:
        found = graph._views["subflow_paths"] = [
            path for path, g in node_paths(graph) if getattr(g.spec, "flow", None) is not None
        ]
    return list(cast("list[str]", found))


def visible_nodes(graph: Graph, collapsed: frozenset[str], prefix: str = "") -> int:
    """How many nodes the picture shows when the sub-flows in ``collapsed`` are drawn as one node each."""
    count = 0
    for name, g in graph.nodes.items():
        count += 1
        child = getattr(g.spec, "flow", None)
        if child is not None and prefix + name not in collapsed:
            count += visible_nodes(child.graph, collapsed, f"{prefix}{name}.")
    return count


def initial_collapse(graph: Graph, max_nodes: int) -> frozenset[str] | None:
    """Which sub-flows to fold at first so that the picture stays readable, or None for the table.

    Everything open when the whole graph fits in ``max_nodes``; else every sub-flow folded (the user opens
    the ones they want); None when even that is too big, or ``dot`` is missing.
    """
    every = frozenset(subflow_paths(graph))
    if not every and len(graph.nodes) > max_nodes:  # the table, whether `dot` is there or not (no PATH search)
        return None
    if not has_dot():
        return None
    if not every:  # no sub-flows: the node count decides
        return frozenset()
    if visible_nodes(graph, frozenset()) <= max_nodes:
        return frozenset()
    return every if visible_nodes(graph, every) <= max_nodes else None


def can_draw(graph: Graph, max_nodes: int) -> bool:
    """Whether the SVG is used: ``dot`` is installed and the graph, its sub-flows folded if need be, is small
    enough to read."""
    return initial_collapse(graph, max_nodes) is not None
