"""nbflow: notebook-native workflows. Decorate functions as nodes, run them in the kernel's loop."""

from ._missing import MISSING as MISSING
from ._missing import Missing as Missing
from .cache import NodeCache as NodeCache
from .checkpoint import CheckpointStore as CheckpointStore
from .checkpoint import StoredError as StoredError
from .checkpoint import load_run as load_run
from .clock import SYSTEM_CLOCK as SYSTEM_CLOCK
from .clock import Clock as Clock
from .clock import FakeClock as FakeClock
from .clock import SystemClock as SystemClock
from .config import config as config
from .control import FirstOf as FirstOf
from .control import ItemFailed as ItemFailed
from .control import Loop as Loop
from .control import Map as Map
from .control import first_of as first_of
from .control import optional as optional
from .dsl import Flow as Flow
from .engine.events import Event as Event
from .engine.events import NodeCancelled as NodeCancelled
from .engine.events import NodeEvent as NodeEvent
from .engine.events import NodeFailed as NodeFailed
from .engine.events import NodePaused as NodePaused
from .engine.events import NodeRetrying as NodeRetrying
from .engine.events import NodeSkipped as NodeSkipped
from .engine.events import NodeStarted as NodeStarted
from .engine.events import NodeSucceeded as NodeSucceeded
from .engine.events import NodeUsage as NodeUsage
from .engine.events import RunFinished as RunFinished
from .engine.events import RunPaused as RunPaused
from .engine.events import RunStarted as RunStarted
from .engine.pause import Question as Question
from .engine.states import NodeStatus as NodeStatus
from .engine.states import RunStatus as RunStatus
from .errors import AnswerError as AnswerError
from .errors import BatchError as BatchError
from .errors import BatchInterrupted as BatchInterrupted
from .errors import ConfigError as ConfigError
from .errors import CycleError as CycleError
from .errors import FlowDefinitionError as FlowDefinitionError
from .errors import GraphError as GraphError
from .errors import LoopLimitError as LoopLimitError
from .errors import MapItemError as MapItemError
from .errors import MissingColumnError as MissingColumnError
from .errors import MissingInputError as MissingInputError
from .errors import NbflowError as NbflowError
from .errors import NbflowWarning as NbflowWarning
from .errors import NodeOutputError as NodeOutputError
from .errors import NodeTimeoutError as NodeTimeoutError
from .errors import ResumeConflictError as ResumeConflictError
from .errors import RoutingError as RoutingError
from .errors import RunFailedError as RunFailedError
from .errors import RunInterrupted as RunInterrupted
from .errors import RunnerError as RunnerError
from .errors import StateTransitionError as StateTransitionError
from .errors import StoreError as StoreError
from .errors import SubflowFailedError as SubflowFailedError
from .errors import TypeValidationError as TypeValidationError
from .errors import UnknownInputError as UnknownInputError
from .errors import UnknownNodeError as UnknownNodeError
from .hitl import ask as ask
from .limits import Limit as Limit
from .policies import Default as Default
from .policies import ErrorInfo as ErrorInfo
from .policies import Failed as Failed
from .policies import Retry as Retry
from .policies import is_transient as is_transient
from .progress import BatchProgress as BatchProgress
from .run import Attempt as Attempt
from .run import ItemRecord as ItemRecord
from .run import Iteration as Iteration
from .run import NodeRecord as NodeRecord
from .run import Run as Run
from .runner import RunHandle as RunHandle
from .secret import REDACTED as REDACTED
from .secret import Secret as Secret
from .store import BatchStore as BatchStore
from .summary import summarize as summarize
from .usage import usage as usage

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
    "NodeSucceeded",
    "NodeTimeoutError",
    "NodeUsage",
    "Question",
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
    "ask",
    "config",
    "first_of",
    "is_transient",
    "load_run",
    "optional",
    "summarize",
    "usage",
]
