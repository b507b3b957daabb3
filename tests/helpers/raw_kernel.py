"""A real ipykernel driven message by message (jupyter_client), cells sent as JupyterLab sends them.

Unlike ``tests.helpers.kernel`` (nbclient), each ``execute_request`` carries the cell's id in its
metadata, and every iopub message (widget comm traffic included) can be watched as it arrives.
"""

from __future__ import annotations

import queue
import time
from typing import Any

from jupyter_client.manager import start_new_kernel

__all__ = ["Kernel"]


class Kernel:
    def __init__(self) -> None:
        self.km, self.kc = start_new_kernel(kernel_name="python3", startup_timeout=120)

    def run(self, source: str, cell_id: str | None, timeout: float = 120, on_msg: Any = None) -> str:
        """Execute ``source`` as cell ``cell_id``; its stream and error output as text.

        ``on_msg(msg)`` sees every iopub message as it arrives until the cell ends (comm messages included)."""
        content = {
            "code": source,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        msg = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id} if cell_id else {})
        self.kc.shell_channel.send(msg)
        parent = msg["header"]["msg_id"]
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = self.kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                raise AssertionError(f"cell did not finish in {timeout}s; output so far: {''.join(out)}") from None
            if on_msg is not None:  # widget updates from another thread may carry no parent: all of them
                on_msg(reply)
            if reply["parent_header"].get("msg_id") != parent:
                continue
            kind, c = reply["msg_type"], reply["content"]
            if kind == "stream":
                out.append(c["text"])
            elif kind == "error":
                out.append(f"!{c['ename']}: {c['evalue']}\n")
            elif kind in ("execute_result", "display_data"):
                out.append(c["data"].get("text/plain", "") + "\n")
            elif kind == "status" and c["execution_state"] == "idle":
                return "".join(out)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)
