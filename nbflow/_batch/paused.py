"""Paused batch rows: a row whose node called ``nf.ask`` is ``paused``; ``flow.answer`` resumes it.

A paused row keeps its run (whatever ``keep=`` says) and shows its question in ``question_prompt`` /
``question_options``. ``flow.answer(frame, {row: answer, ...})`` resumes those rows' runs concurrently,
updates the frame in place (outputs, status, error columns; the question columns cleared) and, when the
batch had a store, the stored rows and runs too. Rows not named are not touched.

A question asked with ``nf.ask(..., timeout=)`` expires as a single run's does (``nbflow._flow.expiry``):
``arm_expiry`` sets a daemon timer at the earliest deadline of the frame's paused rows, which resumes the
rows whose questions expired without an answer (their nodes take the default, or fail) and updates the
frame and the store as ``flow.answer`` does; the rows still waiting get the next timer.
"""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from nbflow._batch.experiments import refresh_experiment
from nbflow._batch.rows import QUESTION_COLUMNS, outcome
from nbflow._batch.runs import FrameRuns, RunArchive
from nbflow._core.errors import BatchError, NbflowWarning, ResumeConflictError, RunInterrupted
from nbflow._core.missing import MISSING
from nbflow._core.secrets import is_secret_name, secret_texts
from nbflow._engine.kernel import at_deadline, call_blocking
from nbflow._engine.lineage import row_lineage
from nbflow._store.batch_store import BatchStore

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._flow.flow import Flow
    from nbflow._record.run import Run

__all__ = ["aanswer", "answer", "arm_expiry"]


def answer(flow: Flow, frame: pd.DataFrame, answers: Mapping[Any, Any], /) -> pd.DataFrame:
    """Answer the questions of paused rows and resume them; blocking. Returns ``frame``, updated in place.

    ``answers`` maps a row (an index label, else a position) to its answer (checked against the
    question's options or schema before anything runs). See ``nbflow._batch.paused``.
    """
    todo = _check(flow, frame, answers)
    return call_blocking(
        lambda: _answered(flow, frame, todo),
        f"nbflow-answer-{flow.name}",
        lambda exc: RunInterrupted(todo[0][1]),
        lambda: frame,
    )


async def aanswer(flow: Flow, frame: pd.DataFrame, answers: Mapping[Any, Any], /) -> pd.DataFrame:
    """Like ``flow.answer`` on the running event loop."""
    return await _answered(flow, frame, _check(flow, frame, answers))


async def _answered(flow: Flow, frame: pd.DataFrame, todo: list[tuple[Any, Run, Any]]) -> pd.DataFrame:
    await _resume_all(flow, frame, todo)
    arm_expiry(flow, frame)  # a resumed row that asked again, with a timeout
    return frame


def _check(flow: Flow, frame: pd.DataFrame, answers: Mapping[Any, Any]) -> list[tuple[Any, Run, Any]]:
    from nbflow._engine.ask import validate_answer

    if not isinstance(answers, Mapping) or not answers:
        raise BatchError(
            "flow.answer(frame, answers): answers is a dict {row: answer} naming paused rows, e.g. "
            "flow.answer(df, {3: 'approve'})"
        )
    accessor = FrameRuns(frame)
    todo = []
    for key, value in answers.items():
        row = accessor._row(key)
        if row.get("status") != "paused":
            raise BatchError(
                f"row {key!r} is {row.get('status')!r}, not 'paused': only rows whose node asked a question "
                f"(nf.ask) can be answered; paused rows: {_paused_labels(frame)}"
            )
        run = accessor.run(key)
        if run.flow != flow.name:
            raise BatchError(f"row {key!r} is a run of flow {run.flow!r}, not {flow.name!r}")
        if len(run.pending) == 1:
            validate_answer(next(iter(run.pending.values())), value)  # AnswerError before anything runs
        run._flow = flow
        todo.append((row.name if key in frame.index else frame.index[key], run, value))
    store = _store_of(frame)
    if store and frame.attrs.get("batch_id"):
        _check_current(frame, todo, store, str(frame.attrs["batch_id"]))
    if store:
        from nbflow._store.checkpoint import open_store

        for _, run, _ in todo:
            if run.store is None:  # a run the batch kept in memory: its answer goes to the store first, as a
                open_store(store).track(run, save=False)  # loaded run's does (its claim), then every node
    return todo


def _check_current(frame: pd.DataFrame, todo: list[tuple[Any, Run, Any]], path: str, batch_id: str) -> None:
    """Refuse, before anything runs, a row whose run the stored batch replaced since (a resume ran it again):
    its answer would add the row a second time."""
    with BatchStore(path, read_only=True) as store:
        for label, run, _ in todo:
            if store.row_key(batch_id, run.run_id) is not None:
                continue
            index = run.run_id.rsplit("-", 1)[-1]
            now = store.run_at(batch_id, int(index)) if index.isdigit() else None
            if now is not None and now != run.run_id:
                raise BatchError(
                    f"row {label!r} of batch {batch_id!r} ran again since this frame was made (a resume=True: its "
                    f"row is now run {now!r}); answer the frame that batch returned, or the stored batch: "
                    f"df = nf.load_batch({path!r}, {batch_id!r}); flow.answer(df, {{...}})"
                )


def _store_of(frame: pd.DataFrame) -> str | None:
    """The store path of a batch frame (``attrs["store"]``, else its archive's), or None."""
    archive = frame.attrs.get("nbflow_runs")
    return frame.attrs.get("store") or (archive.store if isinstance(archive, RunArchive) else None)


def _paused_labels(frame: pd.DataFrame) -> str:
    labels = list(frame.index[frame["status"] == "paused"])
    return ", ".join(repr(x) for x in labels[:10]) + (" ..." if len(labels) > 10 else "") if labels else "none"


async def _resume_all(
    flow: Flow, frame: pd.DataFrame, todo: list[tuple[Any, Run, Any]], versions: list[int] | None = None
) -> pd.DataFrame:
    """Resume ``todo``'s runs concurrently, then update their rows in ``frame`` (and the store).

    ``versions``: each run's pause version when its question expired (``_expire``): a run answered,
    cancelled or resumed since is left out, not resumed twice."""
    resumed = [True] * len(todo)

    async def one(k: int, run: Run, value: Any) -> None:
        if versions is None:
            await run.aresume(value)
            return
        try:
            await run.aresume(value, version=versions[k])
        except ResumeConflictError:
            resumed[k] = False  # someone got there first: their resume updates the row

    async with anyio.create_task_group() as tg:
        for k, (_, run, value) in enumerate(todo):
            tg.start_soon(one, k, run, value)
    todo = [t for t, ok in zip(todo, resumed, strict=True) if ok]
    outputs = list(frame.attrs.get("outputs") or [])
    archive = frame.attrs.get("nbflow_runs")
    store_path = _store_of(frame)
    for label, run, _ in todo:
        new = outcome(run, outputs)
        for col, value in new.items():
            if col in frame.columns:
                frame.at[label, col] = value
        for col in QUESTION_COLUMNS:
            if col in frame.columns:
                frame.at[label, col] = None
        if isinstance(archive, RunArchive):
            archive.offer(run, new["status"])
    counts = frame["status"].value_counts().to_dict()
    frame.attrs["counts"] = {str(k): int(v) for k, v in counts.items()}
    if store_path and frame.attrs.get("batch_id"):
        _store_rows(frame, todo, store_path)
    return frame


def _store_rows(frame: pd.DataFrame, todo: list[tuple[Any, Run, Any]], path: str) -> None:
    secret = [c for c in frame.columns if is_secret_name(c)]
    with BatchStore(path) as store:
        for label, run, _ in todo:
            data = {k: v for k, v in frame.loc[label].items() if k not in QUESTION_COLUMNS}
            found = store.row_key(frame.attrs["batch_id"], run.run_id)  # the row as the batch stored it
            key, index, fingerprint = found if found is not None else (None, int(run.run_id.rsplit("-", 1)[1]), None)
            store.write_row(
                frame.attrs["batch_id"],
                index,
                run.run_id,
                str(data["status"]),
                data,
                secret_columns=secret,
                secrets=secret_texts(run.inputs),
                run=run,
                key=key,
                fingerprint=fingerprint,
                lineage=row_lineage(run),
            )
        refresh_experiment(store, frame.attrs["batch_id"])


def arm_expiry(flow: Flow, frame: pd.DataFrame) -> threading.Timer | None:
    """If paused rows of ``frame`` asked with ``timeout=``: a timer that resumes them at the earliest deadline (on
    the batch's loop if it still runs, the kernel's; else in the timer's thread: a script's loop is gone)."""
    due = [min(d) for _, _, d in _timed(frame)]
    with _TIMERS_LOCK:  # one timer per frame: a new one (flow.answer left rows paused) replaces the one before
        old = _TIMERS.pop(id(frame), None)
        if old is not None:
            old.cancel()
        if not due:
            return None
        name = f"nbflow-expiry-batch-{frame.attrs.get('batch_id') or flow.name}"
        timer = at_deadline(
            min(due), name, lambda: _expire(flow, frame), lambda: asyncio.run(_expire(flow, frame)), _warn
        )
        _TIMERS[id(frame)] = timer
        return timer


_TIMERS: dict[int, threading.Timer] = {}  # id(frame) -> its expiry timer (until it fires or is replaced)
_TIMERS_LOCK = threading.Lock()


def _timed(frame: pd.DataFrame) -> list[tuple[Any, Run, list[float]]]:
    """The paused rows whose run is at hand with a question that expires: (label, run, deadlines)."""
    if "status" not in frame.columns:
        return []
    accessor = FrameRuns(frame)
    out = []
    for label in frame.index[frame["status"] == "paused"]:
        try:
            run = accessor.run(label)
        except BatchError:  # (not kept, e.g. past keep_limit without a store): answered through flow.answer
            continue
        deadlines = [q.expires_at for q in run.pending.values() if q.expires_at is not None]
        if deadlines:
            out.append((label, run, deadlines))
    return out


async def _expire(flow: Flow, frame: pd.DataFrame) -> None:
    """Resume (without an answer) the paused rows whose question expired; arm the timer for the others."""
    with _TIMERS_LOCK:
        _TIMERS.pop(id(frame), None)  # (this one fired)
    now = time.time()
    todo, versions = [], []
    for label, run, deadlines in _timed(frame):
        if min(deadlines) <= now:
            run._flow = flow
            todo.append((label, run, MISSING))
            versions.append(run.pause_version)
    if todo:
        await _resume_all(flow, frame, todo, versions)
    arm_expiry(flow, frame)


def _warn(exc: BaseException) -> None:
    warnings.warn(
        f"a question of a paused batch row expired, but resuming the row failed: {type(exc).__name__}: {exc}; "
        f"resume it yourself with flow.answer(frame, {{row: answer}})",
        NbflowWarning,
        stacklevel=1,
    )
