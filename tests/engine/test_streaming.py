"""Streaming nodes: an async generator node, nf.stream(chunk), and the openai SDK's stream=True, shown live
in the run view's inspector (a recording comm stands in for the browser) with clicks handled meanwhile."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

import nbflow as nf
from nbflow.testing import ChatServer
from nbflow.widgets import RunView
from tests.helpers import widget_comm
from tests.helpers.widget_comm import frontend_sends

pytestmark = pytest.mark.anyio


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def test_an_async_generator_node_streams_and_outputs_the_joined_text() -> None:
    flow = nf.Flow("gen_stream")

    @flow.node
    async def story(topic: str) -> AsyncIterator[str]:
        """Tell a story."""
        for word in topic.split():
            await asyncio.sleep(0)
            yield word + " "

    @flow.node
    def words(story: str) -> int:
        return len(story.split())

    run = flow.run(topic="once upon a time", show=False)
    assert run["story"] == "once upon a time " and run["words"] == 4
    assert run.nodes["story"].attempts[-1].stream == ["once ", "upon ", "a ", "time "]
    assert flow.nodes["story"].doc == "Tell a story."
    assert inspect.isasyncgenfunction(story)  # the decorator gave the function back unchanged

    # the hint AsyncIterator[str] checks the output as a str; other chunks give their list
    @flow.node
    async def numbers(words: int):  # type: ignore[no-untyped-def]
        for i in range(words):
            yield i

    assert flow.run(topic="a b", show=False)["numbers"] == [0, 1]


def test_nf_stream_inside_a_node_and_outside() -> None:
    flow = nf.Flow("nf_stream")

    @flow.node
    def think(q: str) -> str:  # a sync node: in a worker thread
        for part in ("step 1; ", "step 2; "):
            nf.stream(part)
        return "done"

    run = flow.run(q="x", show=False)
    assert run["think"] == "done" and run.nodes["think"].attempts[-1].stream == ["step 1; ", "step 2; "]
    with pytest.raises(nf.RunnerError, match="inside a node"):
        nf.stream("nowhere")


def test_a_failing_stream_keeps_what_it_streamed() -> None:
    flow = nf.Flow("broken_stream")

    @flow.node
    async def story() -> AsyncIterator[str]:
        yield "half a "
        raise ValueError("model went away")

    run = flow.run(show=False)
    rec = run.nodes["story"]
    assert rec.status is nf.NodeStatus.FAILED and "model went away" in str(rec.error)
    assert rec.attempts[-1].stream == ["half a "]


async def _wait_for(check: Any, what: str, tries: int = 1500) -> None:
    for _ in range(tries):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_the_inspector_shows_the_text_growing_while_other_nodes_are_clicked(comm_log: list[Any]) -> None:
    gates = [asyncio.Event() for _ in range(3)]
    flow = nf.Flow("live_stream")

    @flow.node
    def prompt(topic: str) -> str:
        return f"a story about {topic}"

    @flow.node
    async def story(prompt: str) -> AsyncIterator[str]:
        for gate, word in zip(gates, ["Once ", "upon ", "a <time>"], strict=True):
            await gate.wait()
            yield word

    @flow.node
    def other(topic: str) -> str:
        return topic.upper()

    handle = flow.start(topic="cats", show=False)
    view = RunView(handle, interval=0)
    view.select("story")
    await _wait_for(lambda: handle.run.nodes["other"].status is nf.NodeStatus.SUCCEEDED, "the other node")
    seen = []
    for n, gate in enumerate(gates):
        gate.set()
        want = ["Once", "Once upon", "Once upon a &lt;time&gt;"][n]
        await _wait_for(lambda want=want: want in view.inspector, f"chunk {n}")
        seen.append(view.inspector)
        if n < 2:
            # a click on another node while the stream goes on: handled at once, then back
            frontend_sends(view, kind="select", node="other")
            assert view.selected == "other" and "CATS" in view.inspector
            frontend_sends(view, kind="select", node="story")
            assert view.selected == "story"
    run = await handle
    assert run["story"] == "Once upon a <time>"
    assert "streaming" in seen[0] and "Once" in seen[0] and "upon" not in seen[0]
    assert "<time>" not in seen[2]  # escaped
    assert "a &lt;time&gt;" in view.inspector  # the final output


async def test_an_openai_stream_grows_in_the_inspector_and_its_transcript_shows(comm_log: list[Any]) -> None:
    with ChatServer(stream_delay=0.05) as server:
        flow = nf.Flow("sdk_stream")

        @flow.resource
        def client():
            return openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key)

        @flow.node
        async def story(topic: str, client) -> str:
            s = await client.chat.completions.create(
                model="gpt-stream", messages=[{"role": "user", "content": topic}], stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in s if c.choices])

        handle = flow.start(topic="one two three four five six", show=False)
        view = RunView(handle, interval=0)
        view.select("story")
        await _wait_for(lambda: "streaming" in view.inspector and "echo:" in view.inspector, "first words")
        partial = re.search(r'<pre class="nbflow-stream"[^>]*>(.*?)</pre>', view.inspector, re.S)
        run = await handle
    assert partial is not None and partial.group(1).startswith("echo:")
    assert "six" not in partial.group(1)  # seen before the end
    text = view.inspector
    assert "transcript" in text and "gpt-stream" in text and "streamed" in text
    assert "echo: one two three four five six" in text
    assert run["story"] == "echo: one two three four five six"
    snapshot = view.snapshot_html()
    assert "transcript" in snapshot and "echo: one two three four five six" in snapshot


async def test_a_sync_node_streaming_from_its_thread_grows_in_the_inspector(comm_log: list[Any]) -> None:
    import threading

    steps = [threading.Event() for _ in range(2)]
    flow = nf.Flow("thread_stream")

    @flow.node(thread=True)
    def think(q: str) -> str:
        for n, step in enumerate(steps):
            nf.stream(f"thought {n}; ")
            assert step.wait(30)
        return "done"

    handle = flow.start(q="x", show=False)
    view = RunView(handle, interval=0)
    view.select("think")
    await _wait_for(lambda: "thought 0;" in view.inspector, "the first thought")
    assert "thought 1;" not in view.inspector
    steps[0].set()
    await _wait_for(lambda: "thought 1;" in view.inspector, "the second thought, from the worker thread")
    steps[1].set()
    run = await handle
    assert run["think"] == "done"


async def test_a_sync_node_with_a_retry_policy_streams_live_too(comm_log: list[Any]) -> None:
    import threading

    step = threading.Event()
    flow = nf.Flow("policy_stream")

    @flow.node(thread=True, retry=nf.Retry(attempts=2))  # the policy path: its node is pinned, not a worker's
    def think(q: str) -> str:
        nf.stream("first; ")
        assert step.wait(30)
        return "done"

    handle = flow.start(q="x", show=False)
    view = RunView(handle, interval=0)
    view.select("think")
    await _wait_for(lambda: "first;" in view.inspector, "the streamed text, from the worker thread")
    step.set()
    assert (await handle)["think"] == "done"
