"""Flows by name, so a run (loaded from a store, or a record) finds its flow again.

A ``Run`` sits below the engine and the flow, so it resumes through its flow: ``run.resume(...)`` looks
the flow up here and calls ``flow._resume_run(...)``. The registry is typed by a Protocol, not by ``Flow``.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Protocol

from nbflow._core.errors import RunnerError

if TYPE_CHECKING:
    from nbflow._record.run import Run

__all__ = ["ResumableFlow", "flow_of", "register_flow", "registered"]


class ResumableFlow(Protocol):
    """What a run needs of its flow: the name, and the one way to continue a paused run."""

    name: str

    def _resume_run(self, run: Run, answer: Any, question: str | None, version: int | None) -> Run: ...

    async def _aresume_run(self, run: Run, answer: Any, question: str | None, version: int | None) -> Run: ...


# Flows by name, so a run loaded from a store after a kernel restart finds its flow again once the
# cell defining it has run. The newest flow of a name wins.
_FLOWS: weakref.WeakValueDictionary[str, ResumableFlow] = weakref.WeakValueDictionary()


def register_flow(flow: ResumableFlow) -> None:
    _FLOWS[flow.name] = flow


def registered(name: str) -> ResumableFlow | None:
    """The newest flow registered under ``name``, if any."""
    return _FLOWS.get(name)


def flow_of(run: Run) -> Any:
    """The run's flow object (its own, else the newest flow of its name); RunnerError if none."""
    flow = run._flow if run._flow is not None else _FLOWS.get(run.flow)
    if flow is None:
        raise RunnerError(
            f"run {run.run_id} belongs to flow {run.flow!r}, which is not defined in this process; "
            f"run the cell that defines it (nf.Flow({run.flow!r}) and its nodes), then resume"
        )
    return flow
