"""Run and node states, and the only place their transitions are allowed or refused."""

from __future__ import annotations

from enum import StrEnum

from nbflow._core.errors import StateTransitionError

__all__ = ["NODE_FINAL", "NODE_TRANSITIONS", "NodeStatus", "RunStatus", "check_node_transition", "check_run_transition"]


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in _RUN_FINAL


class NodeStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in NODE_FINAL


_RUN_FINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
NODE_FINAL = frozenset({NodeStatus.SUCCEEDED, NodeStatus.FAILED, NodeStatus.SKIPPED, NodeStatus.CANCELLED})

_RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset({RunStatus.PAUSED, *_RUN_FINAL}),
    RunStatus.PAUSED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.FAILED: frozenset({RunStatus.RUNNING}),  # resume() of a failed run re-runs its failed nodes
    RunStatus.CANCELLED: frozenset(),
}

NODE_TRANSITIONS: dict[NodeStatus, frozenset[NodeStatus]] = {
    # PENDING -> SUCCEEDED is an override (value injected without running).
    NodeStatus.PENDING: frozenset({NodeStatus.RUNNING, NodeStatus.SKIPPED, NodeStatus.CANCELLED, NodeStatus.SUCCEEDED}),
    NodeStatus.RUNNING: frozenset({NodeStatus.PAUSED, *NODE_FINAL}),
    NodeStatus.PAUSED: frozenset({NodeStatus.RUNNING, NodeStatus.CANCELLED}),
    NodeStatus.SUCCEEDED: frozenset(),
    NodeStatus.FAILED: frozenset(),
    NodeStatus.SKIPPED: frozenset(),
    NodeStatus.CANCELLED: frozenset(),
}


def check_run_transition(run_id: str, old: RunStatus, new: RunStatus) -> None:
    if new not in _RUN_TRANSITIONS[old]:
        raise StateTransitionError(f"run {run_id}: illegal transition {old.name} -> {new.name}")


def check_node_transition(node: str, old: NodeStatus, new: NodeStatus) -> None:
    if new not in NODE_TRANSITIONS[old]:
        raise StateTransitionError(f"node {node!r}: illegal transition {old.name} -> {new.name}")
