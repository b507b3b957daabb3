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

from nbflow._core.events import Event, NodeFailed, RunFinished
from nbflow._record.batch_progress import BatchProgress
from nbflow._record.run import Run

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


TEXT_DELAY = 1.0


class TextProgress:
    """One line on ``stream`` (stderr), redrawn in place on a terminal, one line per ``every`` s otherwise."""

    def __init__(self, stream: TextIO | None = None, *, delay: float = 0.0, every: float = 5.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.every = every
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._shown = False
        self._last = -1e9
        self._width = 0

    def update(self, state: BatchProgress) -> None:
        if state.elapsed < self.delay:
            return
        if not self.tty:
            now = state.clock()
            if now - self._last < self.every:
                return
            self._last = now
        self._write(state.text())

    def close(self, state: BatchProgress) -> None:
        if self._shown or self.delay <= state.elapsed:
            self._write(state.text())
            if self.tty:
                self.stream.write("\n")
            self.stream.flush()

    def _write(self, line: str) -> None:
        self._shown = True
        if self.tty:
            pad = max(self._width - len(line), 0)
            self._width = len(line)
            self.stream.write("\r" + line + " " * pad)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
