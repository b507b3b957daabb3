"""Control-flow declarations: routing, merging, optional inputs, map, loop. Specs only.

These objects are what ``@flow.router``, ``@flow.map``, ``@flow.loop``, ``nf.first_of`` and
``nf.optional`` record; the engine (``nbflow/_engine/control_flow.py``) gives them meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from nbflow._core.errors import FlowDefinitionError
from nbflow._core.records import record

__all__ = ["FirstOf", "ItemFailed", "Loop", "Map", "OptionalSource", "Router", "first_of", "optional"]

ItemErrors = Literal["terminate", "continue", "drop"]


@record(frozen=True)
class FirstOf:
    """Feed a parameter from the first of ``sources`` that produced an output (a merge)."""

    sources: tuple[str, ...]


@record(frozen=True)
class OptionalSource:
    """Feed a parameter from ``source`` if it produced an output, else ``nf.MISSING``."""

    source: str


def first_of(*sources: str) -> FirstOf:
    """A merge: ``inputs={"answer": nf.first_of("billing", "tech")}``.

    The node runs when at least one of the sources produced an output and receives the first one
    (in the order given); it is SKIPPED only when none did.
    """
    if len(sources) < 2 or not all(isinstance(s, str) for s in sources):
        raise FlowDefinitionError(
            f"first_of() takes two or more node names, got {sources!r}; for a single source just name it"
        )
    return FirstOf(tuple(sources))


def optional(source: str) -> OptionalSource:
    """An optional upstream: ``inputs={"notes": nf.optional("enrich")}``.

    The node runs even when ``source`` was skipped or failed, and then receives ``nf.MISSING``.
    """
    if not isinstance(source, str):
        raise FlowDefinitionError(f"optional() takes a node name, got {source!r}")
    return OptionalSource(source)


@record(frozen=True)
class Router:
    """A node whose output names the branch (or branches) to take.

    ``branches`` lists the valid names; when None they are the names used by ``branch=`` on the
    nodes that follow the router.
    """

    branches: tuple[str, ...] | None = None


@record(frozen=True)
class Map:
    """Run the node once per item of parameter ``over`` (a list), items concurrently.

    ``errors``: ``"terminate"`` (the first failed item fails the node), ``"continue"`` (its slot holds
    an ``nf.ItemFailed``), ``"drop"`` (failed items are removed from the output).
    """

    over: str
    concurrency: int | None = None
    errors: ItemErrors = "terminate"

    def __post_init__(self) -> None:
        if self.errors not in ("terminate", "continue", "drop"):
            raise FlowDefinitionError(f"map errors={self.errors!r} is not one of 'terminate', 'continue', 'drop'")
        if self.concurrency is not None and (not isinstance(self.concurrency, int) or self.concurrency < 1):
            raise FlowDefinitionError(f"map concurrency must be a positive int or None, got {self.concurrency!r}")


@record(frozen=True)
class Loop:
    """Run the node repeatedly, feeding each output back into parameter ``feed``.

    Stops when ``until(output)`` is true or after ``max_iterations``; reaching the cap returns the
    last output (``on_max="return"``) or fails the node with ``LoopLimitError`` (``on_max="fail"``).
    """

    feed: str
    until: Callable[[Any], bool] | None = None
    max_iterations: int = 10
    on_max: Literal["return", "fail"] = "return"

    def __post_init__(self) -> None:
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise FlowDefinitionError(f"loop max_iterations must be a positive int, got {self.max_iterations!r}")
        if self.on_max not in ("return", "fail"):
            raise FlowDefinitionError(f"loop on_max={self.on_max!r} is not 'return' or 'fail'")
        if self.until is not None and not callable(self.until):
            raise FlowDefinitionError(f"loop until= must be a function of the output, got {self.until!r}")


@record(frozen=True)
class ItemFailed:
    """Stands in a map's output for an item that failed (``errors="continue"``). Falsy."""

    index: int
    error_type: str
    message: str
    error: BaseException | None = None

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"ItemFailed(index={self.index}, {self.error_type}: {self.message})"
