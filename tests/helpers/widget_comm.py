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
