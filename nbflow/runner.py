"""Driving a run from wherever the user is: a script, a notebook cell, or the background.

nbflow never patches the event loop (nest_asyncio breaks ipykernel's message handling, see
docs/notebooks.md). Instead:

* ``await flow.arun()`` runs on the current loop (in a notebook: the kernel's own);
* ``flow.run()`` with no loop running uses ``anyio.run`` in this thread; with a loop running
  (a notebook cell) it runs the flow on a fresh loop in a worker thread and joins it in short
  slices, so a kernel interrupt arrives, cancels the run's scope and returns the record;
* ``flow.start()`` schedules a task on the running loop and returns a RunHandle at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, NoReturn, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from .engine.events import Event
from .errors import RunInterrupted
from .run import Run

__all__ = ["RunHandle", "call_blocking", "in_kernel", "kernel_ticker", "run_blocking"]

_TICK = 0.2

T = TypeVar("T")


def in_kernel() -> bool:
    """True inside a Jupyter kernel (ipykernel imported and an IPython shell active)."""
    if "ipykernel" not in sys.modules:
        return False
    ip = sys.modules.get("IPython")
    get = getattr(ip, "get_ipython", None)
    return bool(get and get() is not None and type(get()).__name__ == "ZMQInteractiveShell")


async def kernel_ticker() -> None:
    """Wake the loop periodically so ipykernel's interrupt is noticed promptly (ipykernel #881)."""
    while True:
        await asyncio.sleep(_TICK)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_blocking(make: Callable[[], Awaitable[Run]], run: Run) -> Run:
    """Run ``make()`` to completion from sync code; on Ctrl-C/kernel interrupt raise RunInterrupted(run)."""
    return call_blocking(make, f"nbflow-run-{run.run_id}", lambda exc: RunInterrupted(run), lambda: run)


def call_blocking(
    make: Callable[[], Awaitable[T]],
    name: str,
    interrupted: Callable[[KeyboardInterrupt], BaseException],
    cancelled: Callable[[], T],
) -> T:
    """Await ``make()`` from sync code, in a script or a notebook cell.

    With no loop running, ``anyio.run`` in this thread. With one running (a notebook cell), a fresh
    loop in a worker thread, joined in short slices so the kernel's interrupt arrives here; it then
    cancels the work's scope and joins. A KeyboardInterrupt (here or inside the work) is raised as
    ``interrupted(exc)``; ``cancelled()`` is returned if the work was cancelled without one.
    """
    if not _loop_running():

        async def main() -> T:
            return await make()

        try:
            return anyio.run(main)
        except KeyboardInterrupt as exc:
            _reraise(interrupted(exc), exc)

    box: dict[str, Any] = {}
    scope_ready = threading.Event()
    done = threading.Event()

    async def main_in_thread() -> None:
        with anyio.CancelScope() as scope:
            box["scope"] = scope
            box["token"] = anyio.lowlevel.current_token()
            scope_ready.set()
            box["result"] = await make()

    def target() -> None:
        try:
            anyio.run(main_in_thread)
        except BaseException as exc:
            box["error"] = exc
        finally:
            scope_ready.set()
            done.set()

    # Copy the context: ipykernel routes prints and widget updates by the cell's parent header.
    ctx = contextvars.copy_context()
    _forget_async_library(ctx)
    thread = threading.Thread(target=ctx.run, args=(target,), name=name, daemon=True)
    thread.start()
    # Wait on an Event in short slices, not on thread.join(): an interrupted join() marks a live
    # thread as stopped on Python 3.11 (bpo-45274's fix), so it would not be waited for again.
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt as exc:
        scope_ready.wait()
        if "scope" in box and not done.is_set():
            try:
                anyio.from_thread.run_sync(box["scope"].cancel, token=box["token"])
            except RuntimeError:
                pass  # the loop closed between the check and the call: the work is over anyway
        done.wait()
        thread.join()
        _reraise(interrupted(exc), exc)
    if "error" in box:
        error = box["error"]
        if isinstance(error, KeyboardInterrupt):  # raised inside the work (e.g. by a node)
            _reraise(interrupted(error), error)
        raise error
    if "result" not in box:  # cancelled from inside without an interrupt here
        return cancelled()
    result: T = box["result"]
    return result


def _forget_async_library(ctx: contextvars.Context) -> None:
    """The copied context must not say that the caller's loop runs in the worker thread.

    anyio (and every library using sniffio, e.g. httpx and openai) records the running async
    library in sniffio's context variable; copied into the worker thread it makes ``anyio.run`` there
    refuse with "Already running asyncio in this thread" whenever sniffio is installed.
    """
    sniffio = sys.modules.get("sniffio")
    if sniffio is not None:
        ctx.run(sniffio.current_async_library_cvar.set, None)


def _reraise(error: BaseException, cause: BaseException) -> NoReturn:
    if error is cause:
        raise error
    raise error from cause


class RunHandle:
    """A run going on in the background of the notebook.

    ``handle.run`` is the live record; ``await handle`` waits and gives the Run (also when it was
    cancelled); ``handle.cancel()`` stops it; ``handle.events()`` iterates over its events.
    """

    def __init__(self, run: Run, coro: Awaitable[Run]) -> None:
        self.run = run
        self._task: asyncio.Task[Run] = asyncio.get_running_loop().create_task(self._guard(coro))

    async def _guard(self, coro: Awaitable[Run]) -> Run:
        try:
            return await coro
        except asyncio.CancelledError:
            return self.run  # the record says CANCELLED; awaiting the handle still gives it

    def pause(self) -> None:
        """Pause the run: nodes in flight finish, no new node starts; ``run.resume()`` goes on."""
        self.run.pause()

    def cancel(self) -> None:
        """Stop the run: nodes in flight are cancelled, finished outputs are kept."""
        self._task.cancel()

    def done(self) -> bool:
        return self._task.done()

    @property
    def status(self) -> Any:
        return self.run.status

    def events(self) -> AsyncIterator[Event]:
        return self.run.events()

    def __await__(self) -> Generator[Any, None, Run]:
        return asyncio.shield(self._task).__await__()

    def __repr__(self) -> str:
        return f"<RunHandle {self.run!r}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        from .display import rich_bundle  # the live widget, with a Cancel button, in a notebook

        bundle = rich_bundle(self.run, self, include, exclude)
        return bundle if bundle is not None else self.run._repr_mimebundle_(include, exclude)
