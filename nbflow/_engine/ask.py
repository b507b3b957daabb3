"""Pausing a run for a person: the question a node asks, and how the engine learns of it.

A node that calls ``nf.ask()`` with no answer yet raises ``PauseSignal`` (a BaseException, so user
code's ``except Exception`` cannot swallow it). The node is PAUSED, the rest of the run goes on until
nothing else can progress, then the run is PAUSED. Resuming re-runs the paused node; its ``ask()``
then returns the stored answer (the node's code before ``ask()`` runs again: keep it idempotent).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbflow._record.run import Run
from collections.abc import Iterable

from nbflow._core.errors import AnswerError, RunnerError
from nbflow._core.question import Question

__all__ = ["ACTIVE", "AskContext", "PauseSignal", "WorkerContext", "ask", "current", "in_thread", "validate_answer"]


class PauseSignal(BaseException):
    """Raised by ``nf.ask()`` to pause its node. Never seen by users: the engine catches it."""

    def __init__(self, question: Question) -> None:
        self.question = question
        super().__init__(question.key)


@dataclass(slots=True)
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
    """What a scheduler worker task is running now (one attribute write per node, no context var)."""

    __slots__ = ("node", "run", "task")

    def __init__(self, run: Run) -> None:
        self.run = run
        self.node: Any = None  # the NodeRecord being run
        self.task: Any = None

    def ask_context(self) -> AskContext:
        return AskContext(self.run._root, self.run._path + self.node.name, self.node)


# The task running a node -> where it is; read only by nf.ask(), so the hot path pays one dict
# write per worker task, not per node.
ACTIVE: dict[Any, WorkerContext | AskContext] = {}


# Set only inside a node's worker thread, where no task is running (nf.usage() in a sync node).
_IN_THREAD: ContextVar[AskContext | None] = ContextVar("nbflow_node_in_thread", default=None)


def current() -> AskContext | None:
    import asyncio

    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop in this thread: a sync node in a worker thread, or not in a node
        return _IN_THREAD.get()
    found = ACTIVE.get(task)
    if found is None:
        return None
    return found if isinstance(found, AskContext) else found.ask_context()


def in_thread(func: Callable[..., Any], kwargs: dict[str, Any]) -> Callable[[], Any]:
    """``func(**kwargs)``, to be called in a worker thread, knowing which node it runs for (for nf.usage)."""
    ctx = current()

    def call() -> Any:
        token = _IN_THREAD.set(ctx)
        try:
            return func(**kwargs)
        finally:
            _IN_THREAD.reset(token)

    return call


async def ask(
    prompt: str,
    *,
    data: Any = None,
    options: Iterable[str] | None = None,
    schema: Any = None,
) -> Any:
    """Ask a person and return their answer; the first time, this pauses the run.

    ``options`` restricts the answer to one of the given strings; ``schema`` (a pydantic model or any
    type pydantic can validate) makes the answer a validated form. ``data`` is shown with the
    question (and stored with the checkpoint, so never put secrets in it).

    The node is PAUSED and the run becomes PAUSED once nothing else can progress. Answer with
    ``run.resume(answer)`` (or in the notebook widget); the node then runs again from its start and
    this call returns the answer. Code before ``ask()`` therefore runs twice: keep it idempotent.
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
    question = Question(key=key, node=ctx.path, prompt=str(prompt), data=data, options=opts, schema=schema)
    root.pending[key] = question
    raise PauseSignal(question)


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
