"""A node's own SystemExit or CancelledError, told apart from a real cancellation or exit.

Kept apart from ``node.py`` so the control-flow code (map items) uses the same rule.
"""

from __future__ import annotations

import asyncio

from nbflow._core.errors import RunnerError

__all__ = ["NodeEscaped", "escaped"]


class NodeEscaped(RunnerError):
    """A node raised SystemExit or its own CancelledError: recorded as the node's failure, so it cannot
    end the interpreter, a batch, or cancel the run it is part of."""


def escaped(exc: BaseException, node: str) -> NodeEscaped | None:
    """The failure to record when node ``node`` raised ``exc`` itself (None: a real cancellation/exit to propagate).

    ``sys.exit()`` inside a node is the node's failure. A CancelledError is the node's own when the task
    running it was not being cancelled (``task.cancelling() == 0``); a real cancel (Ctrl-C, a deadline,
    ``handle.cancel()``) still propagates.
    """
    if isinstance(exc, SystemExit):
        return NodeEscaped(
            f"node {node!r} called sys.exit({exc.code!r}) (SystemExit): a node cannot end the program; raise an "
            f"exception instead (the node is FAILED, the rest of the run goes on as for any failure)"
        )
    if isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return None
        if task is not None and task.cancelling() == 0:
            return NodeEscaped(
                f"node {node!r} raised CancelledError itself (nobody cancelled it): recorded as its failure; "
                f"raise another exception to fail a node"
            )
    return None
