"""``logging`` records of runs and batches, on the ``nbflow`` logger hierarchy.

| logger | records |
|---|---|
| ``nbflow.run`` | a run started, finished (INFO); a run failed or was cancelled (WARNING) |
| ``nbflow.node`` | an attempt failed and will be retried (INFO); a node failed (WARNING) |
| ``nbflow.batch`` | a batch started, finished (INFO; WARNING when rows failed); a cool-down (WARNING); each row's run (DEBUG) |
| ``nbflow.store`` | a store fault: a row, record or checkpoint not written, an output not saved, a cache entry not read (WARNING) |

Live records come from a subscriber of the run's events (``RunLogger``), attached where the run is
made only when a logger of these is enabled for INFO (``logging.basicConfig(level="INFO")``, pytest's
``caplog``): with logging at its default (WARNING) no subscriber exists and the engine builds no events,
so it costs nothing. The WARNING records of a failed run are then written from its record when it ends
(``finished``): one check per run. The ``nbflow`` logger has a ``NullHandler`` only (what the logging
guide asks of a library): with no logging set up nothing is printed, in a notebook too (its run view
shows a failed run); a program that configures logging gets the WARNING records.

Secrets never reach a record: the text of every secret of the run is ``[REDACTED]`` in messages.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from nbflow._core.events import Event, NodeFailed, NodeRetrying, RunFinished, RunStarted
from nbflow._core.secrets import Redactor
from nbflow._core.states import NodeStatus, RunStatus

if TYPE_CHECKING:
    from nbflow._record.run import Run

__all__ = ["BATCH", "NODE", "RUN", "STORE", "RunLogger", "attach", "finished"]

RUN = logging.getLogger("nbflow.run")
NODE = logging.getLogger("nbflow.node")
BATCH = logging.getLogger("nbflow.batch")
STORE = logging.getLogger("nbflow.store")
logging.getLogger("nbflow").addHandler(logging.NullHandler())  # (no "last resort" printing to stderr)
_LIMIT = 300  # longest error message in a record (the run's record keeps the whole)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LIMIT else text[: _LIMIT - 3] + "..."


class RunLogger:
    """Writes a run's events as records (a subscriber of the run: ``run.subscribe(RunLogger(run))``).

    ``row``: the run is a batch row's (its start and end are DEBUG records of ``nbflow.batch``)."""

    __slots__ = ("logged", "redact", "row", "run")

    def __init__(self, run: Run, row: bool = False) -> None:
        self.run = run
        self.row = row
        self.redact: Redactor | None = None
        self.logged = False  # a node failure was written live: ``finished`` leaves it

    def _text(self, text: str) -> str:
        if self.redact is None:
            self.redact = Redactor.for_inputs(self.run.inputs)
        return _clip(self.redact(text))

    def __call__(self, event: Event) -> None:
        run = self.run
        if isinstance(event, RunStarted):
            log = BATCH if self.row else RUN
            log.log(
                logging.DEBUG if self.row else logging.INFO,
                "run %s of flow %r started (%d nodes)",
                run.run_id,
                run.flow,
                len(event.nodes),
                extra={"nbflow_run": run.run_id, "nbflow_flow": run.flow},
            )
        elif isinstance(event, NodeRetrying):
            NODE.info(
                "node %r of run %s: attempt %d failed (%s: %s); retrying in %.2fs",
                event.node,
                run.run_id,
                event.attempt,
                event.error_type,
                self._text(str(event.error)),
                event.delay,
                extra={"nbflow_run": run.run_id, "nbflow_node": event.node},
            )
        elif isinstance(event, NodeFailed):
            self.logged = True
            _node_failed(run, event.node, event.error, self._text, self.row)
        elif isinstance(event, RunFinished):
            _run_finished(run, event.status, event.duration, event.reason, self.row, self._text, self.logged)


def _node_failed(run: Run, node: str, error: BaseException, text: Any, row: bool) -> None:
    NODE.log(
        logging.INFO if row else logging.WARNING,
        "node %r of run %s (flow %r) failed: %s: %s",
        node,
        run.run_id,
        run.flow,
        type(error).__name__,
        text(str(error)),
        extra={"nbflow_run": run.run_id, "nbflow_node": node},
    )


def _run_finished(
    run: Run, status: RunStatus, duration: float, reason: str | None, row: bool, text: Any, nodes_logged: bool
) -> None:
    bad = status in (RunStatus.FAILED, RunStatus.CANCELLED)
    if row:
        log, level = BATCH, logging.DEBUG
    else:
        log, level = RUN, logging.WARNING if bad else logging.INFO
    if not log.isEnabledFor(level):
        return
    why = ""
    if status is RunStatus.FAILED:
        failed = [n for n, r in run.walk() if r.status is NodeStatus.FAILED and r.subrun is None]
        why = f": node(s) {', '.join(repr(n) for n in failed[:5])} failed" if failed else ""
    elif reason:
        why = f": {text(reason)}"
    log.log(
        level,
        "run %s of flow %r %s in %.3fs%s",
        run.run_id,
        run.flow,
        status.value,
        duration,
        why,
        extra={"nbflow_run": run.run_id, "nbflow_flow": run.flow, "nbflow_status": status.value},
    )


def attach(run: Run, row: bool = False) -> None:
    """Subscribe a ``RunLogger`` to ``run`` when its records would be written (see the module docstring)."""
    if (
        (BATCH.isEnabledFor(logging.DEBUG) or NODE.isEnabledFor(logging.INFO))
        if row
        else RUN.isEnabledFor(logging.INFO)
    ):
        run.subscribe(RunLogger(run, row))


def finished(run: Run) -> None:
    """A run (not a batch row) ended: its WARNING records, unless a ``RunLogger`` wrote them live."""
    status = run.status
    if status is not RunStatus.FAILED and status is not RunStatus.CANCELLED:
        return
    if any(isinstance(s, RunLogger) for s in run._subscribers):
        return
    redact: list[Redactor] = []

    def text(message: str) -> str:
        if not redact:
            redact.append(Redactor.for_inputs(run.inputs))
        return _clip(redact[0](message))

    if NODE.isEnabledFor(logging.WARNING):
        for name, rec in run.walk():
            if rec.status is NodeStatus.FAILED and rec.subrun is None and rec.error is not None:
                _node_failed(run, name, rec.error, text, False)
    duration = run.duration or 0.0
    _run_finished(run, status, duration, run.reason, False, text, True)
