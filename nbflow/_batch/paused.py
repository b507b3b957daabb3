"""Paused batch rows: a row whose node called ``nf.ask`` is ``paused``; ``flow.answer`` resumes it.

A paused row keeps its run (whatever ``keep=`` says) and shows its question in ``question_prompt`` /
``question_options``. ``flow.answer(frame, {row: answer, ...})`` resumes those rows' runs concurrently,
updates the frame in place (outputs, status, error columns; the question columns cleared) and, when the
batch had a store, the stored rows and runs too. Rows not named are not touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from nbflow._batch.rows import QUESTION_COLUMNS, outcome
from nbflow._batch.runs import NbflowAccessor, RunArchive
from nbflow._core.errors import BatchError, RunInterrupted
from nbflow._core.secrets import is_secret_name, secret_texts
from nbflow._engine.kernel import call_blocking
from nbflow._store.batch_store import BatchStore

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._flow.flow import Flow
    from nbflow._record.run import Run

__all__ = ["aanswer", "answer"]


def answer(flow: Flow, frame: pd.DataFrame, answers: Mapping[Any, Any], /) -> pd.DataFrame:
    """Answer the questions of paused rows and resume them; blocking. Returns ``frame``, updated in place.

    ``answers`` maps a row (an index label, else a position) to its answer (checked against the
    question's options or schema before anything runs). See ``nbflow._batch.paused``.
    """
    todo = _check(flow, frame, answers)
    return call_blocking(
        lambda: _resume_all(flow, frame, todo),
        f"nbflow-answer-{flow.name}",
        lambda exc: RunInterrupted(todo[0][1]),
        lambda: frame,
    )


async def aanswer(flow: Flow, frame: pd.DataFrame, answers: Mapping[Any, Any], /) -> pd.DataFrame:
    """Like ``flow.answer`` on the running event loop."""
    return await _resume_all(flow, frame, _check(flow, frame, answers))


def _check(flow: Flow, frame: pd.DataFrame, answers: Mapping[Any, Any]) -> list[tuple[Any, Run, Any]]:
    from nbflow._engine.ask import validate_answer

    if not isinstance(answers, Mapping) or not answers:
        raise BatchError(
            "flow.answer(frame, answers): answers is a dict {row: answer} naming paused rows, e.g. "
            "flow.answer(df, {3: 'approve'})"
        )
    accessor = NbflowAccessor(frame)
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
    return todo


def _paused_labels(frame: pd.DataFrame) -> str:
    labels = list(frame.index[frame["status"] == "paused"])
    return ", ".join(repr(x) for x in labels[:10]) + (" ..." if len(labels) > 10 else "") if labels else "none"


async def _resume_all(flow: Flow, frame: pd.DataFrame, todo: list[tuple[Any, Run, Any]]) -> pd.DataFrame:
    async def one(run: Run, value: Any) -> None:
        await run.aresume(value)

    async with anyio.create_task_group() as tg:
        for _, run, value in todo:
            tg.start_soon(one, run, value)
    outputs = list(frame.attrs.get("outputs") or [])
    archive = frame.attrs.get("nbflow_runs")
    store_path = frame.attrs.get("store") or (archive.store if isinstance(archive, RunArchive) else None)
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
            )
