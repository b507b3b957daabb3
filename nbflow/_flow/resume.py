"""Resuming a paused run: claim it (exactly once), record the answer, run what is left."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from nbflow._core.config import config
from nbflow._core.errors import ResumeConflictError, RunnerError
from nbflow._core.missing import MISSING
from nbflow._core.registry import flow_of
from nbflow._core.secrets import REDACTED
from nbflow._core.states import NodeStatus, RunStatus
from nbflow._engine.ask import validate_answer
from nbflow._record.run import ItemRecord, NodeRecord

if TYPE_CHECKING:
    from nbflow._record.run import Run

__all__ = ["claim", "continue_run"]


def claim(run: Run, answer: Any, question: str | None, version: int | None) -> None:
    """Check and record the answer and move the run to RUNNING, atomically: one resume wins.

    Raises ResumeConflictError or AnswerError without changing anything.
    """
    if run._root is not run:
        raise ResumeConflictError(f"run {run.run_id} is part of a larger run; resume {run._root.run_id} instead")
    _check_resumable(run)  # fail before anything changes
    with run._resume_lock:
        if run.status is RunStatus.FAILED:
            _claim_failed(run, answer, question)
            return
        if run.status is RunStatus.RUNNING:
            raise ResumeConflictError(
                f"run {run.run_id} is RUNNING (here, or in another live process that owns it in its store); "
                f"there is nothing to resume until it pauses or stops - load it again then"
            )
        if run.status is not RunStatus.PAUSED:
            raise ResumeConflictError(
                f"run {run.run_id} is {run.status.name}, not PAUSED: there is nothing to resume "
                f"(was it resumed already?)"
            )
        if version is not None and version != run.pause_version:
            raise ResumeConflictError(
                f"run {run.run_id}: pause version {version} was already resumed; the run is now at "
                f"version {run.pause_version}"
            )
        key = _pick(run, answer, question)
        if key is not None and run.pending[key].expired():
            asked = run.pending[key]
            then = (
                f"the node gets its default {asked.default!r}"
                if asked.default is not MISSING
                else "the node fails (QuestionExpiredError)"
            )
            raise ResumeConflictError(
                f"run {run.run_id}: question {key!r} ({asked.prompt!r}) expired {time.time() - (asked.expires_at or 0):.0f}s "
                f"ago (timeout={asked.timeout:g}s), so the answer is refused and nothing was changed; "
                f"resume() without an answer goes on: {then}"
            )
        value = validate_answer(run.pending[key], answer) if key is not None else MISSING
        if run.store is not None:
            run.store.claim(run, key, value)  # the durable guard across processes (raises on conflict)
        if key is not None:
            run.answers[key] = value
            del run.pending[key]
        run.reason = None  # e.g. "interrupted: ...": the run goes on
        run._to(RunStatus.RUNNING)


def run_again(run: Run) -> list[str]:
    """The nodes a resumed FAILED run runs again, in run order: every FAILED node, everything downstream of
    one (what it skipped, and what ran on its failure: a failure handler, an ``on_error="continue"``
    consumer, an optional input), and any node not finished. Every other succeeded node is kept."""
    graph = flow_of(run).graph
    again: set[str] = set()
    for name, rec in run.nodes.items():
        if rec.status is NodeStatus.FAILED:
            again.add(name)
            again.update(graph.descendants(name))
        elif not rec.status.finished:
            again.add(name)
    return [n for n in run.nodes if n in again]


def _claim_failed(run: Run, answer: Any, question: str | None) -> None:
    """Resume a FAILED run: its failed nodes and what depends on them start over (the lock is held)."""
    if answer is not MISSING or question is not None:
        raise ResumeConflictError(
            f"run {run.run_id} is FAILED: it has no open question to answer; call resume() without an "
            f"answer to run its failed nodes again"
        )
    again = run_again(run)
    if not again:
        raise ResumeConflictError(f"run {run.run_id} is FAILED but has no failed or unfinished node to run again")
    graph = flow_of(run).graph
    fresh = {name: _fresh_record(run, graph, name, set(again)) for name in again}
    if run.store is not None:  # the durable guard across processes (raises on conflict)
        run.store.claim_failed(run, again, [rec for rec in fresh.values() if rec.items is not None])
    for name in again:
        run.nodes[name] = fresh[name]
    run.reason = None
    run.finished_at = None
    run._to(RunStatus.RUNNING)


def _fresh_record(run: Run, graph: Any, name: str, again: set[str]) -> NodeRecord:
    """The record node ``name`` runs again with: empty, except that a FAILED map keeps its SUCCEEDED items (they
    are not called again: a map of 500 LLM calls with 3 failures makes 3 calls) when nothing upstream of it runs
    again, so that its items and other inputs are the ones they were computed from. Its other items start over."""
    rec = NodeRecord(name)
    old = run.nodes[name]
    if old.status is NodeStatus.FAILED and old.items is not None and not (graph.ancestors([name]) - {name}) & again:
        rec.items = [item if item.status is NodeStatus.SUCCEEDED else ItemRecord(item.index) for item in old.items]
    return rec


def _pick(run: Run, answer: Any, question: str | None) -> str | None:
    if question is not None:
        if question in run.answers:
            raise ResumeConflictError(f"run {run.run_id}: question {question!r} was already answered")
        if question not in run.pending:
            raise ResumeConflictError(
                f"run {run.run_id} has no open question {question!r}; open: {', '.join(run.pending) or 'none'}"
            )
        return question
    if answer is MISSING:
        return None  # continue a run paused from outside (or re-ask the open questions)
    if len(run.pending) != 1:
        keys = ", ".join(repr(k) for k in run.pending) or "none"
        raise ResumeConflictError(
            f"run {run.run_id} has {len(run.pending)} open questions ({keys}); say which one this "
            f"answers with question=..."
            if run.pending
            else f"run {run.run_id} has no open question to answer; call resume() without an answer"
        )
    return next(iter(run.pending))


def _check_resumable(run: Run) -> Any:
    """Everything that can stop a resume, checked before anything changes; returns the plan."""
    flow = flow_of(run)
    graph = flow.graph
    missing = [n for n in run.nodes if n not in graph.nodes]
    if missing:
        raise RunnerError(
            f"run {run.run_id} has nodes the flow {flow.name!r} no longer has: {', '.join(missing)}; "
            f"restore them to resume"
        )
    secret = [k for k, v in run.inputs.items() if v is REDACTED]
    if secret:
        raise RunnerError(
            f"run {run.run_id}: input{'s' if len(secret) > 1 else ''} {', '.join(repr(k) for k in secret)} "
            f"{'were' if len(secret) > 1 else 'was'} secret and never stored; pass "
            f"{'them' if len(secret) > 1 else 'it'} again: nf.load_run(store, run_id, secrets={{...}})"
        )
    return graph.plan(run.inputs, run.targets)


def _rerun_downstream_of_unfinished(run: Run, graph: Any) -> None:
    """A finished node downstream of one not finished ran on a value the record lacks (a store file whose
    checkpoint write of the upstream node failed, resumed by an nbflow that went on without it): it runs again,
    after its upstream, instead of the scheduler meeting a finished node it cannot start (an answer given to
    its run is kept in ``run.answers``: a question asked again gets it)."""
    stale: set[str] = set()
    for name, rec in run.nodes.items():
        if not rec.status.finished and name not in stale:
            stale.update(d for d in graph.descendants(name) if d in run.nodes and run.nodes[d].status.finished)
    for name in stale:
        run.nodes[name] = NodeRecord(name)


async def continue_run(run: Run) -> Run:
    """Run what is left of a claimed run on this loop: finished nodes are not run again."""
    flow = flow_of(run)
    graph = flow.graph
    plan = graph.plan(run.inputs, run.targets)
    if list(run.nodes) != list(plan.nodes):  # loaded from a store: same records, in plan order
        run.nodes = {n: run.nodes.get(n) or NodeRecord(n) for n in plan.nodes}
    _rerun_downstream_of_unfinished(run, graph)
    run.graph = graph
    if config.trace is not None:  # a run loaded from a store has no tracer yet (off: not even an import)
        from nbflow.otel import attach

        attach(run)
    return await flow._execute(graph, plan, run, run.inputs, {}, None)
