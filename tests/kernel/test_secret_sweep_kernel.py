"""The secret sweep over what reaches the browser: every message a real ipykernel sends, and every file it writes.

In a real kernel: a run and a batch whose secrets sit under upper, lower, camel and kebab names and as
an ``nf.Secret`` under a plain name, leaking through an error message, a chained traceback, a derived
output, a validation error, a sub-flow and a paused question. The run view (live, and the run's own
display) and the batch explorer are shown; every node of every run view is selected and every row of
the explorer opened and re-queried with messages sent on the shell channel as JupyterLab sends them.
Every iopub message (comm opens and updates, display data, streams, errors) and every file written is
then searched for the secrets' text: zero occurrences. The test also checks that the leak paths were
really shown (redacted), so it cannot pass by showing nothing.
"""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

pytestmark = pytest.mark.kernel

UP, LOW, CAMEL, KEBAB, PLAIN = (
    "hf_sweep_UPPER_0001",
    "hf_sweep_lower_0002",
    "hf_sweep_camel_0003",
    "hf_sweep_kebab_0004",
    "sk-sweep-plain-name-0005",
)
TEXTS = [UP, LOW, CAMEL, KEBAB, PLAIN]

ENV = {"SWEEP_UP": UP, "SWEEP_LOW": LOW, "SWEEP_CAMEL": CAMEL, "SWEEP_KEBAB": KEBAB, "SWEEP_PLAIN": PLAIN}

# The secrets come from the environment, as a user's would: the cells' code (echoed back on iopub as
# execute_input) holds none of them.
SCENARIO = """
import os
import nbflow as nf

child = nf.Flow("leak_child")

@child.node
def inner(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}

@child.node
def inner_fail(key: str) -> int:
    raise RuntimeError(f"sub-flow failed with {key}")

flow = nf.Flow("leak")

@flow.node
def derived(HF_TOKEN: str, hf_token: str, hfToken: str, config: dict, openai: str) -> dict:
    return {"headers": [f"Bearer {HF_TOKEN}", f"token={hfToken}", (hf_token,)],
            "kebab": f"x{config['hf-token']}x", "k": openai + "!"}

@flow.node
def message(HF_TOKEN: str, openai: str) -> str:
    raise PermissionError(f"invalid key {HF_TOKEN} / {openai}")

@flow.node
def chained(config: dict) -> str:
    try:
        raise KeyError(config["hf-token"])
    except KeyError as e:
        raise ValueError(f"lookup failed for {config['hf-token']}") from e

@flow.node
def validation(hfToken: str) -> int:
    return hfToken  # a str for an int: the validation message quotes the value

@flow.node
def question(hf_token: str) -> str:
    return nf.ask(f"use the key {hf_token}?", options=["yes", f"no, not {hf_token}"])

flow.add(child, name="sub", inputs={"key": "openai"})

def inputs():
    env = os.environ
    return dict(HF_TOKEN=env["SWEEP_UP"], hf_token=env["SWEEP_LOW"], hfToken=env["SWEEP_CAMEL"],
                config={"hf-token": env["SWEEP_KEBAB"]}, openai=nf.env("SWEEP_PLAIN"))
"""

CELLS = [
    SCENARIO,
    'run = flow.run(inputs(), store="runs.db", show=True)\nprint(run.status.name)',
    "run",
    'df = flow.batch([inputs() for _ in range(3)], store="batch.db", keep="all")\nprint(df["status"].tolist())',
    "nf.explore(df)",
    "handle = flow.start(inputs(), show=True)\nhandle",
    "started = await handle\nprint(started.status.name)",
]


class Kernel:
    """A real ipykernel and a client that keeps every iopub message, whatever its parent."""

    def __init__(self, cwd: Path, variables: dict[str, str] | None = None) -> None:
        env = {**os.environ, **(ENV if variables is None else variables)}
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=env)
        self.messages: list[dict[str, Any]] = []

    def drain(self, quiet: float = 1.5, limit: float = 60.0) -> None:
        """Read iopub until nothing arrived for ``quiet`` seconds."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            try:
                self.messages.append(self.kc.get_iopub_msg(timeout=quiet))
            except queue.Empty:
                return

    def execute(self, code: str, timeout: float = 180.0, expect: str = "ok") -> dict[str, Any]:
        """Run a cell; its reply's content (``expect="error"``: a cell that raises, its error shown on iopub)."""
        msg_id = self.kc.execute(code)
        end = time.monotonic() + timeout
        while True:
            assert time.monotonic() < end, f"cell did not finish: {code[:80]!r}"
            try:
                msg = self.kc.get_iopub_msg(timeout=5)
            except queue.Empty:
                continue
            self.messages.append(msg)
            if (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            ):
                break
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:  # (replies to earlier messages)
            reply = self.kc.get_shell_msg(timeout=timeout)
        assert reply["content"]["status"] == expect, f"cell: {expect} expected, got {reply['content']}"
        self.drain()
        return reply["content"]

    def send_custom(self, comm_id: str, content: dict[str, Any]) -> None:
        """What the browser's ``model.send(content)`` sends: a comm_msg on the shell channel."""
        data = {"method": "custom", "content": content}
        self.kc.shell_channel.send(self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))

    def run_views(self, *also: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The run views shown (at least the live one and a run's display), every node of each selected as a
        click in its selector does, then ``also`` sent to each."""
        views = self.comms(anywidget_id="nbflow.widgets.run_view.RunView")
        assert len(views) >= 2, "the live run view and the run's display"
        for comm_id, state in views.items():
            for node in _options(state):
                self.send_custom(comm_id, {"kind": "select", "node": node})
            for content in also:
                self.send_custom(comm_id, content)
        return views

    def explorer_rows(self, *queries: dict[str, Any], rows: int = 3) -> None:
        """Open the first ``rows`` rows of every explorer table shown, then send it each query."""
        tables = self.comms(model="AnyModel")
        assert tables, "the explorer's table"
        for comm_id in tables:
            for pos in range(rows):
                self.send_custom(comm_id, {"type": "open", "pos": pos})
            for request in queries:
                self.send_custom(comm_id, {"type": "query", **request})

    def comms(self, anywidget_id: str | None = None, model: str | None = None) -> dict[str, dict[str, Any]]:
        found = {}
        for m in self.messages:
            if m["msg_type"] != "comm_open":
                continue
            state = m["content"].get("data", {}).get("state", {})
            if (anywidget_id and state.get("_anywidget_id") == anywidget_id) or (
                model and state.get("_model_name") == model and "rows" in state
            ):
                found[m["content"]["comm_id"]] = state
        return found

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)


def _last(kernel: Kernel, comm_id: str, trait: str) -> Any:
    """The last value of ``trait`` a widget sent (its comm_open state, then its updates)."""
    value = None
    for m in kernel.messages:
        if m["content"].get("comm_id") != comm_id:
            continue
        data = m["content"].get("data", {})
        state = data.get("state", {})
        if trait in state:
            value = state[trait]
    return value


def _options(state: dict[str, Any]) -> list[str]:
    """The node paths a run view sent for its selector (one a line; a list from an older view)."""
    options = state.get("options") or []
    names = options.split("\n") if isinstance(options, str) else [o[0] if isinstance(o, list) else o for o in options]
    assert names, "the view sent its nodes"
    return names


def _text(msg: dict[str, Any]) -> str:
    parts = [json.dumps(msg["content"], default=str, ensure_ascii=False)]
    for buf in msg.get("buffers") or []:
        parts.append(bytes(buf).decode("utf-8", "replace"))
    return "\n".join(parts)


def test_no_message_to_the_browser_and_no_file_holds_a_secret(tmp_path):
    kernel = Kernel(tmp_path)
    try:
        for code in CELLS:
            kernel.execute(code)
        views = kernel.run_views({"kind": "timeline"})
        kernel.drain()
        answered = 0
        for comm_id in views:  # the last state each view sent: its open questions, options as shown
            questions = _last(kernel, comm_id, "questions")
            for q in questions or []:
                kernel.send_custom(comm_id, {"kind": "answer", "key": q["key"], "value": q["options"][1]})
                answered += 1
        kernel.drain(quiet=3.0)
        kernel.explorer_rows({"status": "failed", "page": 0}, {"mode": "compare"}, {"sort": "latency ↓"})
        kernel.drain(quiet=3.0)
        opened_views = kernel.comms(anywidget_id="nbflow.widgets.run_view.RunView")
        for comm_id, state in opened_views.items():  # the rows' run views the explorer opened
            if comm_id not in views:
                for node in _options(state):
                    kernel.send_custom(comm_id, {"kind": "select", "node": node})
        kernel.drain(quiet=3.0)
    finally:
        kernel.close()

    texts = [_text(m) for m in kernel.messages]
    everything = "\n".join(texts)
    kinds = {m["msg_type"] for m in kernel.messages}
    assert {"comm_open", "comm_msg", "display_data", "stream"} <= kinds, kinds
    assert len(opened_views) >= len(views) + 3, "each explorer row opened its run view"
    assert answered >= 1, "a paused question was answered through the view"
    assert "resuming with" in everything  # the view resumed the run with the chosen option
    # the leak paths were shown, redacted: this sweep looked at them
    for shown in (
        "invalid key",  # an error message
        "lookup failed for",  # a chained traceback
        "Bearer",  # a derived output
        "valid integer",  # a validation error
        "sub-flow failed with",  # a sub-flow's failure
        "use the key",  # a paused question
        "Traceback",
    ):
        assert shown in everything, f"{shown!r} was never sent: the sweep did not reach that path"
    leaks = [
        (m["msg_type"], t[:300]) for m, t in zip(kernel.messages, texts, strict=True) if any(s in t for s in TEXTS)
    ]
    assert not leaks, f"{len(leaks)} of {len(texts)} messages hold a secret; first: {leaks[:3]}"

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"runs.db", "batch.db"} <= {p.name for p in files}
    for path in files:
        data = path.read_bytes()
        for s in TEXTS:
            assert s.encode() not in data, f"{s!r} written to {path}"
