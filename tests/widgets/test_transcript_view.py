"""The transcript in the run view (a recording comm stands in for the browser): a batch row opened as the
explorer opens it, every message sent to the front end swept for secrets, and the saved snapshot."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

import nbflow as nf
from nbflow.testing import ChatServer
from nbflow.widgets import RunView
from tests.helpers import widget_comm
from tests.helpers.widget_comm import frontend_sends


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def test_a_rows_transcript_in_its_run_view_holds_no_secret(comm_log: list[Any], tmp_path: Any) -> None:
    key = nf.Secret("sk-view-OPENAI-KEY-55443322")
    pin = nf.Secret("pin-view-8080-9090")
    with ChatServer(api_key=str.__str__(key), rate_limit_every=2, retry_after=0.01) as server:
        flow = nf.Flow("viewed")

        @flow.resource
        def client(OPENAI_KEY: str):
            return openai.AsyncOpenAI(base_url=server.base_url, api_key=OPENAI_KEY)

        @flow.node
        async def answer(question: str, client, pin: str) -> str:
            first = await client.chat.completions.create(
                model="gpt-view",
                messages=[
                    {"role": "system", "content": "Use <b>tags</b>."},
                    {"role": "user", "content": f"{question} {pin}"},
                ],
            )
            await client.chat.completions.create(model="gpt-view", messages=[{"role": "user", "content": "second"}])
            return first.choices[0].message.content

        df = flow.batch(
            [{"question": "q1", "OPENAI_KEY": key, "pin": pin}], store=tmp_path / "runs.db", keep="all", progress=False
        )
    explorer = nf.explore(df)  # what a row click in the explorer opens: the row's run, as a run view
    view = RunView(explorer._open(0))
    frontend_sends(view, kind="select", node="answer")
    text = view.inspector
    assert "<b>transcript</b> (3 model calls)" in text  # the first call, the 429 of the second, its retry
    assert "gpt-view" in text and "retry 1" in text and "HTTP 429: Rate limit reached." in text
    assert "Use &lt;b&gt;tags&lt;/b&gt;." in text and "<b>tags</b>" not in text  # escaped
    snapshot = view.snapshot_html()
    assert "transcript" in snapshot and "second" in snapshot
    sent = json.dumps([d for _, _, d in comm_log], default=str) + snapshot
    for secret in (key, pin):
        assert str.__str__(secret) not in sent
