"""A compact text progress for runs outside a notebook (opt-in: ``flow.run(..., show=True)``).

Rule: scripts and tests print nothing unless asked. With ``show=True`` outside a kernel, a run
writes to stderr: a failure line as soon as a node fails, a progress line at most every
``interval`` seconds while it runs, and one summary line at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from .engine.events import Event, NodeFailed, RunFinished
from .run import Run

__all__ = ["RunTextProgress"]


class RunTextProgress:
    """Subscribe with ``run.subscribe(RunTextProgress(run))``; see the module docstring for what it prints."""

    def __init__(
        self,
        run: Run,
        stream: TextIO | None = None,
        interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run = run
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self._clock = clock
        self._last = clock()

    def _line(self) -> str:
        run = self.run
        done = sum(1 for r in run.nodes.values() if r.status.finished)
        counts = ", ".join(f"{v} {k}" for k, v in run.counts().items() if k != "pending")
        dur = run.duration or 0.0
        return f"[nbflow] {run.flow} {run.run_id}: {done}/{len(run.nodes)} done ({counts or 'starting'}) {dur:.1f}s"

    def __call__(self, event: Event) -> None:
        if isinstance(event, NodeFailed):
            first = (str(event.error).splitlines() or [""])[0][:200]
            print(
                f"[nbflow] {self.run.flow}: node {event.node!r} failed: {event.error_type}: {first}", file=self.stream
            )
        elif isinstance(event, RunFinished):
            run = self.run
            counts = ", ".join(f"{v} {k}" for k, v in run.counts().items())
            print(
                f"[nbflow] {run.flow} {run.run_id}: {event.status.name} in {event.duration:.2f}s ({counts})",
                file=self.stream,
            )
            return
        now = self._clock()
        if now - self._last >= self.interval:
            self._last = now
            print(self._line(), file=self.stream)
