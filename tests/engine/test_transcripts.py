"""Transcripts: every model call of a node, recorded on its attempt (real openai SDK against ChatServer)."""

from __future__ import annotations

import json
import pickle

import openai
import pandas as pd
import pytest

import nbflow as nf
from nbflow.testing import ChatServer


def _tools(messages):
    last = messages[-1].get("content")
    if isinstance(last, str) and "weather" in last:
        return {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    return f"echo: {last}"


@pytest.fixture
def server():
    with ChatServer(answers=_tools) as s:
        yield s


def async_flow(server: ChatServer, **client_kw) -> nf.Flow:
    flow = nf.Flow("chat_async")

    @flow.resource
    def client():  # made as a resource: recorded without any other change
        return openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key, **client_kw)

    @flow.node
    async def answer(question: str, client) -> str:
        r = await client.chat.completions.create(
            model="gpt-test",
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}],
            temperature=0.3,
            max_tokens=50,
        )
        return r.choices[0].message.content

    return flow


def test_async_chat_call_is_recorded_from_a_resource_client(server):
    run = async_flow(server).run(question="hello there")
    assert run.status is nf.RunStatus.SUCCEEDED
    calls = run.calls("answer")
    assert len(calls) == 1 and server.requests == 1
    c = calls.iloc[0]
    assert (c.node, c.attempt, c.call, c.api, c.model) == ("answer", 1, 1, "chat", "gpt-test")
    assert c.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]
    assert c.params == {"temperature": 0.3, "max_tokens": 50}
    assert c.content == "echo: hello there" == run["answer"]
    assert c.finish_reason == "stop" and c.status_code == 200 and c.retry == 0 and not c.streamed
    assert (c.input_tokens, c.output_tokens) == (4, 3)  # ChatServer counts words
    assert c.response_id.startswith("chatcmpl-") and pd.isna(c.error)
    assert 0 < c.latency_s < 5
    used = run.nodes["answer"].attempts[-1].usage  # through the usage machinery
    assert (used.input_tokens, used.output_tokens, used.calls) == (4, 3, 1)
    assert run.calls().equals(calls)  # every node: the same one call


def test_sync_client_responses_api_with_one_wrapper_call(server):
    client = nf.recorded(openai.OpenAI(base_url=server.base_url, api_key=server.api_key), prices={"gpt-r": (1.0, 2.0)})
    flow = nf.Flow("responses_sync")

    @flow.node
    def summary(text: str) -> str:  # a sync node: runs in a worker thread
        r = client.responses.create(model="gpt-r", instructions="Summarize.", input=text, temperature=0)
        return r.output_text

    run = flow.run(text="a long text")
    c = run.calls("summary").iloc[0]
    assert c.api == "responses" and c.model == "gpt-r"
    assert c.messages == [{"role": "system", "content": "Summarize."}, {"role": "user", "content": "a long text"}]
    assert c.params == {"temperature": 0}
    assert c.content == "echo: a long text" == run["summary"] and c.finish_reason == "completed"
    assert (c.input_tokens, c.output_tokens) == (4, 4)
    assert c.cost == pytest.approx((4 * 1.0 + 4 * 2.0) / 1e6)  # prices= per million tokens
    assert c.response_id.startswith("resp_")
    # outside a node the client works as before and records nothing
    assert client.responses.create(model="gpt-r", input="x").output_text == "echo: x"


def test_tool_calls_and_tools_are_recorded(server):
    flow = async_flow(server)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]

    @flow.node
    async def tool(answer: str, client) -> str:
        r = await client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "weather?"}], tools=tools
        )
        return r.choices[0].message.tool_calls[0].function.name

    run = flow.run(question="hi")
    c = run.calls("tool").iloc[0]
    assert c.tools == tools and c.finish_reason == "tool_calls" and c.content is None
    assert [(t["name"], json.loads(t["arguments"])) for t in c.tool_calls] == [("get_weather", {"city": "Paris"})]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_streamed_calls_are_recorded_whole_and_streamed_to_the_node(api):
    with ChatServer() as server:
        flow = nf.Flow(f"stream_{api}")

        @flow.resource
        def client():
            return openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key)

        @flow.node
        async def story(topic: str, client) -> str:
            if api == "chat":
                s = await client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": topic}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
                return "".join([ch.choices[0].delta.content or "" async for ch in s if ch.choices])
            s = await client.responses.create(model="m", input=topic, stream=True)
            return "".join([e.delta async for e in s if e.type == "response.output_text.delta"])

        run = flow.run(topic="once upon a time")
        assert server.streamed == 1
    c = run.calls("story").iloc[0]
    assert c.streamed and c.content == "echo: once upon a time" == run["story"]
    assert (c.input_tokens, c.output_tokens) == (4, 5)
    assert c.finish_reason == ("stop" if api == "chat" else "completed")
    # the chunks reached the node's stream as they came (what the live view shows)
    assert run.nodes["story"].attempts[-1].stream == ["echo: ", "once ", "upon ", "a ", "time"]


def test_sdk_retries_are_calls_of_their_own():
    with ChatServer(rate_limit_every=1, retry_after=0.01) as server:
        flow = async_flow(server, max_retries=1)
        run = flow.run(question="q")  # every request is refused: the SDK tries twice, the node fails
        assert server.requests == 2
    assert run.status is nf.RunStatus.FAILED
    calls = run.calls("answer")
    assert list(calls.retry) == [0, 1] and list(calls.status_code) == [429, 429]
    assert all(e == "HTTP 429: Rate limit reached." for e in calls.error)
    assert run.nodes["answer"].attempts[-1].usage is None  # nothing was used


def test_sdk_retry_then_success_and_node_retry_attempts():
    with ChatServer(rate_limit_every=2, retry_after=0.01) as server:
        flow = nf.Flow("retries")
        client = nf.recorded(openai.OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=3))

        @flow.node
        def two(q: str) -> list[str]:
            return [
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{q}{i}"}])
                .choices[0]
                .message.content
                for i in range(2)
            ]

        run = flow.run(q="x")
        assert server.requests == 3
    calls = run.calls("two")
    assert list(calls.retry) == [0, 0, 1] and list(calls.status_code) == [200, 429, 200]
    assert list(calls.content.fillna("-")) == ["echo: x0", "-", "echo: x1"]


def test_errors_are_recorded_on_the_failed_attempt():
    with ChatServer(error_rate=1.0) as server:
        flow = async_flow(server, max_retries=0)
        run = flow.run(question="q")
    assert run.status is nf.RunStatus.FAILED
    c = run.calls("answer").iloc[0]
    assert c.status_code == 500 and c.error.startswith("HTTP 500: The server had an error")
    # a server that is gone: the transport's own error
    flow2 = async_flow(server, max_retries=0)
    run2 = flow2.run(question="q")
    c2 = run2.calls("answer").iloc[0]
    assert pd.isna(c2.status_code) and "ConnectError" in c2.error


def test_node_retry_attempts_keep_their_own_calls():
    with ChatServer(error_rate=0.0) as server:
        flow = nf.Flow("node_retry")
        client = nf.recorded(openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key))
        tries = []

        @flow.node(retry=nf.Retry(attempts=2, backoff=0.0, on=ValueError))
        async def flaky(q: str) -> str:
            r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])
            tries.append(1)
            if len(tries) == 1:
                raise ValueError("bad answer")
            return r.choices[0].message.content

        run = flow.run(q="z")
    calls = run.calls("flaky")
    assert list(calls.attempt) == [1, 2] and list(calls.call) == [1, 1]


def test_record_call_for_any_client():
    flow = nf.Flow("manual")

    @flow.node
    def ask(q: str) -> str:
        nf.record_call(
            model="local-llm",
            messages=q,
            response={
                "id": "r1",
                "choices": [{"message": {"content": "42"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1},
            },
            cost=0.002,
            latency=0.5,
            params={"temperature": 0},
        )
        nf.record_call(
            model="local-llm", messages=[{"role": "user", "content": q}], error=TimeoutError("slow"), retry=1
        )
        return "42"

    run = flow.run(q="meaning?")
    calls = run.calls("ask")
    assert list(calls.content.fillna("-")) == ["42", "-"]
    assert calls.messages[0] == [{"role": "user", "content": "meaning?"}]
    assert (calls.input_tokens[0], calls.output_tokens[0], calls.cost[0], calls.latency_s[0]) == (5, 1, 0.002, 0.5)
    assert calls.error[1] == "TimeoutError: slow" and calls.retry[1] == 1
    used = run.nodes["ask"].attempts[-1].usage
    assert (used.input_tokens, used.cost, used.calls) == (5, 0.002, 1)

    with pytest.raises(nf.RunnerError, match="inside a node"):
        nf.record_call(model="m", content="x")

    bad = nf.Flow("manual_bad")

    @bad.node
    def oops() -> None:
        nf.record_call(messages=42)

    r = bad.run()
    assert isinstance(r.nodes["oops"].error, nf.CallError) and "messages" in str(r.nodes["oops"].error)


def test_usage_of_a_recorded_response_is_counted_once(server):
    flow = nf.Flow("usage_once")
    client = nf.recorded(openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key))

    @flow.node
    async def answer(q: str) -> str:
        r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])
        nf.usage(r, cost=0.01)  # what the docs showed before transcripts: still right, not doubled
        again = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        nf.usage(again.usage, cost=0.02)  # its usage object (no id): matched by its counts
        nf.usage(input_tokens=7, output_tokens=1, cost=0.5)  # another client's call: counted
        return r.choices[0].message.content

    df = flow.batch([{"q": "a b"}, {"q": "c"}])
    assert list(df.input_tokens) == [2 + 1 + 7, 1 + 1 + 7] and list(df.output_tokens) == [3 + 2 + 1, 2 + 2 + 1]
    assert list(df.cost) == [pytest.approx(0.53), pytest.approx(0.53)]


def test_batch_rows_keep_their_transcripts_in_a_store(server, tmp_path):
    flow = async_flow(server)
    store = tmp_path / "runs.db"
    df = flow.batch([{"question": "one"}, {"question": "two"}], store=store, keep="all")
    assert list(df.nbflow.calls(1).content) == ["echo: two"]
    every = df.nbflow.calls()
    assert list(every.row) == [0, 1] and list(every.content) == ["echo: one", "echo: two"]
    # read back from the file, as after a kernel restart
    run = nf.load_run(store, df.run_id[0])
    assert list(run.calls().content) == ["echo: one"]
    assert run.calls().messages[0][1] == {"role": "user", "content": "one"}
    with pytest.raises(nf.UnknownNodeError):
        run.calls("nope")


def test_secrets_never_reach_a_transcript_store_or_export(tmp_path):
    key = nf.Secret("sk-live-OPENAI-KEY-0123456789")  # the client's key, given as a flow input
    pin = nf.Secret("pin-4242-4242-9999")  # a secret value a node puts into a prompt
    with ChatServer(api_key=str.__str__(key)) as server:
        flow = nf.Flow("secret_sweep")

        @flow.resource
        def client(OPENAI_KEY: str):
            return openai.AsyncOpenAI(base_url=server.base_url, api_key=OPENAI_KEY)

        @flow.node
        async def answer(question: str, client, pin: str) -> str:
            r = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"{question} {pin}"}], user=pin
            )
            return "ok" if str.__str__(pin) in r.choices[0].message.content else "?"

        store = tmp_path / "runs.db"
        df = flow.batch([{"question": "q", "OPENAI_KEY": key, "pin": pin}], store=store, keep="all")
        assert df.answer[0] == "ok"  # the server echoed the pin: the node saw it
    calls = df.nbflow.calls(0)
    text = calls.to_json() + repr(calls.to_dict())
    for secret in (key, pin):
        raw = str.__str__(secret)
        assert raw not in text
        for f in tmp_path.iterdir():  # the store and its write-ahead log
            assert raw.encode() not in f.read_bytes(), f
    assert "[REDACTED]" in calls.messages[0][0]["content"] and calls.params[0] == {"user": "[REDACTED]"}
    assert "[REDACTED]" in calls.content[0]
    assert str.__str__(key) not in pickle.dumps(df.nbflow.run(0).nodes["answer"].attempts[-1].calls).decode("latin-1")


def test_a_transcript_in_memory_holds_no_secret_nor_the_client_key():
    pin = nf.Secret("pin-7777-1234-5678")
    plain_key = "sk-plain-string-key-000111222"  # not an nf.Secret: the client's own key is known anyway
    with ChatServer(api_key=plain_key) as server:
        client = nf.recorded(openai.OpenAI(base_url=server.base_url, api_key=plain_key))
        flow = nf.Flow("secret_memory")

        @flow.node
        def leak(pin: str) -> str:
            r = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"{pin} and {plain_key}"}]
            )
            return r.choices[0].message.content

        run = flow.run(pin=pin)
    assert run["leak"] == f"echo: {str.__str__(pin)} and {plain_key}"  # the node got the real answer
    text = repr(run.calls().to_dict())
    assert str.__str__(pin) not in text and plain_key not in text
    assert run.calls().content[0] == "echo: [REDACTED] and [REDACTED]"
    assert "authorization" not in text.lower()  # headers are never recorded


def test_calls_are_exported_as_opentelemetry_genai_spans_without_secrets():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    key = nf.Secret("sk-otel-OPENAI-KEY-99887766")
    pin = nf.Secret("pin-otel-5555-6666")
    with ChatServer(api_key=str.__str__(key), rate_limit_every=2, retry_after=0.01) as server:
        flow = nf.Flow("traced_calls")

        @flow.resource
        def client(OPENAI_KEY: str):
            return openai.AsyncOpenAI(base_url=server.base_url, api_key=OPENAI_KEY)

        @flow.node
        async def answer(question: str, client, pin: str) -> str:
            first = await client.chat.completions.create(
                model="gpt-otel",
                messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"{question} {pin}"}],
                temperature=0.5,
            )
            await client.chat.completions.create(model="gpt-otel", messages=[{"role": "user", "content": "again"}])
            return first.choices[0].message.content

        run = flow.run(question="q", OPENAI_KEY=key, pin=pin, trace=provider)
    assert run.status is nf.RunStatus.SUCCEEDED
    spans = exporter.get_finished_spans()
    node = next(s for s in spans if s.name == "node answer")
    calls = [s for s in spans if s.name == "chat gpt-otel"]
    assert len(calls) == 3  # the first call, the 429 of the second and its retry
    assert all(s.parent.span_id == node.context.span_id for s in calls)
    ok = calls[0]
    a = ok.attributes
    assert (a["gen_ai.operation.name"], a["gen_ai.request.model"], a["gen_ai.request.temperature"]) == (
        "chat",
        "gpt-otel",
        0.5,
    )
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (4, 3)  # words, as ChatServer counts
    assert a["gen_ai.response.finish_reasons"] == ("stop",) and a["openinference.span.kind"] == "LLM"
    assert json.loads(a["gen_ai.input.messages"])[0] == {"role": "system", "content": "Be brief."}
    assert [e.name for e in ok.events] == ["gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"]
    refused, retried = calls[1], calls[2]
    assert refused.status.status_code is StatusCode.ERROR and refused.attributes["http.response.status_code"] == 429
    assert retried.attributes["nbflow.call.retry"] == 1 and retried.status.status_code is StatusCode.UNSET
    said = "\n".join(
        "\n".join(
            [s.name, *map(str, s.attributes.values()), *(str(v) for e in s.events for v in e.attributes.values())]
        )
        for s in spans
    )
    assert str.__str__(key) not in said and str.__str__(pin) not in said
    assert "q [REDACTED]" in said
    provider.shutdown()


def test_bad_clients_and_prices_are_refused_and_a_response_object_can_be_given(server):
    with pytest.raises(nf.CallError, match=r"nf.recorded\(client\) records an openai SDK client.*nf.record_call"):
        nf.recorded(object())
    with pytest.raises(nf.CallError, match="two numbers >= 0"):
        nf.recorded(openai.OpenAI(base_url=server.base_url, api_key=server.api_key), prices={"m": (1.0,)})
    plain = openai.OpenAI(base_url=server.base_url, api_key=server.api_key)  # not recorded
    flow = nf.Flow("given_response")

    @flow.node
    def ask(q: str) -> str:
        messages = [{"role": "user", "content": q}]
        r = plain.chat.completions.create(model="m", messages=messages)
        nf.record_call(messages=messages, response=r, latency=0.1)  # the SDK's response object as it is
        return r.choices[0].message.content

    c = flow.run(q="hello").calls("ask").iloc[0]
    assert (c.model, c.content, c.finish_reason, c.input_tokens, c.output_tokens) == ("m", "echo: hello", "stop", 1, 2)
    assert c.response_id.startswith("chatcmpl-")


@pytest.mark.parametrize("stream", [False, True])
def test_compressed_answers_are_read_as_real_apis_send_them(stream):
    with ChatServer(gzip=True, answers={"héllo": "ünïcode ✓ answer"}) as server:
        flow = nf.Flow("gzipped")

        @flow.resource
        def llm():
            return openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key)

        @flow.node
        async def answer(q: str, llm) -> str:
            if not stream:
                r = await llm.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])
                return r.choices[0].message.content
            s = await llm.chat.completions.create(model="m", messages=[{"role": "user", "content": q}], stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in s if c.choices])

        run = flow.run(q="héllo")
    c = run.calls("answer").iloc[0]
    assert run["answer"] == "ünïcode ✓ answer" == c.content and pd.isna(c.error)
    assert c.finish_reason == "stop" and bool(c.streamed) is stream
