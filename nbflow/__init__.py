"""nbflow: notebook-native workflows. Decorate functions as nodes, run them in the kernel's loop."""

# The public names are loaded on first use (PEP 562): `import nbflow` itself imports nothing heavy
# (no asyncio, anyio, sqlite3, hashlib, dataclass creation); `nf.Flow` loads what defining a flow needs,
# the first run the engine. tests/test_import_cost.py pins what `import nbflow` must not import, and
# that `_EXPORTS` below and the TYPE_CHECKING imports (what type checkers read) name the same objects.

from __future__ import annotations

import sys as _sys

TYPE_CHECKING = False  # as typing's, without importing typing (mypy, pyright and ruff know the name)
if TYPE_CHECKING:
    from nbflow._batch.compare import compare as compare
    from nbflow._batch.experiments import experiments as experiments
    from nbflow._batch.experiments import load_batch as load_batch
    from nbflow._batch.explore import explore as explore
    from nbflow._batch.summary import summarize as summarize
    from nbflow._core.calls import CallError as CallError
    from nbflow._core.calls import record_call as record_call
    from nbflow._core.calls import stream as stream
    from nbflow._core.clock import SYSTEM_CLOCK as SYSTEM_CLOCK
    from nbflow._core.clock import Clock as Clock
    from nbflow._core.clock import FakeClock as FakeClock
    from nbflow._core.clock import SystemClock as SystemClock
    from nbflow._core.config import config as config
    from nbflow._core.errors import AnswerError as AnswerError
    from nbflow._core.errors import BatchError as BatchError
    from nbflow._core.errors import BatchInterrupted as BatchInterrupted
    from nbflow._core.errors import ConfigError as ConfigError
    from nbflow._core.errors import CycleError as CycleError
    from nbflow._core.errors import FlowDefinitionError as FlowDefinitionError
    from nbflow._core.errors import GraphError as GraphError
    from nbflow._core.errors import InputMutationError as InputMutationError
    from nbflow._core.errors import LoopLimitError as LoopLimitError
    from nbflow._core.errors import MapItemError as MapItemError
    from nbflow._core.errors import MissingColumnError as MissingColumnError
    from nbflow._core.errors import MissingInputError as MissingInputError
    from nbflow._core.errors import NbflowError as NbflowError
    from nbflow._core.errors import NbflowWarning as NbflowWarning
    from nbflow._core.errors import NodeOutputError as NodeOutputError
    from nbflow._core.errors import NodeStillRunningWarning as NodeStillRunningWarning
    from nbflow._core.errors import NodeTimeoutError as NodeTimeoutError
    from nbflow._core.errors import ProcessNodeError as ProcessNodeError
    from nbflow._core.errors import QuestionExpiredError as QuestionExpiredError
    from nbflow._core.errors import ResourceError as ResourceError
    from nbflow._core.errors import ResumeConflictError as ResumeConflictError
    from nbflow._core.errors import RoutingError as RoutingError
    from nbflow._core.errors import RunFailedError as RunFailedError
    from nbflow._core.errors import RunInterrupted as RunInterrupted
    from nbflow._core.errors import RunnerError as RunnerError
    from nbflow._core.errors import ScorerError as ScorerError
    from nbflow._core.errors import StateTransitionError as StateTransitionError
    from nbflow._core.errors import StoreError as StoreError
    from nbflow._core.errors import SubflowFailedError as SubflowFailedError
    from nbflow._core.errors import TypeValidationError as TypeValidationError
    from nbflow._core.errors import UnknownInputError as UnknownInputError
    from nbflow._core.errors import UnknownNodeError as UnknownNodeError
    from nbflow._core.events import Event as Event
    from nbflow._core.events import NodeCall as NodeCall
    from nbflow._core.events import NodeCancelled as NodeCancelled
    from nbflow._core.events import NodeEvent as NodeEvent
    from nbflow._core.events import NodeFailed as NodeFailed
    from nbflow._core.events import NodePaused as NodePaused
    from nbflow._core.events import NodeRetrying as NodeRetrying
    from nbflow._core.events import NodeSkipped as NodeSkipped
    from nbflow._core.events import NodeStarted as NodeStarted
    from nbflow._core.events import NodeSucceeded as NodeSucceeded
    from nbflow._core.events import NodeUsage as NodeUsage
    from nbflow._core.events import RunFinished as RunFinished
    from nbflow._core.events import RunPaused as RunPaused
    from nbflow._core.events import RunStarted as RunStarted
    from nbflow._core.missing import MISSING as MISSING
    from nbflow._core.missing import Missing as Missing
    from nbflow._core.question import Question as Question
    from nbflow._core.score import Score as Score
    from nbflow._core.secrets import REDACTED as REDACTED
    from nbflow._core.secrets import Secret as Secret
    from nbflow._core.secrets import env as env
    from nbflow._core.states import NodeStatus as NodeStatus
    from nbflow._core.states import RunStatus as RunStatus
    from nbflow._core.usage import UsageError as UsageError
    from nbflow._core.usage import usage as usage
    from nbflow._dsl.control import FirstOf as FirstOf
    from nbflow._dsl.control import ItemFailed as ItemFailed
    from nbflow._dsl.control import Loop as Loop
    from nbflow._dsl.control import Map as Map
    from nbflow._dsl.control import first_of as first_of
    from nbflow._dsl.control import optional as optional
    from nbflow._dsl.limits import Limit as Limit
    from nbflow._dsl.policies import Default as Default
    from nbflow._dsl.policies import ErrorInfo as ErrorInfo
    from nbflow._dsl.policies import Failed as Failed
    from nbflow._dsl.policies import Retry as Retry
    from nbflow._dsl.policies import is_transient as is_transient
    from nbflow._engine.ask import ask as ask
    from nbflow._engine.kernel import RunHandle as RunHandle
    from nbflow._engine.transcript_hook import recorded as recorded
    from nbflow._flow.flow import Flow as Flow
    from nbflow._record.batch_progress import BatchProgress as BatchProgress
    from nbflow._record.openlineage import openlineage_events as openlineage_events
    from nbflow._record.run import Attempt as Attempt
    from nbflow._record.run import ItemRecord as ItemRecord
    from nbflow._record.run import Iteration as Iteration
    from nbflow._record.run import NodeRecord as NodeRecord
    from nbflow._record.run import Run as Run
    from nbflow._store.batch_store import BatchStore as BatchStore
    from nbflow._store.checkpoint import CheckpointStore as CheckpointStore
    from nbflow._store.checkpoint import load_run as load_run
    from nbflow._store.node_cache import NodeCache as NodeCache
    from nbflow._store.outputs import load as load
    from nbflow._store.stored_error import StoredError as StoredError
    from nbflow._view.report import report as report
del TYPE_CHECKING

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "compare": "nbflow._batch.compare",
    "experiments": "nbflow._batch.experiments",
    "load_batch": "nbflow._batch.experiments",
    "explore": "nbflow._batch.explore",
    "summarize": "nbflow._batch.summary",
    "CallError": "nbflow._core.calls",
    "record_call": "nbflow._core.calls",
    "stream": "nbflow._core.calls",
    "report": "nbflow._view.report",
    "SYSTEM_CLOCK": "nbflow._core.clock",
    "Clock": "nbflow._core.clock",
    "FakeClock": "nbflow._core.clock",
    "SystemClock": "nbflow._core.clock",
    "config": "nbflow._core.config",
    "AnswerError": "nbflow._core.errors",
    "BatchError": "nbflow._core.errors",
    "BatchInterrupted": "nbflow._core.errors",
    "ConfigError": "nbflow._core.errors",
    "CycleError": "nbflow._core.errors",
    "FlowDefinitionError": "nbflow._core.errors",
    "GraphError": "nbflow._core.errors",
    "InputMutationError": "nbflow._core.errors",
    "LoopLimitError": "nbflow._core.errors",
    "MapItemError": "nbflow._core.errors",
    "MissingColumnError": "nbflow._core.errors",
    "MissingInputError": "nbflow._core.errors",
    "NbflowError": "nbflow._core.errors",
    "NbflowWarning": "nbflow._core.errors",
    "NodeOutputError": "nbflow._core.errors",
    "NodeStillRunningWarning": "nbflow._core.errors",
    "NodeTimeoutError": "nbflow._core.errors",
    "ProcessNodeError": "nbflow._core.errors",
    "QuestionExpiredError": "nbflow._core.errors",
    "ResourceError": "nbflow._core.errors",
    "ResumeConflictError": "nbflow._core.errors",
    "RoutingError": "nbflow._core.errors",
    "RunFailedError": "nbflow._core.errors",
    "RunInterrupted": "nbflow._core.errors",
    "RunnerError": "nbflow._core.errors",
    "ScorerError": "nbflow._core.errors",
    "StateTransitionError": "nbflow._core.errors",
    "StoreError": "nbflow._core.errors",
    "SubflowFailedError": "nbflow._core.errors",
    "TypeValidationError": "nbflow._core.errors",
    "UnknownInputError": "nbflow._core.errors",
    "UnknownNodeError": "nbflow._core.errors",
    "Event": "nbflow._core.events",
    "NodeCall": "nbflow._core.events",
    "NodeCancelled": "nbflow._core.events",
    "NodeEvent": "nbflow._core.events",
    "NodeFailed": "nbflow._core.events",
    "NodePaused": "nbflow._core.events",
    "NodeRetrying": "nbflow._core.events",
    "NodeSkipped": "nbflow._core.events",
    "NodeStarted": "nbflow._core.events",
    "NodeSucceeded": "nbflow._core.events",
    "NodeUsage": "nbflow._core.events",
    "RunFinished": "nbflow._core.events",
    "RunPaused": "nbflow._core.events",
    "RunStarted": "nbflow._core.events",
    "MISSING": "nbflow._core.missing",
    "Missing": "nbflow._core.missing",
    "Question": "nbflow._core.question",
    "REDACTED": "nbflow._core.secrets",
    "Score": "nbflow._core.score",
    "Secret": "nbflow._core.secrets",
    "env": "nbflow._core.secrets",
    "NodeStatus": "nbflow._core.states",
    "RunStatus": "nbflow._core.states",
    "UsageError": "nbflow._core.usage",
    "usage": "nbflow._core.usage",
    "FirstOf": "nbflow._dsl.control",
    "ItemFailed": "nbflow._dsl.control",
    "Loop": "nbflow._dsl.control",
    "Map": "nbflow._dsl.control",
    "first_of": "nbflow._dsl.control",
    "optional": "nbflow._dsl.control",
    "Limit": "nbflow._dsl.limits",
    "Default": "nbflow._dsl.policies",
    "ErrorInfo": "nbflow._dsl.policies",
    "Failed": "nbflow._dsl.policies",
    "Retry": "nbflow._dsl.policies",
    "is_transient": "nbflow._dsl.policies",
    "ask": "nbflow._engine.ask",
    "RunHandle": "nbflow._engine.kernel",
    "recorded": "nbflow._engine.transcript_hook",
    "Flow": "nbflow._flow.flow",
    "BatchProgress": "nbflow._record.batch_progress",
    "openlineage_events": "nbflow._record.openlineage",
    "Attempt": "nbflow._record.run",
    "ItemRecord": "nbflow._record.run",
    "Iteration": "nbflow._record.run",
    "NodeRecord": "nbflow._record.run",
    "Run": "nbflow._record.run",
    "BatchStore": "nbflow._store.batch_store",
    "CheckpointStore": "nbflow._store.checkpoint",
    "load_run": "nbflow._store.checkpoint",
    "NodeCache": "nbflow._store.node_cache",
    "load": "nbflow._store.outputs",
    "StoredError": "nbflow._store.stored_error",
}

__all__ = [
    "MISSING",
    "REDACTED",
    "SYSTEM_CLOCK",
    "AnswerError",
    "Attempt",
    "BatchError",
    "BatchInterrupted",
    "BatchProgress",
    "BatchStore",
    "CallError",
    "CheckpointStore",
    "Clock",
    "ConfigError",
    "CycleError",
    "Default",
    "ErrorInfo",
    "Event",
    "Failed",
    "FakeClock",
    "FirstOf",
    "Flow",
    "FlowDefinitionError",
    "GraphError",
    "InputMutationError",
    "ItemFailed",
    "ItemRecord",
    "Iteration",
    "Limit",
    "Loop",
    "LoopLimitError",
    "Map",
    "MapItemError",
    "Missing",
    "MissingColumnError",
    "MissingInputError",
    "NbflowError",
    "NbflowWarning",
    "NodeCache",
    "NodeCall",
    "NodeCancelled",
    "NodeEvent",
    "NodeFailed",
    "NodeOutputError",
    "NodePaused",
    "NodeRecord",
    "NodeRetrying",
    "NodeSkipped",
    "NodeStarted",
    "NodeStatus",
    "NodeStillRunningWarning",
    "NodeSucceeded",
    "NodeTimeoutError",
    "NodeUsage",
    "ProcessNodeError",
    "Question",
    "QuestionExpiredError",
    "ResourceError",
    "ResumeConflictError",
    "Retry",
    "RoutingError",
    "Run",
    "RunFailedError",
    "RunFinished",
    "RunHandle",
    "RunInterrupted",
    "RunPaused",
    "RunStarted",
    "RunStatus",
    "RunnerError",
    "Score",
    "ScorerError",
    "Secret",
    "StateTransitionError",
    "StoreError",
    "StoredError",
    "SubflowFailedError",
    "SystemClock",
    "TypeValidationError",
    "UnknownInputError",
    "UnknownNodeError",
    "UsageError",
    "ask",
    "compare",
    "config",
    "env",
    "experiments",
    "explore",
    "first_of",
    "is_transient",
    "load",
    "load_batch",
    "load_run",
    "openlineage_events",
    "optional",
    "record_call",
    "recorded",
    "report",
    "stream",
    "summarize",
    "usage",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nbflow' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups are plain module attributes
    if "pandas" in _sys.modules:  # pandas imported after nbflow (a script): df.nbflow from the next use of nf.*
        from nbflow._batch.accessor import register_accessor

        register_accessor()
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if "pandas" in _sys.modules:  # imported before nbflow (the usual notebook): df.nbflow works at once
    from nbflow._batch.accessor import register_accessor as _register_accessor

    _register_accessor()
