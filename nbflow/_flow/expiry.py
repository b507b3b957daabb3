"""Questions that expire (``nf.ask(..., timeout=)``): a paused run goes on by itself at the deadline.

The rule itself lives in ``nf.ask`` (``_engine/ask.py``): a question asked longer ago than its timeout
returns its default or fails its node. This module only makes a paused run notice the deadline while
its process lives: when a run pauses with such a question, a daemon timer resumes it (without an
answer) at the earliest deadline, on the run's own loop if that loop still runs (the kernel's, nbflow's
loop thread), else in the timer's thread. If the run was answered, cancelled or resumed meanwhile, the
timer does nothing (the resume is claimed with the pause version). A run whose process is gone expires
its questions when it is resumed (``nf.load_run(...).resume()``): ``asked_at`` is in the checkpoint.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import ResumeConflictError
from nbflow._core.states import RunStatus

if TYPE_CHECKING:
    from nbflow._record.run import Run

__all__ = ["arm"]


def arm(run: Run) -> threading.Timer | None:
    """If paused ``run`` has questions with a timeout: a timer that resumes it at the earliest deadline."""
    if run.status is not RunStatus.PAUSED:
        return None
    due = [q.expires_at for q in run.pending.values() if q.expires_at is not None]
    if not due:
        return None
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    timer = threading.Timer(max(0.0, min(due) - time.time()), _fire, (run, run.pause_version, loop))
    timer.daemon = True  # never holds up exit: the checkpoint keeps the deadline for a later resume
    timer.name = f"nbflow-expiry-{run.run_id}"
    timer.start()
    return timer


def _fire(run: Run, version: int, loop: asyncio.AbstractEventLoop | None) -> None:
    if run.status is not RunStatus.PAUSED or run.pause_version != version:
        return  # answered, cancelled or resumed meanwhile
    if getattr(run.store, "closed", False):
        return  # its store was closed (or the file replaced): the deadline is in the file, for a later resume
    if loop is not None and loop.is_running():
        future = asyncio.run_coroutine_threadsafe(run.aresume(version=version), loop)
        future.add_done_callback(_quiet)
        return
    try:
        run.resume(version=version)
    except ResumeConflictError:
        pass  # someone else resumed it first: nothing to do
    except Exception as exc:  # e.g. the store file is gone: say so, never a bare thread traceback
        _warn(exc)


def _quiet(future: Any) -> None:
    if not future.cancelled():
        exc = future.exception()
        if exc is not None and not isinstance(exc, ResumeConflictError):
            _warn(exc)


def _warn(exc: BaseException) -> None:
    import warnings

    from nbflow._core.errors import NbflowWarning

    warnings.warn(
        f"a question of a paused run expired, but resuming the run failed: {type(exc).__name__}: {exc}; "
        f"resume it yourself with run.resume()",
        NbflowWarning,
        stacklevel=1,
    )
