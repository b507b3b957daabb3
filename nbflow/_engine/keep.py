"""``flow.run(..., keep=[...])``: drop the intermediates a run does not need to keep, as soon as it can.

A node's output is dropped once every node of the run that reads it has finished, unless the node
is in ``keep``; a finished node's recorded inputs are dropped too (they hold upstream outputs). So a
long pipeline holds only the outputs still needed downstream, plus the kept ones: its peak memory
is its widest frontier, not the sum of every intermediate. A dropped output reads back as a clear
``NodeOutputError`` (``run["clean"]``: "dropped: not in keep=").
"""

from __future__ import annotations

from collections.abc import Iterable

from nbflow._core.errors import UnknownNodeError
from nbflow._core.events import Event, NodeEvent
from nbflow._core.states import NodeStatus
from nbflow._engine.caching import data_version
from nbflow._graph.graph import Graph
from nbflow._record.run import DROPPED, Run

__all__ = ["attach_keep", "check_keep"]


def check_keep(graph: Graph, keep: Iterable[str] | str) -> frozenset[str]:
    names = frozenset([keep] if isinstance(keep, str) else keep)
    for n in names:
        if n not in graph.nodes:
            raise UnknownNodeError(n, graph.nodes, role="keep=")
    return names


def attach_keep(run: Run, graph: Graph, keep: frozenset[str], versions: bool = False) -> None:
    """Subscribe ``run`` to the dropping of what is not kept. ``versions``: an output's data version is taken
    before it goes (the cache's ``_cache_id``), so the run's lineage still names it (a stored batch row)."""
    records = run.nodes
    run.kept = keep

    def drop_output(name: str) -> None:
        rec = records.get(name)
        if rec is None or name in keep or not rec.status.finished:
            return
        readers = [d for d in graph.nodes[name].downstream if d in records]
        done = all(records[d].status.finished for d in readers)
        if done and rec.output is not DROPPED and rec.status is NodeStatus.SUCCEEDED:
            if versions and rec._cache_id is None:
                rec._cache_id = data_version(rec.output)
            rec.output = DROPPED

    def on_event(event: Event) -> None:
        if not isinstance(event, NodeEvent) or event.node not in records:
            return
        rec = records[event.node]
        if not rec.status.finished:
            return
        if event.node not in keep:
            rec.inputs = {}
        drop_output(event.node)
        for up in graph.nodes[event.node].upstream:
            drop_output(up)

    run.subscribe(on_event)
