"""The engine's lean path: a plain node run by the scheduler's worker with no coroutine and no record of its own.

``call_node`` is an ``async def`` that fills in a ``NodeRecord``: every node paid for a coroutine
object and a frame, a record object and an ``Attempt`` on top of the node's own coroutine. On the
lean path the worker (``scheduler.py``'s ``plain_loop``, written out there: a call per node is a
measurable share of a trivial node's cost) awaits the node itself and writes what happened straight
into the run's ``NodeColumns``; a record and the attempt are made only if somebody reads them. A
node that does not wait runs to its end inside the worker, with no loop turn; one that does wait
suspends the worker, whose other ready nodes then get workers of their own (``Scheduler.arm``).

Taken by plain nodes only (no control flow, no ``@flow.resource`` parameter, not ``executor="process"``),
PENDING and never tried, and only where the flow has no per-node policies. What is recorded and
emitted is exactly what ``call_node`` records and emits (``tests/engine/test_lean_path.py`` compares
them field by field): a failure goes through the record and ``node_failed``, shared with it; these
are the parts of the path that are not worth writing out.
"""

from __future__ import annotations

from nbflow._core.events import NodeStarted, NodeSucceeded
from nbflow._engine.node import node_failed
from nbflow._record.run import NodeColumns, Run

__all__ = ["lean_failed", "lean_started", "lean_succeeded"]


def lean_started(run: Run, name: str, started: float) -> None:
    """Node ``name`` of the lean path started while somebody listens: the event, or a coalesced notice."""
    if run._subscribers:
        run._emit(NodeStarted(run_id=run.run_id, time=started, node=name, attempt=1))
    elif run._armed:  # only the run view watches: a coalesced notice, no event
        run._notice()


def lean_succeeded(run: Run, name: str, done: float, duration: float) -> None:
    """Node ``name`` of the lean path succeeded while somebody listens: the event, or a coalesced notice."""
    if run._subscribers:
        run._emit(NodeSucceeded(run_id=run.run_id, time=done, node=name, duration=duration))
    elif run._armed:
        run._notice()


def lean_failed(c: NodeColumns, i: int, run: Run, started: float, t0: float, exc: BaseException) -> bool:
    """Node ``i`` of the lean path raised ``exc``: ``node_failed`` on its record (made now)."""
    rec = c.rec(i)
    return node_failed(rec, run, rec.attempts[-1], started, t0, exc)
