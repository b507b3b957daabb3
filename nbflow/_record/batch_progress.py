"""Batch progress: a small state object the batch updates, and front ends that render it.

The batch only bumps integers on the state (no I/O on the hot path). A refresher task reads the
state every ``REFRESH`` seconds (at most 4 times a second) and hands it to the renderer:

* in a terminal, ``TextProgress`` redraws one line on stderr;
* in a Jupyter kernel, ``nbflow.widgets.batch_progress.BatchProgressWidget`` (ipywidgets is
  imported only there, only in a kernel).

``progress=None`` (the default) picks: the widget in a kernel; the text line when stderr is a
terminal, shown only once the batch has run for ``TEXT_DELAY`` seconds (short batches print
nothing); nothing otherwise (logs and CI stay clean). ``progress=True`` forces a display,
``progress=False`` turns it off, and any object with ``update(state)`` / ``close(state)`` is used
as the renderer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import field
from typing import Protocol

from nbflow._core.records import record

__all__ = ["REFRESH", "BatchProgress", "ProgressRenderer", "seconds_text"]

REFRESH = 0.25


@record()
class BatchProgress:
    """Where a batch stands. Read it from a renderer; only the batch writes it.

    ``total`` rows in the batch; ``resumed`` of them were taken from the store; ``succeeded`` and
    ``failed`` finished in this call (``paused``: rows waiting for an answer, see ``flow.answer``); ``in_flight`` are running; ``stopped`` says why the batch
    stopped early (None while it runs normally).
    """

    flow: str
    total: int
    resumed: int = 0
    succeeded: int = 0
    failed: int = 0
    paused: int = 0
    in_flight: int = 0
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    stopped: str | None = None
    clock: Callable[[], float] = time.monotonic
    paused_until: float | None = None
    """While the circuit breaker cools down: when new rows may start again (on ``pause_clock``)."""
    pause_clock: Callable[[], float] = time.monotonic
    cooldowns: int = 0
    max_cooldowns: int = 0

    @property
    def done(self) -> int:
        """Rows finished (succeeded or failed), including those resumed from the store."""
        return self.resumed + self.succeeded + self.failed + self.paused

    @property
    def elapsed(self) -> float:
        end = self.finished_at if self.finished_at is not None else self.clock()
        return max(end - self.started_at, 0.0)

    @property
    def rate(self) -> float | None:
        """Rows finished per second in this call (None before the first one)."""
        n = self.succeeded + self.failed + self.paused
        elapsed = self.elapsed
        return n / elapsed if n and elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate (None until it is known)."""
        rate = self.rate
        if rate is None:
            return None
        return (self.total - self.done) / rate

    def text(self) -> str:
        """One line: ``flow: 120/2000 done (3 failed), 16 in flight, 45.2 rows/s, ETA 41s``."""
        parts = [f"{self.flow}: {self.done}/{self.total} done"]
        if self.failed or self.paused:
            bits = [f"{n} {what}" for n, what in ((self.failed, "failed"), (self.paused, "paused")) if n]
            parts[0] += f" ({', '.join(bits)})"
        if self.resumed:
            parts.append(f"{self.resumed} from store")
        if self.finished_at is None:
            parts.append(f"{self.in_flight} in flight")
            if self.paused_until is not None:
                left = max(self.paused_until - self.pause_clock(), 0.0)
                parts.append(
                    f"paused: cool-down {self.cooldowns}/{self.max_cooldowns} after failures in a row, "
                    f"{seconds_text(left)} left"
                )
        rate = self.rate
        if rate is not None:
            parts.append(f"{rate:.1f} rows/s")
        if self.finished_at is None:
            eta = self.eta
            if eta is not None:
                parts.append(f"ETA {seconds_text(eta)}")
        else:
            parts.append(f"in {seconds_text(self.elapsed)}")
        if self.stopped:
            parts.append(f"stopped: {self.stopped}")
        return ", ".join(parts)


class ProgressRenderer(Protocol):
    def update(self, state: BatchProgress) -> None: ...
    def close(self, state: BatchProgress) -> None: ...


def seconds_text(s: float) -> str:
    if s < 60:
        return f"{s:.0f}s" if s >= 10 else f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"
