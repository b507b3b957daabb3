"""Calling a plain node function: awaited, in a worker thread, or inline; its output checked."""

from __future__ import annotations

from types import CoroutineType
from typing import Any

import anyio.to_thread

from nbflow._engine.ask import in_thread
from nbflow._graph.graph import GNode

__all__ = ["call_function"]


async def call_function(g: GNode, kwargs: dict[str, Any]) -> Any:
    """One call of ``g``'s function with ``kwargs``, validated against its return hint.

    (``call_node`` inlines these same steps on the engine's fast path.)
    """
    spec = g.spec
    if spec.is_async:
        out = await spec.func(**kwargs)
    elif spec.thread:
        out = await anyio.to_thread.run_sync(in_thread(spec.func, kwargs), abandon_on_cancel=True)
        if type(out) is CoroutineType:
            out = await out
    else:
        out = spec.func(**kwargs)
        if type(out) is CoroutineType:  # a sync function handing back a coroutine (e.g. a lambda): await it
            out = await out
    if g.check_return is not None:
        out = g.check_return(out)
    return out
