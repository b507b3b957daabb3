"""``nf.usage(...)``: a node reports what its model call used; subscribers (tracing) receive a ``NodeUsage`` event.

This module only reports: it emits one ``NodeUsage`` event on the top-level run per call, so
``nbflow.otel`` can put OpenTelemetry's GenAI usage attributes on the node's span. Summing usage
into batch columns is left to the batch (see docs/tracing.md).
"""

from __future__ import annotations

import numbers
import time
from typing import Any

from nbflow._core.errors import RunnerError
from nbflow._core.events import NodeUsage
from nbflow._engine.ask import current

__all__ = ["usage"]

# Where an OpenAI-style usage object keeps its counts: chat completions, then the Responses API
# and Anthropic's messages.
_INPUT_FIELDS = ("prompt_tokens", "input_tokens")
_OUTPUT_FIELDS = ("completion_tokens", "output_tokens")


def usage(
    reported: Any = None,
    /,
    *,
    model: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cost: float | None = None,
) -> None:
    """Report what a model call inside this node used (call it once per model call).

    ``reported`` may be an OpenAI-style response (its ``.usage`` and ``.model`` are read) or usage
    object or dict (``prompt_tokens``/``completion_tokens`` or ``input_tokens``/``output_tokens``);
    keyword arguments win over what it holds. Works in async nodes, sync nodes and map items.
    With tracing on, the node's span gets ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``
    and ``gen_ai.usage.output_tokens`` (docs/tracing.md). Outside a running node: RunnerError.
    """
    ctx = current()
    if ctx is None:
        raise RunnerError(
            "nf.usage() reports the usage of the node that calls it, so it only works inside a node of a "
            "running flow (call it in a function decorated with @flow.node)"
        )
    found_model, found_in, found_out = _read(reported)
    model = model if model is not None else found_model
    input_tokens = _count("input_tokens", input_tokens if input_tokens is not None else found_in)
    output_tokens = _count("output_tokens", output_tokens if output_tokens is not None else found_out)
    if model is not None and not isinstance(model, str):
        raise TypeError(f"nf.usage(): model must be a string (the model's name), got {model!r}")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, numbers.Real) or cost < 0):
        raise TypeError(f"nf.usage(): cost must be a non-negative number, got {cost!r}")
    root = ctx.root
    if root._subscribers:
        attempts = getattr(ctx.record, "attempts", None)
        root._emit(
            NodeUsage(
                run_id=root.run_id,
                time=time.time(),
                node=ctx.path,
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost=None if cost is None else float(cost),
                attempt=len(attempts) if attempts else None,
            )
        )


def _read(reported: Any) -> tuple[str | None, Any, Any]:
    if reported is None:
        return None, None, None
    model = _get(reported, "model")
    inner = _get(reported, "usage")
    source = inner if inner is not None else reported
    counts = [
        next((v for f in fields if (v := _get(source, f)) is not None), None)
        for fields in (_INPUT_FIELDS, _OUTPUT_FIELDS)
    ]
    if inner is None and counts == [None, None]:
        raise TypeError(
            f"nf.usage(): cannot read token counts from {type(reported).__name__}; pass a response with .usage, a "
            f"usage object or dict (prompt_tokens/completion_tokens or input_tokens/output_tokens), or the keywords"
        )
    return (model if isinstance(model, str) else None), counts[0], counts[1]


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _count(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise TypeError(f"nf.usage(): {name} must be a non-negative int, got {value!r}")
    return int(value)
