"""Calling a plain node function: awaited, in a worker thread or process, or inline; its output checked."""

from __future__ import annotations

from types import CoroutineType
from typing import Any

from nbflow._engine.executors import call_in_process
from nbflow._engine.sync_call import call_sync
from nbflow._graph.graph import GNode

__all__ = ["call_function"]


async def call_function(g: GNode, kwargs: dict[str, Any]) -> Any:
    """One call of ``g``'s function with ``kwargs``, validated against its return hint.

    (``call_node`` inlines these same steps on the engine's fast path.)
    """
    spec = g.spec
    if spec.is_async:
        out = await spec.func(**kwargs)
    elif spec.options.get("executor") == "process":  # a worker process an interrupt kills: executors.py
        out = await call_in_process(g, kwargs)
        if type(out) is CoroutineType:
            out = await out
    else:  # sync: inline or in a worker thread, as thread= or what was learned says (sync_call.py)
        out = await call_sync(g, kwargs)
        if type(out) is CoroutineType:  # a sync function handing back a coroutine (e.g. a lambda): await it
            out = await out
    if g.check_return is not None:
        out = g.check_return(out)
    return out
