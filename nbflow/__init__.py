"""nbflow: notebook-native workflows. Decorate functions as nodes, run them in the kernel's loop."""

from nbflow._batch.compare import compare as compare
from nbflow._batch.experiments import experiments as experiments
from nbflow._batch.experiments import load_batch as load_batch
from nbflow._batch.explore import explore as explore
from nbflow._batch.summary import summarize as summarize
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
from nbflow._core.errors import StateTransitionError as StateTransitionError
from nbflow._core.errors import StoreError as StoreError
from nbflow._core.errors import SubflowFailedError as SubflowFailedError
from nbflow._core.errors import TypeValidationError as TypeValidationError
from nbflow._core.errors import UnknownInputError as UnknownInputError
from nbflow._core.errors import UnknownNodeError as UnknownNodeError
from nbflow._core.events import Event as Event
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
from nbflow._flow.flow import Flow as Flow
from nbflow._record.batch_progress import BatchProgress as BatchProgress
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
from nbflow._store.pickling import StoredError as StoredError

__version__ = "0.1.0"

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
    "optional",
    "summarize",
    "usage",
]
