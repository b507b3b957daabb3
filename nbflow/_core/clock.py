"""The clock seam: every delay nbflow itself waits (retry backoff, rate-limit waits) goes through one.

``Flow(clock=...)`` sets the clock of retry delays; ``Limit(clock=...)`` the clock of a rate limit.
The default is ``SYSTEM_CLOCK`` (``time.monotonic`` and ``asyncio.sleep``). Tests pass a
``FakeClock``, whose ``sleep`` advances virtual time at once and records the delay, so a test of
"wait 1, 2, 4 seconds" takes no time and asserts the delays exactly.

Timeouts (``timeout=`` on a node or a run) are not clock delays: they use the event loop's own
timer, because they must interrupt real work.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "FakeClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What nbflow needs from a clock: a monotonic reading in seconds and an async sleep."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time: ``time.monotonic()`` and ``asyncio.sleep()``. Stateless, safe from any thread or loop."""

    __slots__ = ()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        import asyncio  # here: defining a flow (its default clock) must not import the event loop

        await asyncio.sleep(seconds)

    def __repr__(self) -> str:
        return "nbflow.SYSTEM_CLOCK"


SYSTEM_CLOCK = SystemClock()


class FakeClock:
    """Virtual time for tests: ``sleep(d)`` moves the clock forward by ``d`` at once and records ``d``.

    ``now`` is the current virtual time (starts at ``start``); ``sleeps`` lists every delay slept,
    in order. Each sleep still yields to the event loop once, so other tasks take turns. Concurrent
    sleepers each move the clock by their own delay: virtual time never goes backwards and nobody
    wakes before their delay has passed on it, which is what retry and rate-limit logic rely on.
    Safe to share between threads.
    """

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (without sleeping)."""
        if seconds < 0:
            raise ValueError(f"FakeClock.advance needs seconds >= 0, got {seconds!r}")
        with self._lock:
            self.now += seconds

    async def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += max(0.0, seconds)
        import asyncio

        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"<FakeClock now={self.now:g} sleeps={len(self.sleeps)}>"
