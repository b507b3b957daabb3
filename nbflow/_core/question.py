"""The question a paused node asked."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


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
