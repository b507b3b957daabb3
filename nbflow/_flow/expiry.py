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

from typing import TYPE_CHECKING

from nbflow._core.errors import ResumeConflictError
from nbflow._core.states import RunStatus
from nbflow._engine.kernel import at_deadline

if TYPE_CHECKING:
    import threading

    from nbflow._record.run import Run

__all__ = ["arm"]


def arm(run: Run) -> threading.Timer | None:
    """If paused ``run`` has questions with a timeout: a timer that resumes it at the earliest deadline."""
    if run.status is not RunStatus.PAUSED:
        return None
    due = [q.expires_at for q in run.pending.values() if q.expires_at is not None]
    if not due:
        return None
    version = run.pause_version
    return at_deadline(
        min(due), f"nbflow-expiry-{run.run_id}", lambda: _aresume(run, version), lambda: _resume(run, version), _warn
    )


def _waiting(run: Run, version: int) -> bool:
    """Still paused at ``version`` (not answered, cancelled or resumed meanwhile), its store still open (else the
    deadline is in the file, for a later resume)."""
    return run.status is RunStatus.PAUSED and run.pause_version == version and not getattr(run.store, "closed", False)


async def _aresume(run: Run, version: int) -> None:
    if _waiting(run, version):
        await run.aresume(version=version)


def _resume(run: Run, version: int) -> None:
    if _waiting(run, version):
        run.resume(version=version)


def _warn(exc: BaseException) -> None:
    if isinstance(exc, ResumeConflictError):
        return  # someone else resumed it first: nothing to do
    import warnings

    from nbflow._core.errors import NbflowWarning

    warnings.warn(
        f"a question of a paused run expired, but resuming the run failed: {type(exc).__name__}: {exc}; "
        f"resume it yourself with run.resume()",
        NbflowWarning,
        stacklevel=1,
    )
