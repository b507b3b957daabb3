"""The question a paused node asked."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import field, fields
from typing import Any

from nbflow._core.missing import MISSING
from nbflow._core.records import record


@record(frozen=True)
class Question:
    """A question a paused node asked. ``key`` identifies it within its run (``node#n``)."""

    key: str
    node: str
    prompt: str
    data: Any = None
    options: tuple[str, ...] | None = None
    schema: Any = None
    asked_at: float = field(default_factory=time.time)
    """When it was first asked (wall clock, ``time.time()``; kept across resumes and in checkpoints)."""
    timeout: float | None = None
    """Seconds it may stay unanswered (``nf.ask(..., timeout=)``); None: forever."""
    default: Any = MISSING
    """What the node gets once it expired (``nf.ask(..., default=)``); MISSING: the node fails instead."""

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        # Checkpoints written before a field was added hold fewer values: those take their default.
        for i, f in enumerate(fields(self)):
            if i < len(state):
                value = state[i]
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                value = f.default
            object.__setattr__(self, f.name, value)

    @property
    def expires_at(self) -> float | None:
        """When it expires (wall clock), or None."""
        return None if self.timeout is None else self.asked_at + self.timeout

    def expired(self, now: float | None = None) -> bool:
        """True once its timeout has passed since it was asked."""
        due = self.expires_at
        return due is not None and (time.time() if now is None else now) >= due

    def __repr__(self) -> str:
        opts = f" options={list(self.options)}" if self.options else ""
        form = f" schema={getattr(self.schema, '__name__', self.schema)}" if self.schema is not None else ""
        due = f" timeout={self.timeout:g}s" if self.timeout is not None else ""
        return f"<Question {self.key!r}: {self.prompt!r}{opts}{form}{due}>"
