"""Every error nbflow raises on purpose.

The tree::

    NbflowError                        base of everything below
    ├── FlowDefinitionError (ValueError)   a node was declared wrongly (bad name, *args, ...)
    ├── GraphError (ValueError)            the flow cannot run as wired; raised before anything runs
    │   ├── CycleError                     .cycle: the path, first node repeated at the end
    │   ├── UnknownNodeError (KeyError)    a target/override/reference names no node
    │   ├── MissingInputError              .missing: input name -> nodes that need it
    │   └── UnknownInputError              .names: inputs passed that no node takes
    ├── TypeValidationError (TypeError)    a value does not fit a type hint; names node and parameter
    ├── NodeTimeoutError (TimeoutError)    a node attempt ran over its timeout=; .node, .timeout, .attempt
    ├── NodeOutputError (LookupError)      asked for the output of a node that produced none
    ├── RunFailedError (RuntimeError)      raise_for_status() on a run that did not succeed
    ├── RoutingError (ValueError)          a router chose a branch that does not exist
    ├── MapItemError (RuntimeError)        an item of a map failed (errors="terminate"); .index
    ├── LoopLimitError (RuntimeError)      a loop reached max_iterations with on_max="fail"
    ├── SubflowFailedError (RuntimeError)  a sub-flow run failed; .run is its record
    ├── StateTransitionError (RuntimeError)  the engine tried an illegal state change (a bug)
    ├── RunnerError (RuntimeError)         a run was driven from the wrong place (e.g. start() without a loop)
    ├── BatchError (ValueError)            a batch request cannot run (rows, columns=, grid=, options)
    │   └── MissingColumnError             .missing: flow input -> nodes needing it; no column feeds it
    ├── ResumeConflictError (RuntimeError) resuming a run that is not paused, or a question already answered
    ├── AnswerError (ValueError)           an answer does not fit the question's options or schema
    ├── QuestionExpiredError (TimeoutError)  nf.ask(timeout=) passed with no answer and no default
    ├── StoreError (RuntimeError)          a store file is missing, locked, corrupt, a value cannot be stored,
    │                                      or a batch clashes with one already stored
    ├── ConfigError (ValueError)           a setting of nbflow.config got a value it cannot take
    ├── ProcessNodeError (RuntimeError)    an executor="process" node could not run in its worker
    │                                      (inputs/output not picklable, the worker died); .node
    ├── InputMutationError (RuntimeError)  a node changed a value it received (nf.config.check_mutation); .node
    └── ScorerError (ValueError)           a scorer cannot score (a judge answered off-format, a bad rubric)

    RunInterrupted (KeyboardInterrupt)     a blocking run was interrupted; .run holds the record
    BatchInterrupted (KeyboardInterrupt)   a batch was interrupted; .frame holds every finished row

Every message names the node or parameter concerned and says how to fix the problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._record.run import Run

__all__ = [
    "RUN_OPTIONS",
    "AnswerError",
    "BatchError",
    "BatchInterrupted",
    "ConfigError",
    "CycleError",
    "FlowDefinitionError",
    "GraphError",
    "InputMutationError",
    "LoopLimitError",
    "MapItemError",
    "MissingColumnError",
    "MissingInputError",
    "NbflowError",
    "NbflowWarning",
    "NodeOutputError",
    "NodeStillRunningWarning",
    "NodeTimeoutError",
    "ProcessNodeError",
    "QuestionExpiredError",
    "ResourceError",
    "ResumeConflictError",
    "RoutingError",
    "RunFailedError",
    "RunInterrupted",
    "RunnerError",
    "ScorerError",
    "StateTransitionError",
    "StoreError",
    "SubflowFailedError",
    "TypeValidationError",
    "UnknownInputError",
    "UnknownNodeError",
]


def short_repr(value: Any) -> str:
    """One line for a value in a message: a table or array by its shape ("DataFrame 11380×68"), else its repr."""
    kind = type(value)
    shape = getattr(value, "shape", None)
    if kind.__module__.split(".")[0] in ("pandas", "numpy", "polars", "pyarrow") and isinstance(shape, tuple):
        return f"{kind.__name__} {'×'.join(str(n) for n in shape) or 'scalar'}"
    shown = repr(value).replace("\n", " ")
    return shown[:77] + "..." if len(shown) > 80 else shown


def _suggest(name: str, candidates: Iterable[str]) -> str:
    import difflib  # here: only an error message needs it

    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class NbflowWarning(UserWarning):
    """Something works, but not as well as it could (e.g. Graphviz missing)."""


class NbflowError(Exception):
    """Base class of every error nbflow raises on purpose."""


class NodeStillRunningWarning(NbflowWarning):
    """A run was interrupted or cancelled while a node ran in a worker thread, which Python cannot stop."""


class ProcessNodeError(NbflowError, RuntimeError):
    """An ``executor="process"`` node could not run in its worker process; ``.node`` names it."""

    def __init__(self, node: str, message: str) -> None:
        super().__init__(f"node {node!r}: {message}")
        self.node = node


class InputMutationError(NbflowError, RuntimeError):
    """A node changed a value it received (found by ``nf.config.check_mutation``); ``.node`` names it."""

    def __init__(self, node: str, param: str, kind: str) -> None:
        super().__init__(
            f"node {node!r} changed its input {param!r} ({kind}) in place; other nodes and the cache see "
            f"the same object. Work on a copy inside the node (e.g. {param} = {param}.copy()) and return it"
        )
        self.node = node
        self.param = param


class FlowDefinitionError(NbflowError, ValueError):
    """A node was declared in a way nbflow cannot run."""


class GraphError(NbflowError, ValueError):
    """The flow cannot run as wired. Raised before any node runs."""


class CycleError(GraphError):
    """The nodes form a cycle. ``cycle`` is the path, its first node repeated at the end."""

    def __init__(self, cycle: Sequence[str]) -> None:
        self.cycle = tuple(cycle)
        path = " -> ".join(self.cycle)
        super().__init__(
            f"the flow has a cycle: {path}. A node cannot depend on its own output; "
            f"rename a parameter or pass inputs={{...}} to break the loop "
            f"(for repetition use a loop node instead)."
        )


class UnknownNodeError(GraphError, KeyError):
    """A target, override or reference names a node that the flow does not have."""

    def __init__(self, name: str, known: Iterable[str], role: str = "node") -> None:
        self.name = name
        known = list(known)
        super().__init__(
            f"{role} {name!r} is not a node of this flow{_suggest(name, known)}; "
            f"known nodes: {', '.join(sorted(known)) or '(none)'}"
        )

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


RUN_OPTIONS = ("concurrency", "keep", "on_event", "overrides", "save", "show", "store", "targets", "timeout", "trace")
"""The keyword options of ``run``/``arun``/``start``: a flow input with one of these names cannot be passed
as a keyword (``run(store=...)`` is the checkpoint store); it goes in the inputs dict, ``run({"store": ...})``."""


class MissingInputError(GraphError):
    """Required flow inputs were not passed. ``missing`` maps each input to the nodes needing it.

    ``how`` is the sentence saying how to pass them (the CLI words it its own way).
    """

    def __init__(self, missing: Mapping[str, Sequence[str]], hints: Mapping[str, str] | None = None) -> None:
        self.missing = {k: tuple(v) for k, v in missing.items()}
        hints = hints or {}
        parts = []
        for name, nodes in self.missing.items():
            who = ", ".join(repr(n) for n in nodes)
            parts.append(f"{name!r} (needed by {who}){hints.get(name, '')}")
        clash = [k for k in self.missing if k in RUN_OPTIONS]
        if clash:  # run(store=...) would be the option, never the input: the dict is the only way
            given = ", ".join(f"{k!r}: ..." for k in self.missing)
            named = ", ".join(f"{k}=" for k in clash)
            self.how = (
                f"Pass them in the inputs dict, run({{{given}}}): {named} {'is' if len(clash) == 1 else 'are'} "
                f"run()'s own option{'s' if len(clash) > 1 else ''}, so a keyword never reaches the node"
            )
        else:
            self.how = f"Pass {', '.join(f'{k}=...' for k in self.missing)} to run()"
        super().__init__(
            f"missing required input{'s' if len(parts) > 1 else ''}: {'; '.join(parts)}. "
            f"{self.how}, or give the parameter a default."
        )


class UnknownInputError(GraphError):
    """Inputs were passed that no node of the flow takes."""

    def __init__(self, names: Sequence[str], known: Iterable[str]) -> None:
        self.names = tuple(names)
        known = list(known)
        parts = [f"{n!r}{_suggest(n, known)}" for n in self.names]
        super().__init__(
            f"unknown input{'s' if len(parts) > 1 else ''}: {', '.join(parts)}; "
            f"this flow takes: {', '.join(sorted(known)) or '(no inputs)'}"
        )


class TypeValidationError(NbflowError, TypeError):
    """A value does not fit a node's type hint.

    ``node`` is the node, ``parameter`` the parameter name (or ``"return"`` for the output),
    ``expected`` the hint as text and ``value`` the offending value.
    """

    def __init__(self, node: str, parameter: str, expected: str, value: Any, detail: str = "") -> None:
        self.node = node
        self.parameter = parameter
        self.expected = expected
        self.value = value
        shown = short_repr(value)
        where = f"node {node!r} returned" if parameter == "return" else f"node {node!r}, parameter {parameter!r}, got"
        fix = (
            "fix the function or its return annotation"
            if parameter == "return"
            else "pass a value of that type, fix the upstream node, or change the hint"
        )
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"{where} {shown} ({type(value).__name__}), expected {expected}{extra}; "
            f"{fix} (or turn validation off with Flow(..., validate=False))"
        )


class NodeTimeoutError(NbflowError, TimeoutError):
    """A node attempt ran longer than its ``timeout=`` and was cancelled.

    ``node`` is the node, ``timeout`` the limit in seconds, ``attempt`` the attempt number (1-based).
    It is a ``TimeoutError``, so the default retry policy retries it.
    """

    def __init__(self, node: str, timeout: float, attempt: int = 1) -> None:
        self.node = node
        self.timeout = timeout
        self.attempt = attempt
        super().__init__(
            f"node {node!r} timed out: attempt {attempt} ran longer than its timeout={timeout:g}s and was "
            f"cancelled; raise the node's timeout=, make it faster, or retry it with retry=nf.Retry(...)"
        )

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (e.g. into a run store) with its fields
        return (type(self), (self.node, self.timeout, self.attempt))


class NodeOutputError(NbflowError, LookupError):
    """The output of a node was asked for, but the node produced none."""


class RunFailedError(NbflowError, RuntimeError):
    """A run did not succeed. ``run`` is the record; the first node error is the ``__cause__``."""

    def __init__(self, message: str, run: Run) -> None:
        self.run = run
        super().__init__(message)


class RoutingError(NbflowError, ValueError):
    """A router returned a branch name that does not exist."""

    def __init__(self, node: str, value: Any, branches: Sequence[str]) -> None:
        self.node = node
        self.value = value
        self.branches = tuple(branches)
        names = ", ".join(repr(b) for b in self.branches) or "(none declared)"
        hint = _suggest(value, self.branches) if isinstance(value, str) else ""
        super().__init__(
            f"router {node!r} chose {value!r}, which is not one of its branches{hint}: {names}; "
            f"return one of them, or declare the branch with @flow.router(branches=[...])"
        )


class MapItemError(NbflowError, RuntimeError):
    """An item of a map node failed and the map's errors mode is "terminate"."""

    def __init__(self, node: str, index: int, total: int, error: BaseException) -> None:
        self.node = node
        self.index = index
        super().__init__(
            f"map node {node!r}: item {index} of {total} failed with {type(error).__name__}: {error}; "
            f"the other items were cancelled (use errors='continue' or 'drop' to keep going)"
        )


class LoopLimitError(NbflowError, RuntimeError):
    """A loop node reached ``max_iterations`` without its condition holding (``on_max="fail"``)."""

    def __init__(self, node: str, limit: int, last: Any) -> None:
        self.node = node
        self.limit = limit
        self.last = last
        shown = repr(last)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        super().__init__(
            f"loop node {node!r} reached max_iterations={limit} without until() holding (last output {shown}); "
            f"raise the limit, relax the condition, or use on_max='return' to keep the last output"
        )


class SubflowFailedError(NbflowError, RuntimeError):
    """A sub-flow's run did not succeed. ``run`` is the sub-flow's record."""

    def __init__(self, node: str, run: Run) -> None:
        self.node = node
        self.run = run
        failed = [f"{n!r} ({type(e).__name__}: {e})" for n, e in run.errors.items()]
        super().__init__(
            f"sub-flow node {node!r} (flow {run.flow!r}) {run.status.value}: failed nodes {', '.join(failed) or 'none'}; "
            f"see run.record({node + '.<node>'!r}) for details"
        )


class StateTransitionError(NbflowError, RuntimeError):
    """An illegal state change was attempted (this is a bug in nbflow; please report it)."""


class RunnerError(NbflowError, RuntimeError):
    """A run was driven from a place where that way of running cannot work."""


class ConfigError(NbflowError, ValueError):
    """A setting of ``nbflow.config`` got a value it cannot take; the message names it and the fix."""


class ResumeConflictError(NbflowError, RuntimeError):
    """Resuming a run that is not paused, or answering a question that was already answered.

    Like an HTTP 409: nothing was changed. Two racing resumes: exactly one wins.
    """


class AnswerError(NbflowError, ValueError):
    """An answer does not fit the question's options or schema. Nothing was changed."""


class QuestionExpiredError(NbflowError, TimeoutError):
    """A question asked with ``nf.ask(..., timeout=)`` and no ``default=`` was not answered in time.

    Fails the node that asked it (never retried: asking again cannot help). ``.key`` is the question.
    """

    def __init__(self, key: str, node: str, prompt: str, timeout: float, asked_at: float) -> None:
        import datetime

        self.key = key
        self.node = node
        when = datetime.datetime.fromtimestamp(asked_at, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        super().__init__(
            f"node {node!r}: question {key!r} ({prompt!r}) was not answered within its timeout={timeout:g}s "
            f"(asked {when}), so it expired and the node fails; give nf.ask(..., default=...) to go on "
            f"without an answer, or a longer timeout="
        )


class StoreError(NbflowError, RuntimeError):
    """A store file is missing, locked or corrupt, or a value cannot be stored. Nothing was overwritten."""


class ResourceError(NbflowError, RuntimeError):
    """A ``@flow.resource`` factory raised: the nodes needing it fail with this (retried by their policies).

    ``resource`` is the resource's name; the factory's own exception is the ``__cause__`` (its
    traceback is in the node's record).
    """

    def __init__(self, message: str, resource: str = "") -> None:
        super().__init__(message)
        self.resource = resource

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.resource))


class RunInterrupted(KeyboardInterrupt):
    """A blocking run was interrupted (Ctrl-C or the kernel's stop button).

    ``run`` is the run record: every node that finished keeps its output, the others are CANCELLED.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        super().__init__(f"run {run.run_id} of flow {run.flow!r} was interrupted; its record is in .run")


class ScorerError(NbflowError, ValueError):
    """A scorer of ``nbflow.scorers`` cannot score: a judge answered off-format, a rubric names an unknown field."""


class BatchError(NbflowError, ValueError):
    """A batch request cannot run: bad rows, ``columns=``, ``grid=`` or options. Raised before any row runs."""


class MissingColumnError(BatchError):
    """A required flow input has no column in the rows. ``missing`` maps each input to the nodes needing it."""

    def __init__(self, missing: Mapping[str, Sequence[str]], columns: Sequence[str]) -> None:
        self.missing = {k: tuple(v) for k, v in missing.items()}
        self.columns = tuple(columns)
        parts = []
        for name, nodes in self.missing.items():
            who = ", ".join(repr(n) for n in nodes)
            import difflib

            close = difflib.get_close_matches(name, list(self.columns), n=1)
            col = close[0] if close else (self.columns[0] if self.columns else "your_column")
            parts.append(
                f"flow input {name!r} (needed by {who}) has no column; add a {name!r} column "
                f"or map one to it with columns={{{col!r}: {name!r}}}"
            )
        have = ", ".join(repr(c) for c in self.columns) or "(none)"
        super().__init__(f"{'; '.join(parts)}. The rows have columns: {have}")


class BatchInterrupted(KeyboardInterrupt):
    """A batch was interrupted (Ctrl-C, the kernel's stop button, or a KeyboardInterrupt in a row).

    ``frame`` is the result DataFrame: every finished row is filled in, rows that were running are
    ``cancelled`` and rows never started are ``pending``.
    """

    def __init__(self, frame: pd.DataFrame, flow: str = "flow") -> None:
        self.frame = frame
        status: Any = frame["status"] if "status" in frame.columns else ()
        done = sum(1 for s in status if s in ("succeeded", "failed"))
        super().__init__(
            f"batch of flow {flow!r} was interrupted: {done} of {len(frame)} rows finished; "
            f"the partial results are in .frame (rows not finished are 'cancelled' or 'pending')"
        )
