"""Typed, frozen lifecycle events. Subscribers (widgets, progress, logs, tests) read these.

Fields may be added to events in later versions, never removed or renamed.
"""

from __future__ import annotations

from typing import Any

from nbflow._core.question import Question
from nbflow._core.records import record
from nbflow._core.states import RunStatus

__all__ = [
    "Event",
    "NodeCall",
    "NodeCancelled",
    "NodeEvent",
    "NodeFailed",
    "NodePaused",
    "NodeRetrying",
    "NodeSkipped",
    "NodeStarted",
    "NodeSucceeded",
    "NodeUsage",
    "RunFinished",
    "RunPaused",
    "RunStarted",
]


@record(frozen=True, kw_only=True)
class Event:
    """Something happened in run ``run_id`` at wall-clock ``time`` (seconds since the epoch)."""

    run_id: str
    time: float


@record(frozen=True, kw_only=True)
class RunStarted(Event):
    flow: str
    nodes: tuple[str, ...]


@record(frozen=True, kw_only=True)
class RunFinished(Event):
    status: RunStatus
    duration: float
    reason: str | None = None  # why a run was CANCELLED by nbflow itself (e.g. its deadline)


@record(frozen=True, kw_only=True)
class NodeEvent(Event):
    node: str


@record(frozen=True, kw_only=True)
class NodeStarted(NodeEvent):
    """An attempt started: one event per attempt (``attempt`` counts from 1)."""

    attempt: int = 1


@record(frozen=True, kw_only=True)
class NodeSucceeded(NodeEvent):
    duration: float
    overridden: bool = False
    recovered: bool = False  # the node failed and on_error=nf.Default(...) supplied its output
    cached: bool = False  # the output came from the node cache: the node did not run


@record(frozen=True, kw_only=True)
class NodeFailed(NodeEvent):
    error: BaseException
    duration: float

    @property
    def error_type(self) -> str:
        return type(self.error).__name__


@record(frozen=True, kw_only=True)
class NodeRetrying(NodeEvent):
    """Attempt ``attempt`` failed with ``error``; the next one starts after ``delay`` seconds."""

    attempt: int
    error: BaseException
    delay: float

    @property
    def error_type(self) -> str:
        return type(self.error).__name__


@record(frozen=True, kw_only=True)
class NodeSkipped(NodeEvent):
    reason: str


@record(frozen=True, kw_only=True)
class NodeCancelled(NodeEvent):
    reason: str


@record(frozen=True, kw_only=True)
class NodePaused(NodeEvent):
    """The node asked a question (``nf.ask``) and waits for an answer."""

    question: Question


@record(frozen=True, kw_only=True)
class RunPaused(Event):
    """Nothing else can progress until someone answers (or the run was paused from outside)."""

    questions: tuple[Question, ...]
    version: int


@record(frozen=True, kw_only=True)
class NodeUsage(NodeEvent):
    """The node reported model usage with ``nf.usage(...)`` (one event per call; a node may report several).

    Emitted on the top-level run; ``node`` is the node's path (``"sub.node"`` in a sub-flow,
    ``"node[3]"`` for item 3 of a map). ``attempt`` is the node's attempt then (None for map items
    and loop iterations). Counts the caller did not give are None.
    """

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    attempt: int | None = None


@record(frozen=True, kw_only=True)
class NodeCall(NodeEvent):
    """The node made a model call, now recorded in its transcript (``run.calls(node)``).

    Emitted on the top-level run when something subscribes (tracing); ``call`` is the recorded
    ``nbflow._core.calls.Call`` (secrets' texts already redacted), ``time`` when it ended.
    """

    call: Any
    attempt: int | None = None
