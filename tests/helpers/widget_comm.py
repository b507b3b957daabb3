"""A recording comm for widget tests (the approach of ipywidgets' own tests): no kernel, no browser."""

from __future__ import annotations

from typing import Any, ClassVar

import comm
from comm.base_comm import BaseComm


class RecordingComm(BaseComm):
    """Keeps every message a widget would send to the front end."""

    log: ClassVar[list[tuple[str, str, dict[str, Any] | None]]] = []

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        RecordingComm.log.append((self.comm_id, msg_type, data))


def install(monkeypatch: Any) -> list[tuple[str, str, dict[str, Any] | None]]:
    RecordingComm.log = []
    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: RecordingComm(*a, **k))
    return RecordingComm.log


def updates(log: list[tuple[str, str, dict[str, Any] | None]], comm_id: str) -> list[dict[str, Any]]:
    """The state updates sent for one widget."""
    return [d["state"] for cid, t, d in log if cid == comm_id and t == "comm_msg" and d and d.get("method") == "update"]


def frontend_sets(widget: Any, **state: Any) -> None:
    """Simulate the browser changing ``state`` (as a click or a selection does)."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def frontend_sends(widget: Any, **content: Any) -> None:
    """Simulate the browser's ``model.send(content)`` (a custom message: how the run view reports clicks)."""
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def customs(log: list[tuple[str, str, dict[str, Any] | None]], comm_id: str) -> list[dict[str, Any]]:
    """The custom messages sent to one widget's front end (``widget.send(content)``)."""
    return [
        d["content"] for cid, t, d in log if cid == comm_id and t == "comm_msg" and d and d.get("method") == "custom"
    ]


def folded_nodes(log: list[tuple[str, str, dict[str, Any] | None]], comm_id: str) -> list[dict[str, Any]]:
    """The run view's node states as its front end sees them after each message (run_view.js ``initialize``):
    the state sent with the model (opening message, updates), then each numbered delta folded in."""
    seen: list[dict[str, Any]] = []
    nodes: dict[str, Any] = {}
    seq = 0
    for cid, t, d in log:
        if cid != comm_id or not d:
            continue
        state = d.get("state") if t == "comm_open" or d.get("method") == "update" else None
        if state and "nodes" in state:
            nodes, seq = dict(state["nodes"]), state.get("nodes_seq", seq)
            seen.append(dict(nodes))
        content = d.get("content") if d.get("method") == "custom" else None
        if content and content.get("kind") == "nodes":
            assert content["seq"] == seq + 1 or "full" in content, f"delta {content['seq']} after {seq}: a gap"
            nodes = dict(content["full"]) if "full" in content else {**nodes, **content["delta"]}
            seq = content["seq"]
            seen.append(dict(nodes))
    return seen
