"""The batch frame's column vocabulary and how a value goes into a cell: the bottom of ``nbflow._batch``.

Every module of the package may import this one; it imports none of them (``make lint`` holds the
package's modules to one direction: import-linter's ``acyclic_siblings`` contract).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FINISHED", "QUESTION_COLUMNS", "as_dict", "clip", "json_safe"]

# Row states that are final. "pending": never started; "cancelled": stopped while running; "paused": a
# node asked a question (nf.ask); the row's run is kept and resumed by flow.answer(frame, ...).
FINISHED = ("succeeded", "failed", "paused")
# Columns of a paused row's question, present when some row paused.
QUESTION_COLUMNS = ("question_prompt", "question_options")


def json_safe(value: Any) -> Any:
    """``value`` as it is if JSON holds it, else a copy whose other values are their repr (a grid of objects)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=repr))
    return value


def as_dict(value: Any) -> dict[str, Any] | None:
    """``value`` as a dict if it is one, a pydantic model or a dataclass (a row's output spread into columns)."""
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump) and hasattr(type(value), "model_fields"):
        out: dict[str, Any] = dump()
        return out
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


def clip(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut to ``limit`` characters (an error message in a warning or a status line)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
