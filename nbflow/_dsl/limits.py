"""Named limits shared by nodes, runs and batch rows: calls in flight and a call rate.

A ``Limit`` object *is* the shared state: every run of every flow holding the same object shares
it. It is safe across event loops and threads (``flow.run`` in a notebook runs on a worker
thread's loop; batch rows may run on several): the state sits behind a ``threading.Lock`` and a
waiter on another loop is woken with ``call_soon_threadsafe``. Nothing in it is bound to a loop.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import TYPE_CHECKING

from nbflow._core.clock import SYSTEM_CLOCK, Clock
from nbflow._core.errors import FlowDefinitionError
from nbflow._core.records import record

if TYPE_CHECKING:
    import asyncio

__all__ = ["Limit"]


@record(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = False  # release() handed it the slot
    settled: bool = False  # the hand-over was completed (by _wake) or taken back (by a cancel)


class Limit:
    """At most ``max_concurrency`` calls in flight and at most ``per_second`` (or ``per_minute``) calls started.

    The rate is a token bucket holding ``burst`` tokens (default 1: calls are evenly spaced, never
    two closer than ``1 / rate``); it starts full. In any window of ``t`` seconds at most
    ``burst + rate * t`` calls start. A call first takes a concurrency slot (first come, first
    served) and then, holding it, a token: so the start times themselves obey the rate.

    ``clock`` is where rate waits sleep and time is read (``nbflow.FakeClock`` in tests).
    """

    def __init__(
        self,
        max_concurrency: int | None = None,
        *,
        per_second: float | None = None,
        per_minute: float | None = None,
        burst: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        mc = max_concurrency
        if mc is not None and (not isinstance(mc, int) or isinstance(mc, bool) or mc < 1):
            raise FlowDefinitionError(f"Limit(max_concurrency={mc!r}): give a positive int, or None for no cap")
        if per_second is not None and per_minute is not None:
            raise FlowDefinitionError(
                f"Limit(per_second={per_second!r}, per_minute={per_minute!r}): give one rate, not both"
            )
        rate: float | None = None
        for label, value, scale in (("per_second", per_second, 1.0), ("per_minute", per_minute, 60.0)):
            if value is None:
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
                raise FlowDefinitionError(f"Limit({label}={value!r}): the rate must be a positive number")
            rate = value / scale
        if burst is not None and (not isinstance(burst, int) or isinstance(burst, bool) or burst < 1):
            raise FlowDefinitionError(f"Limit(burst={burst!r}): burst is how many calls may start at once, an int >= 1")
        if burst is not None and rate is None:
            raise FlowDefinitionError("Limit(burst=...) needs a rate: add per_second= or per_minute=")
        if mc is None and rate is None:
            raise FlowDefinitionError("Limit() limits nothing: give max_concurrency=, per_second= or per_minute=")
        if not isinstance(clock, Clock):
            raise FlowDefinitionError(f"Limit(clock={clock!r}): a clock needs monotonic() and async sleep()")
        self.max_concurrency = mc
        self.rate = rate  # calls per second
        self.burst = burst if burst is not None else 1
        self.clock = clock
        self._lock = threading.Lock()
        self._in_flight = 0
        self._waiters: deque[_Waiter] = deque()
        self._tokens = float(self.burst)
        self._stamp: float | None = None

    # --- reading ---------------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Calls holding a concurrency slot right now."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Calls queued for a concurrency slot."""
        return len(self._waiters)

    def __repr__(self) -> str:
        parts = []
        if self.max_concurrency is not None:
            parts.append(f"max_concurrency={self.max_concurrency}")
        if self.rate is not None:
            parts.append(f"per_second={self.rate:g}, burst={self.burst}")
        return f"Limit({', '.join(parts)})"

    # --- using -----------------------------------------------------------------------------------
    async def acquire(self) -> None:
        """Wait for a slot and a token. Pair with ``release()``; cancelling while waiting takes nothing."""
        if self.max_concurrency is not None:
            await self._take_slot()
        if self.rate is not None:
            try:
                await self._take_token()
            except BaseException:
                if self.max_concurrency is not None:
                    self.release()
                raise

    def release(self) -> None:
        """Give the concurrency slot back (hand it to the first waiter, on whatever loop it waits)."""
        if self.max_concurrency is None:
            return
        with self._lock:
            while self._waiters:
                w = self._waiters.popleft()
                w.granted = True  # the slot passes to w: _in_flight stays the same
                try:
                    w.loop.call_soon_threadsafe(self._wake, w)
                    return
                except RuntimeError:  # its loop is closed: the waiter is gone, try the next
                    continue
            self._in_flight -= 1

    async def __aenter__(self) -> Limit:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def _wake(self, w: _Waiter) -> None:
        with self._lock:
            if w.settled:  # the waiter was cancelled and already gave the slot back
                return
            w.settled = True
            if not w.future.done():
                w.future.set_result(None)
                return
        self.release()  # cancelled meanwhile: pass the slot on

    async def _take_slot(self) -> None:
        assert self.max_concurrency is not None
        with self._lock:
            if self._in_flight < self.max_concurrency and not self._waiters:
                self._in_flight += 1
                return
            import asyncio  # here, when a caller must wait: declaring a Limit does not import the event loop

            loop = asyncio.get_running_loop()
            w = _Waiter(loop, loop.create_future())
            self._waiters.append(w)
        try:
            await w.future
        except BaseException:
            with self._lock:
                if not w.granted:
                    self._waiters.remove(w)
                    raise
                # The slot was handed to us: give it back now unless _wake already passed it on
                # (it does so only when it found us cancelled). Not left to _wake alone: the
                # loop may close before its callback runs.
                give_back = not w.settled or (w.future.done() and not w.future.cancelled())
                w.settled = True
            if give_back:
                self.release()
            raise

    async def _take_token(self) -> None:
        assert self.rate is not None
        while True:
            with self._lock:
                now = self.clock.monotonic()
                if self._stamp is not None:
                    self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1.0 - 1e-9:  # float dust must not cost another sleep
                    self._tokens = max(0.0, self._tokens - 1.0)
                    return
                wait = (1.0 - self._tokens) / self.rate
            await self.clock.sleep(wait)
