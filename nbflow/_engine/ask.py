"""Pausing a run for a person: the question a node asks, and how the engine learns of it.

A node that calls ``nf.ask()`` with no answer yet raises ``PauseSignal`` (a BaseException, so user
code's ``except Exception`` cannot swallow it). The node is PAUSED, the rest of the run goes on until
nothing else can progress, then the run is PAUSED. Resuming re-runs the paused node; its ``ask()``
then returns the stored answer (the node's code before ``ask()`` runs again: keep it idempotent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbflow._record.run import Run
from collections.abc import Iterable

from nbflow._core.errors import AnswerError, FlowDefinitionError, QuestionExpiredError, RunnerError
from nbflow._core.missing import MISSING
from nbflow._core.question import Question
from nbflow._core.records import record
from nbflow._dsl.options import check_timeout

__all__ = [
    "ACTIVE",
    "AskContext",
    "PauseSignal",
    "PinnedNode",
    "WorkerContext",
    "ask",
    "current",
    "expire",
    "validate_answer",
]


class PauseSignal(BaseException):
    """Raised by ``nf.ask()`` to pause its node. Never seen by users: the engine catches it."""

    def __init__(self, question: Question) -> None:
        self.question = question
        super().__init__(question.key)


@record()
class AskContext:
    """Where ``nf.ask()`` is being called from: the top-level run, the node's path, its record."""

    root: Run
    path: str
    record: Any

    def next_key(self) -> str:
        # Keys count the asks of one execution of the node: a resumed node asks again from #0.
        slot = (self.path, len(self.record.attempts))
        n = self.root._ask_counts.get(slot, 0)
        self.root._ask_counts[slot] = n + 1
        return f"{self.path}#{n}"


class WorkerContext:
    """What a scheduler worker task is running now (one attribute write per node, no context var).

    It is also what ``CURRENT_NODE`` holds for the worker's nodes (``nf.usage``): an object whose
    ``node`` is the record being run (``PinnedNode`` holds one record for good).
    """

    __slots__ = ("armed", "breathing", "i", "run", "task")

    def __init__(self, run: Run) -> None:
        self.run = run
        self.i = -1  # the index of the node being run in the run's columns
        self.task: Any = None
        self.armed = False  # the scheduler's check for a waiting node is pending (Scheduler.arm)
        self.breathing = False  # the worker lets the loop turn between nodes (not waiting in one)

    @property
    def node(self) -> Any:
        """The NodeRecord being run (made on first read)."""
        return None if self.i < 0 else self.run._c.rec(self.i)

    def ask_context(self) -> AskContext:
        return AskContext(self.run._root, self.run._path + self.node.name, self.node)


class PinnedNode:
    """``CURRENT_NODE`` for one node for good (the policy path: a call abandoned at its timeout
    may still report usage from its thread after the worker has moved on)."""

    __slots__ = ("node", "run", "task")

    def __init__(self, node: Any, run: Run) -> None:
        import asyncio

        self.node = node
        self.run = run
        self.task = asyncio.current_task()  # its loop: where nf.stream from the node's thread tells the view


# The task running a node -> where it is; read only by nf.ask(), so the hot path pays one dict
# write per worker task, not per node.
ACTIVE: dict[Any, WorkerContext | AskContext] = {}


def current() -> AskContext | None:
    import asyncio

    try:
        task = asyncio.current_task()
    except RuntimeError:
        return None
    found = ACTIVE.get(task)
    if found is None:
        return None
    return found if isinstance(found, AskContext) else found.ask_context()


async def ask(
    prompt: str,
    *,
    data: Any = None,
    options: Iterable[str] | None = None,
    schema: Any = None,
    timeout: float | None = None,
    default: Any = MISSING,
) -> Any:
    """Ask a person and return their answer; the first time, this pauses the run.

    ``options`` restricts the answer to one of the given strings; ``schema`` (a pydantic model or any
    type pydantic can validate) makes the answer a validated form. ``data`` is shown with the
    question (and stored with the checkpoint, so never put secrets in it).

    The node is PAUSED and the run becomes PAUSED once nothing else can progress. Answer with
    ``run.resume(answer)`` (or in the notebook widget); the node then runs again from its start and
    this call returns the answer. Code before ``ask()`` therefore runs twice: keep it idempotent.

    ``timeout`` (seconds, counted on the wall clock from when the question was first asked, and kept
    in checkpoints) makes it expire: then this call returns ``default`` (it must fit ``options`` /
    ``schema``), or, with no default, the node fails with ``nf.QuestionExpiredError``. A paused run
    goes on by itself at the deadline while its process lives; a run resumed after it (e.g. loaded from
    a store) expires the question then. An answer given after the deadline is refused.
    """
    ctx = current()
    if ctx is None:
        raise RunnerError(
            "nf.ask() pauses the node that calls it, so it only works inside an async node of a "
            "running flow (await nf.ask(...) in a function decorated with @flow.node)"
        )
    key = ctx.next_key()
    root = ctx.root
    if key in root.answers:
        return root.answers[key]
    opts = tuple(options) if options is not None else None
    if opts is not None and not all(isinstance(o, str) for o in opts):
        raise TypeError(f"nf.ask(): options must be strings, got {opts!r}")
    check_timeout(timeout, f"node {ctx.path!r}: nf.ask(timeout=...)")
    if default is not MISSING and timeout is None:
        raise FlowDefinitionError(
            f"node {ctx.path!r}: nf.ask(default=...) is what the node gets once the question expires, so it "
            f"needs timeout= (seconds); add timeout=..., or drop default="
        )
    earlier = root.pending.get(key)  # asked before this resume: it expires counting from then
    question = Question(
        key=key,
        node=ctx.path,
        prompt=str(prompt),
        data=data,
        options=opts,
        schema=schema,
        timeout=None if timeout is None else float(timeout),
        default=default,
        **({"asked_at": earlier.asked_at} if earlier is not None else {}),
    )
    if default is not MISSING:
        try:
            validate_answer(question, default)
        except AnswerError as exc:
            raise AnswerError(f"node {ctx.path!r}: nf.ask(default={default!r}) does not fit: {exc}") from None
    if question.expired():
        return expire(root, question)
    root.pending[key] = question
    raise PauseSignal(question)


def expire(root: Run, question: Question) -> Any:
    """An expired question: its default is recorded as its answer and returned, or its node fails."""
    root.pending.pop(question.key, None)
    if question.default is MISSING:
        assert question.timeout is not None
        raise QuestionExpiredError(question.key, question.node, question.prompt, question.timeout, question.asked_at)
    root.answers[question.key] = question.default
    return question.default


def validate_answer(question: Question, answer: Any) -> Any:
    """The answer checked against the question's options or schema (AnswerError if it does not fit)."""
    if question.options is not None:
        if answer not in question.options:
            raise AnswerError(
                f"question {question.key!r} ({question.prompt!r}) takes one of "
                f"{', '.join(repr(o) for o in question.options)}, got {answer!r}; nothing was changed"
            )
        return answer
    if question.schema is not None:
        from pydantic import TypeAdapter, ValidationError

        try:
            return TypeAdapter(question.schema).validate_python(answer)
        except ValidationError as exc:
            raise AnswerError(
                f"question {question.key!r} ({question.prompt!r}): the answer does not fit "
                f"{getattr(question.schema, '__name__', question.schema)}: {exc.errors()[0]['msg']} "
                f"at {'.'.join(str(x) for x in exc.errors()[0]['loc']) or 'top level'}; nothing was changed"
            ) from None
    return answer
