"""Human in the loop: ``await nf.ask(...)`` inside a node pauses the run until someone answers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .engine.pause import PauseSignal, Question, current
from .errors import AnswerError, RunnerError

__all__ = ["ask", "validate_answer"]


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
