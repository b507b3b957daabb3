"""The batch circuit breaker: stop, or cool down, after ``max_consecutive_failures`` rows failed in a row.

Without ``cooldown=`` it stops the batch for good (no new rows start; rows in flight finish).
With ``cooldown=`` seconds it is a breaker with a cool-down, as for a provider outage at 2 a.m.:

* **closed** — rows start as usual; N failures in a row (in finishing order) **open** it;
* **open** — no new row starts for ``cooldown`` seconds (the flow's clock: ``nf.FakeClock`` in
  tests); rows in flight finish; the progress line says ``paused`` with the time left;
* **half-open** — one probe row starts; its success closes the breaker (full concurrency
  again), its failure opens it again. After ``max_cooldowns`` cool-downs a failing probe
  stops the batch as without a cool-down.

Every cool-down is recorded on the batch (``frame.attrs["cooldowns"]`` and, with a store, in the
experiment record). Ctrl-C or a batch ``timeout=`` during a cool-down keeps every finished row.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbflow._batch.rows import State
    from nbflow._core.clock import Clock
    from nbflow._record.batch_progress import BatchProgress

__all__ = ["Breaker"]


class Breaker:
    """Decides whether the next row may start; told each finished row's outcome. One per batch call."""

    def __init__(self, state: State, progress: BatchProgress, clock: Clock) -> None:
        opts = state.opts
        self.state = state
        self.progress = progress
        self.clock = clock
        self.limit = opts.max_consecutive_failures
        self.cooldown = opts.cooldown
        self.max_cooldowns = opts.max_cooldowns
        self.consecutive = 0
        self.mode = "closed"
        self.probe_out = False
        self.last_error = ""
        self.task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    def flowing(self) -> bool:
        """The common case, without a coroutine per row: rows start freely (closed, not stopped)."""
        return self.mode == "closed" and self.state.stopped is None

    async def admit(self) -> bool | str:
        """True: start a row; "probe": start the one probe row; False: start nothing more."""
        while True:
            if self.state.stopped is not None:
                return False
            if self.mode == "closed":
                return True
            if self.mode == "half-open" and not self.probe_out:
                self.probe_out = True
                return "probe"
            self._changed.clear()
            await self._changed.wait()

    def release(self, probe: bool | str) -> None:
        """A probe slot taken but no row left to run: let the others see the end."""
        if probe == "probe":
            self.probe_out = False
            self._notify()

    def finished(self, ok: bool, probe: bool | str, error: str) -> None:
        if ok:
            self.consecutive = 0
            if probe == "probe" or self.mode == "half-open":
                self.mode = "closed"
                self.probe_out = False
                self._notify()
            return
        self.consecutive += 1
        self.last_error = error
        if self.limit is None:
            return
        if probe == "probe" or (self.mode == "closed" and self.consecutive >= self.limit):
            self._trip()

    def _trip(self) -> None:
        from nbflow._batch.columns import clip

        used = len(self.state.cooldowns)
        if self.cooldown is None or used >= self.max_cooldowns:
            after = f" after {used} cool-downs of {self.cooldown:g}s" if self.cooldown is not None else ""
            self.state.stopped = (
                f"circuit breaker: {self.consecutive} consecutive rows failed (max_consecutive_failures="
                f"{self.limit}){after}; last error: {clip(self.last_error)}"
            )
            self._notify()
            return
        self.mode = "open"
        self.probe_out = False
        self.state.cooldowns.append(
            {"at": time.time(), "seconds": self.cooldown, "failures": self.consecutive, "error": clip(self.last_error)}
        )
        progress = self.progress
        progress.cooldowns = len(self.state.cooldowns)
        progress.max_cooldowns = self.max_cooldowns
        progress.paused_until = self.clock.monotonic() + self.cooldown
        progress.pause_clock = self.clock.monotonic
        self.task = asyncio.get_running_loop().create_task(self._cool_down(self.cooldown))

    async def _cool_down(self, seconds: float) -> None:
        await self.clock.sleep(seconds)
        self.progress.paused_until = None
        self.mode = "half-open"
        self._notify()

    def _notify(self) -> None:
        self._changed.set()

    def tasks(self) -> list[Any]:
        return [self.task] if self.task is not None and not self.task.done() else []
