"""Pausing a run for a person: the question a node asks, and how the engine learns of it.

A node that calls ``nf.ask()`` with no answer yet raises ``PauseSignal`` (a BaseException, so user
code's ``except Exception`` cannot swallow it). The node is PAUSED, the rest of the run goes on until
nothing else can progress, then the run is PAUSED. Resuming re-runs the paused node; its ``ask()``
then returns the stored answer (the node's code before ``ask()`` runs again: keep it idempotent).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..run import Run

__all__ = ["ACTIVE", "AskContext", "PauseSignal", "Question", "WorkerContext", "current", "in_thread"]


@dataclass(frozen=True, slots=True)
class Question:
    """A question a paused node asked. ``key`` identifies it within its run (``node#n``)."""

    key: str
    node: str
    prompt: str
    data: Any = None
    options: tuple[str, ...] | None = None
    schema: Any = None
    asked_at: float = field(default_factory=time.time)

    def __repr__(self) -> str:
        opts = f" options={list(self.options)}" if self.options else ""
        form = f" schema={getattr(self.schema, '__name__', self.schema)}" if self.schema is not None else ""
        return f"<Question {self.key!r}: {self.prompt!r}{opts}{form}>"


class PauseSignal(BaseException):
    """Raised by ``nf.ask()`` to pause its node. Never seen by users: the engine catches it."""

    def __init__(self, question: Question) -> None:
        self.question = question
        super().__init__(question.key)


@dataclass(slots=True)
class AskContext:
    """Where ``nf.ask()`` is being called from: the top-level run, the node's path, its record."""

    root: Run
    path: str
    record: Any

    def next_key(self) -> str:
        # Keys count the asks of one execution of the node: a resumed node asks again from #0.
        slot = (self.path, len(self.record.attempts))
        n = self.root._ask_counts.get(slot, 0)
        self.root._ask_counts[slot] = n + 1
        return f"{self.path}#{n}"


class WorkerContext:
    """What a scheduler worker task is running now (one attribute write per node, no context var)."""

    __slots__ = ("node", "run", "task")

    def __init__(self, run: Run) -> None:
        self.run = run
        self.node: Any = None  # the NodeRecord being run
        self.task: Any = None

    def ask_context(self) -> AskContext:
        return AskContext(self.run._root, self.run._path + self.node.name, self.node)


# The task running a node -> where it is; read only by nf.ask(), so the hot path pays one dict
# write per worker task, not per node.
ACTIVE: dict[Any, WorkerContext | AskContext] = {}


# Set only inside a node's worker thread, where no task is running (nf.usage() in a sync node).
_IN_THREAD: ContextVar[AskContext | None] = ContextVar("nbflow_node_in_thread", default=None)


def current() -> AskContext | None:
    import asyncio

    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop in this thread: a sync node in a worker thread, or not in a node
        return _IN_THREAD.get()
    found = ACTIVE.get(task)
    if found is None:
        return None
    return found if isinstance(found, AskContext) else found.ask_context()


def in_thread(func: Callable[..., Any], kwargs: dict[str, Any]) -> Callable[[], Any]:
    """``func(**kwargs)``, to be called in a worker thread, knowing which node it runs for (for nf.usage)."""
    ctx = current()

    def call() -> Any:
        token = _IN_THREAD.set(ctx)
        try:
            return func(**kwargs)
        finally:
            _IN_THREAD.reset(token)

    return call
