"""Coalescing redraws: at most one per interval, plus a trailing one so the last change is never lost."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Throttle", "call_later"]

Later = Callable[[float, Callable[[], None]], Any]


def call_later(delay: float, callback: Callable[[], None]) -> Any:
    """Run ``callback`` after ``delay`` s: on this thread's running loop if any, else on a timer thread.

    Run events arrive on the loop that executes the run (the kernel's, or a worker thread's for a
    blocking ``flow.run``), so the trailing redraw happens on the same thread as the events.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        timer = threading.Timer(delay, callback)
        timer.daemon = True
        timer.start()
        return timer
    return loop.call_later(delay, callback)


class Throttle:
    """Call ``draw`` at most once per ``interval`` seconds however often ``poke`` is called.

    A poke inside the interval schedules one trailing draw (through ``later``) at the interval's end,
    so the final state is always drawn. ``clock`` and ``later`` are seams for tests.
    """

    def __init__(
        self,
        draw: Callable[[], None],
        interval: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        later: Later = call_later,
    ) -> None:
        self._draw = draw
        self.interval = interval
        self._clock = clock
        self._later = later
        self._last = clock()
        self._dirty = False
        self._pending: Any = None
        self.draws = 0

    def poke(self) -> None:
        """Something changed: draw now if the interval has passed, else make sure a trailing draw is due."""
        self._dirty = True
        if self._pending is not None:
            return
        now = self._clock()
        wait = self.interval - (now - self._last)
        if wait <= 0:
            self.flush()
        else:
            handle = self._later(wait, self._trailing)
            self._pending = handle if handle is not None else True  # a `later` may return no handle

    def flush(self) -> None:
        """Draw now (e.g. when the run finished), whatever the interval says."""
        self._dirty = False
        self._last = self._clock()
        self.draws += 1
        self._draw()

    def cancel(self) -> None:
        """Drop a scheduled trailing draw."""
        pending, self._pending = self._pending, None
        if hasattr(pending, "cancel"):
            pending.cancel()

    def _trailing(self) -> None:
        self._pending = None
        if self._dirty:
            self.flush()
