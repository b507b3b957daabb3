"""``nf.usage(...)``: a node reports what a model call used (tokens, cost); batches sum it per row.

The engine marks which node a task (and the worker threads and sub-tasks it starts) is running
(``CURRENT_NODE``, a context variable set by the scheduler's worker); ``nf.usage`` adds to that
node's current attempt (``Attempt.usage``) and to the batch row being run (``ROW``, set by the
batch). A failed attempt's usage is kept apart: it cost money but bought no result.
"""

from __future__ import annotations

import contextvars
import math
import numbers
import time
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from nbflow._core.errors import NbflowError, RunnerError
from nbflow._core.events import NodeUsage
from nbflow._core.records import record

__all__ = [
    "CURRENT_NODE",
    "ROW",
    "USAGE_COLUMNS",
    "Usage",
    "UsageError",
    "add_usage",
    "check_cost",
    "row_usage",
    "usage",
]

# Columns a batch adds when its nodes reported usage. ``cost`` is NaN when a call reported no cost.
USAGE_COLUMNS = ("input_tokens", "output_tokens", "cost", "failed_tokens", "failed_cost")

CURRENT_NODE: contextvars.ContextVar[Any] = contextvars.ContextVar("nbflow_node", default=None)
"""Where a node runs: an object whose ``node`` is its NodeRecord and ``run`` its run (the engine's worker,
set once per task)."""
ROW: contextvars.ContextVar[list[tuple[Any, Any]] | None] = contextvars.ContextVar("nbflow_row_usage", default=None)


class UsageError(NbflowError, ValueError):
    """``nf.usage(...)`` got something it cannot count (negative, not a number, an unknown object)."""


@record()
class Usage:
    """What the calls of one attempt used. ``uncosted``: calls that reported no cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    calls: int = 0
    uncosted: int = 0
    models: dict[str, int] = field(default_factory=dict)

    def add(self, input_tokens: int, output_tokens: int, cost: float | None, model: str | None) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.calls += 1
        if cost is None:
            self.uncosted += 1
        else:
            self.cost += cost
        if model:
            self.models[model] = self.models.get(model, 0) + 1


def _field(obj: Any, *names: str) -> Any:
    for name in names:
        value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _count(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise UsageError(f"nf.usage({what}=...) is a number of tokens (an int >= 0), got {value!r}")
    return int(value)


def usage(
    report: Any = None,
    /,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cost: float | None = None,
    model: str | None = None,
) -> None:
    """Record what a model call inside this node used; ``flow.batch`` sums it per row.

    Give the numbers (``input_tokens=``, ``output_tokens=``, ``cost=`` in your currency,
    ``model=``), or an OpenAI-style response or its ``usage`` (``prompt_tokens`` /
    ``completion_tokens``, or ``input_tokens`` / ``output_tokens``; a dict works too); keywords
    override what the object says. Call it once per model call; a response the node's transcript
    already recorded (an ``nf.recorded`` client) is counted once: only its ``cost=`` is added. Raises UsageError for values it
    cannot count, RunnerError outside a running node.
    """
    where = CURRENT_NODE.get()  # an object whose ``node`` is the record being run (set by the engine)
    rec = None if where is None else where.node
    if rec is None or not rec.attempts:
        raise RunnerError(
            "nf.usage() records what a node's model call used, so it works inside a node of a running flow "
            "(call it in a function decorated with @flow.node)"
        )
    if report is not None:
        inner = _field(report, "usage")
        if model is None:
            found = _field(report, "model")
            model = found if isinstance(found, str) else None
        src = inner if inner is not None else report
        i = _field(src, "input_tokens", "prompt_tokens")
        o = _field(src, "output_tokens", "completion_tokens")
        if i is None and o is None:
            raise UsageError(
                f"nf.usage() got a {type(report).__name__} with no token counts; give an OpenAI-style response or "
                f"usage (prompt_tokens/completion_tokens or input_tokens/output_tokens), or input_tokens=..."
            )
        input_tokens = i if input_tokens is None else input_tokens
        output_tokens = o if output_tokens is None else output_tokens
    n_in, n_out = _count(input_tokens, "input_tokens"), _count(output_tokens, "output_tokens")
    check_cost(cost, "nf.usage")
    if model is not None and not isinstance(model, str):
        raise UsageError(f"nf.usage(model=...) is the model's name, a string; got {model!r}")
    attempt = rec.attempts[-1]
    if attempt.calls:  # the transcript already counted this call (an nf.recorded client): only its cost is new
        rid = _field(report, "id") if report is not None else None
        call = _recorded_call(attempt.calls, rid, n_in, n_out)
        if call is not None:
            call.reported = True
            if cost is not None and call.cost is None:
                call.cost = float(cost)
                if attempt.usage is not None and attempt.usage.uncosted:
                    attempt.usage.cost += float(cost)
                    attempt.usage.uncosted -= 1
            return
    add_usage(
        where,
        rec,
        attempt,
        ROW.get(),
        n_in if input_tokens is not None else None,
        n_out if output_tokens is not None else None,
        None if cost is None else float(cost),
        model,
    )


def _recorded_call(calls: list[Any], rid: Any, n_in: int, n_out: int) -> Any:
    """The recorded call ``nf.usage`` reports again: the one with the response's id, else (a usage object or
    numbers) the first not reported yet with the same token counts; None when it is another call."""
    for c in calls:
        if rid is not None and c.response_id == rid:
            return c
    if rid is None:
        for c in calls:
            if not c.reported and c.input_tokens == n_in and c.output_tokens == n_out:
                return c
    return None


def check_cost(cost: Any, who: str) -> None:
    """Raise UsageError unless ``cost`` is None or a finite number >= 0."""
    if cost is not None and (
        isinstance(cost, bool) or not isinstance(cost, numbers.Real) or cost < 0 or not math.isfinite(cost)
    ):
        raise UsageError(f"{who}(cost=...) is a finite number >= 0 (or None: unknown), got {cost!r}")


def add_usage(
    where: Any,
    rec: Any,
    attempt: Any,
    row: list[tuple[Any, Any]] | None,
    input_tokens: int | None,
    output_tokens: int | None,
    cost: float | None,
    model: str | None,
    *,
    event: bool = True,
) -> None:
    """Count one call's usage on ``attempt`` of ``rec`` (and the batch ``row``); tell tracing (``event``).

    The one place usage is counted: ``nf.usage`` and the transcripts (``nbflow._core.calls``) call it.
    Token counts of None were not reported (counted as 0).
    """
    if attempt.usage is None:
        attempt.usage = Usage()
        if row is not None:
            row.append((rec, attempt))
    attempt.usage.add(input_tokens or 0, output_tokens or 0, cost, model)
    run = where.run
    root = run._root if run is not None else None
    if event and root is not None and root._subscribers:  # tracing (nbflow.otel) puts GenAI usage on the node's span
        root._emit(
            NodeUsage(
                run_id=root.run_id,
                time=time.time(),
                node=run._path + rec.name,
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost=cost,
                attempt=len(rec.attempts),
            )
        )


def row_usage(entries: list[tuple[Any, Any]]) -> dict[str, Any]:
    """The usage columns of one batch row: attempts that gave the result, and failed ones apart."""
    ok = Usage()
    bad = Usage()
    for rec, attempt in entries:
        last = rec.attempts and rec.attempts[-1] is attempt
        failed = attempt.error is not None or (last and rec.status.name != "SUCCEEDED")
        u: Usage = attempt.usage
        into = bad if failed else ok
        into.input_tokens += u.input_tokens
        into.output_tokens += u.output_tokens
        into.cost += u.cost
        into.calls += u.calls
        into.uncosted += u.uncosted
    return {
        "input_tokens": ok.input_tokens,
        "output_tokens": ok.output_tokens,
        "cost": math.nan if ok.uncosted else ok.cost,
        "failed_tokens": bad.input_tokens + bad.output_tokens,
        "failed_cost": math.nan if bad.uncosted else bad.cost,
    }
