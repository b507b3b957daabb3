"""Driving a run from wherever the user is: a script, a notebook cell, or the background.

nbflow never patches the event loop (nest_asyncio breaks ipykernel's message handling, see
docs/notebooks.md). Instead:

* ``await flow.arun()`` runs on the current loop (in a notebook: the kernel's own);
* ``flow.run()`` with no loop running uses ``anyio.run`` in this thread; with a loop running
  (a notebook cell) it runs the flow on nbflow's loop thread: ONE long-lived event loop in a daemon
  thread per process, shared by every blocking call (``flow.run``, ``flow.batch``, ``flow.resume``),
  so objects bound to a loop (SDK clients, ``@flow.resource`` instances) survive consecutive calls.
  The caller joins in short slices, so a kernel interrupt arrives, cancels the call's scope and
  returns the record;
* ``flow.start()`` schedules a task on the running loop and returns a RunHandle at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, NoReturn, TypeVar

import anyio
import anyio.lowlevel

from nbflow._core import present
from nbflow._core.errors import RunInterrupted
from nbflow._core.events import Event
from nbflow._record.run import Run

__all__ = ["RunHandle", "at_deadline", "call_blocking", "in_kernel", "kernel_ticker", "loop_thread", "run_blocking"]

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

    With no loop running, ``anyio.run`` in this thread. With one running (a notebook cell), on
    nbflow's long-lived loop thread (``loop_thread()``), waited for in short slices so the kernel's
    interrupt arrives here; it then cancels the work's scope and waits for it to end. A KeyboardInterrupt (here or inside the work) is raised as
    ``interrupted(exc)``; ``cancelled()`` is returned if the work was cancelled without one.
    """
    if not _loop_running():

        async def main() -> T:
            return await make()

        try:
            return anyio.run(main)
        except KeyboardInterrupt as exc:
            _reraise(interrupted(exc), exc)

    if threading.current_thread() is _LoopThread.current_thread():
        # A blocking call from inside nbflow's own loop (a sync node run inline calling flow.run):
        # that loop is busy with the caller, so this one call gets a loop of its own.
        return _call_in_fresh_thread(make, name, interrupted, cancelled)
    return _call_on_loop_thread(make, interrupted, cancelled)


class _Box:
    __slots__ = ("done", "error", "result", "scope", "scope_ready")

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.scope_ready = threading.Event()
        self.done = threading.Event()
        self.result: Any = _NOTHING
        self.error: BaseException | None = None


_NOTHING: Any = object()


async def _boxed(make: Callable[[], Awaitable[Any]], box: _Box) -> None:
    try:
        with anyio.CancelScope() as scope:
            box.scope = scope
            box.scope_ready.set()
            box.result = await make()
    except BaseException as exc:
        box.error = exc
    finally:
        box.scope_ready.set()
        box.done.set()


def _call_on_loop_thread(
    make: Callable[[], Awaitable[T]],
    interrupted: Callable[[KeyboardInterrupt], BaseException],
    cancelled: Callable[[], T],
) -> T:
    box = _Box()
    submitted = False
    try:  # an interrupt may arrive anywhere here, even while the loop thread starts
        runner = loop_thread()
        # Copy the context: ipykernel routes prints and widget updates by the cell's parent header.
        runner.submit(lambda: _boxed(make, box), contextvars.copy_context())
        submitted = True
        while not box.done.wait(0.1):
            pass
    except KeyboardInterrupt as exc:
        if not submitted:
            _reraise(interrupted(exc), exc)
        box.scope_ready.wait()
        scope = box.scope
        if scope is not None and not box.done.is_set():
            runner.call_soon(scope.cancel)
        box.done.wait()
        _reraise(interrupted(exc), exc)
    return _unbox(box, interrupted, cancelled)


def _unbox(box: _Box, interrupted: Callable[[KeyboardInterrupt], BaseException], cancelled: Callable[[], T]) -> T:
    error = box.error
    if error is not None:
        if isinstance(error, KeyboardInterrupt):  # raised inside the work (e.g. by a node)
            _reraise(interrupted(error), error)
        raise error
    if box.result is _NOTHING:  # cancelled from inside without an interrupt here
        return cancelled()
    result: T = box.result
    return result


class _LoopThread:
    """nbflow's one long-lived event loop in a daemon thread (per process), for blocking calls."""

    _instance: _LoopThread | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._main, name="nbflow-loop", daemon=True)
        self.thread.start()
        self._started.wait()

    @classmethod
    def get(cls) -> _LoopThread:
        with cls._lock:
            inst = cls._instance
            if inst is None or not inst.thread.is_alive() or inst.loop.is_closed():
                inst = cls._instance = cls()
            return inst

    @classmethod
    def current_thread(cls) -> threading.Thread | None:
        inst = cls._instance
        return inst.thread if inst is not None else None

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        while True:
            try:
                self.loop.run_forever()
                return  # stopped on purpose (shutdown)
            except BaseException:
                # A KeyboardInterrupt/SystemExit raised inside a task leaves run_forever after the
                # task recorded it (its caller gets it); the loop itself carries on.
                continue

    def submit(self, make: Callable[[], Awaitable[Any]], ctx: contextvars.Context) -> None:
        """Start ``make()`` as a task on the loop, in context ``ctx``."""

        def start() -> None:
            coro = ctx.run(make)
            self.loop.create_task(coro, context=ctx)  # type: ignore[arg-type]

        self.loop.call_soon_threadsafe(start)

    def call_soon(self, fn: Callable[[], Any]) -> None:
        try:
            self.loop.call_soon_threadsafe(fn)
        except RuntimeError:
            pass  # the loop closed: the work is over anyway

    def run(self, make: Callable[[], Awaitable[T]], timeout: float | None = None) -> T:
        """Run ``make()`` on the loop and wait for its result here (not for interactive use)."""
        box = _Box()
        self.submit(lambda: _boxed(make, box), contextvars.copy_context())
        if not box.done.wait(timeout):
            raise TimeoutError("nbflow's loop thread did not answer")
        if box.error is not None:
            raise box.error
        result: T = box.result
        return result

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and its thread (at interpreter exit, after resources were closed)."""
        if self.loop.is_closed():
            return
        self.call_soon(self.loop.stop)
        self.thread.join(timeout)
        if not self.thread.is_alive():
            self.loop.close()


def at_deadline(
    when: float,
    name: str,
    on_loop: Callable[[], Awaitable[Any]],
    off_loop: Callable[[], Any],
    failed: Callable[[BaseException], None],
) -> threading.Timer:
    """At wall-clock time ``when`` (``time.time()``), from a daemon timer: ``on_loop()`` awaited on the loop running
    now, if it still runs then (the kernel's, nbflow's loop thread), else ``off_loop()`` in the timer's thread.
    ``failed(exc)`` hears what either raised. A daemon: it never holds up the process's exit.

    Expiring questions (``nf.ask(timeout=)``) of a paused run and of a batch's paused rows use it."""
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None

    def done(future: Any) -> None:
        if not future.cancelled() and future.exception() is not None:
            failed(future.exception())

    def fire() -> None:
        if loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(_awaited(on_loop), loop).add_done_callback(done)
            return
        try:
            off_loop()
        except Exception as exc:  # say so; never a bare thread traceback
            failed(exc)

    timer = threading.Timer(max(0.0, when - time.time()), fire)
    timer.daemon = True
    timer.name = name
    timer.start()
    return timer


async def _awaited(make: Callable[[], Awaitable[Any]]) -> Any:
    return await make()


def loop_thread() -> _LoopThread:
    """nbflow's long-lived loop thread (started on first use)."""
    return _LoopThread.get()


def _call_in_fresh_thread(
    make: Callable[[], Awaitable[T]],
    name: str,
    interrupted: Callable[[KeyboardInterrupt], BaseException],
    cancelled: Callable[[], T],
) -> T:
    box = _Box()
    token: list[Any] = []

    async def main_in_thread() -> None:
        token.append(anyio.lowlevel.current_token())
        await _boxed(make, box)

    def target() -> None:
        _forget_running_library()
        try:
            anyio.run(main_in_thread)
        except BaseException as exc:
            box.error = box.error or exc
        finally:
            box.scope_ready.set()
            box.done.set()

    ctx = contextvars.copy_context()
    thread = threading.Thread(target=ctx.run, args=(target,), name=name, daemon=True)
    thread.start()
    # Wait on an Event in short slices, not on thread.join(): an interrupted join() marks a live
    # thread as stopped on Python 3.11 (bpo-45274's fix), so it would not be waited for again.
    try:
        while not box.done.wait(0.1):
            pass
    except KeyboardInterrupt as exc:
        box.scope_ready.wait()
        if box.scope is not None and token and not box.done.is_set():
            import anyio.from_thread  # here: not imported by `nf.Flow` (tests/test_import_cost.py)

            try:
                anyio.from_thread.run_sync(box.scope.cancel, token=token[0])
            except RuntimeError:
                pass  # the loop closed between the check and the call: the work is over anyway
        box.done.wait()
        thread.join()
        _reraise(interrupted(exc), exc)
    thread.join()
    return _unbox(box, interrupted, cancelled)


def _forget_running_library() -> None:
    """In the copied context sniffio (installed with httpx, openai) still says "asyncio is running",
    and anyio.run would refuse to start this thread's own loop: this thread runs none yet."""
    sniffio = sys.modules.get("sniffio")
    if sniffio is not None:
        sniffio.current_async_library_cvar.set(None)


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
        shown = present.bundle(self.run, self, include, exclude)
        return shown if shown is not None else {"text/plain": self.run.summary()}
