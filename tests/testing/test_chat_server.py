"""nbflow.testing.ChatServer with the real openai SDK and httpx, and flows whose resources are SDK clients."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai
import pytest

import nbflow as nf
from nbflow.testing import ChatServer


@pytest.fixture
def server():
    with ChatServer(answers={"capital of France?": "Paris"}) as s:
        yield s


def client(server: ChatServer, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=server.api_key, **kw)


def ask(c: openai.OpenAI, text: str) -> str:
    out = c.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
    return out.choices[0].message.content


def test_echo_and_canned_answers_over_one_keep_alive_connection(server):
    c = client(server)
    assert ask(c, "hello") == "echo: hello"
    assert ask(c, "capital of France?") == "Paris"
    for i in range(8):
        assert ask(c, str(i)) == f"echo: {i}"
    assert server.completions == 10
    assert server.connections == 1  # HTTP/1.1 keep-alive: the SDK's pooled connection is reused
    models = c.models.list()
    assert [m.id for m in models.data] == ["nbflow-test"]


def test_a_wrong_key_is_a_401(server):
    with pytest.raises(openai.AuthenticationError):
        ask(openai.OpenAI(base_url=server.base_url, api_key="sk-wrong", max_retries=0), "x")


def test_429_carries_retry_after_and_the_sdk_honours_it():
    with ChatServer(rate_limit_every=2, retry_after=0.3) as s:
        c = client(s, max_retries=0)
        assert ask(c, "a") == "echo: a"
        with pytest.raises(openai.RateLimitError) as info:
            ask(c, "b")
        assert info.value.response.headers["retry-after"] == "0.3"
        retrying = client(s, max_retries=2)
        t0 = time.perf_counter()
        assert ask(retrying, "c") == "echo: c"  # request 3 passes; 4 is limited, retried after 0.3 s
        assert ask(retrying, "d") == "echo: d"
        assert time.perf_counter() - t0 >= 0.3
        assert s.statuses[429] == 2


def test_malformed_json_latency_and_error_rate():
    with ChatServer(malformed_every=1) as s, pytest.raises((openai.APIResponseValidationError, ValueError)):
        ask(client(s, max_retries=0), "x")
    with ChatServer(latency=0.2) as s:
        t0 = time.perf_counter()
        ask(client(s), "x")
        assert time.perf_counter() - t0 >= 0.2
    with ChatServer(error_rate=1.0) as s, pytest.raises(openai.InternalServerError):
        ask(client(s, max_retries=0), "x")
    with pytest.raises(ValueError, match="error_rate"):
        ChatServer(error_rate=2)


def test_httpx_async_client_against_the_server(server):
    async def main():
        async with httpx.AsyncClient(base_url=server.base_url) as h:
            r = await h.post(
                "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {server.api_key}"},
            )
            return r.json()["choices"][0]["message"]["content"]

    assert asyncio.run(main()) == "echo: hi"


def llm_flow(server: ChatServer, log: list[str]) -> nf.Flow:
    flow = nf.Flow("llm_eval", retry=nf.Retry(attempts=4, backoff=0.01))

    @flow.resource
    async def llm():
        c = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=3)
        log.append("open")
        yield c
        await c.close()
        log.append("close")

    @flow.node
    async def answer(question: str, llm: openai.AsyncOpenAI) -> str:
        out = await llm.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
        return out.choices[0].message.content

    @flow.node
    def score(answer: str, expected: str) -> float:
        return float(answer == expected)

    return flow


def test_a_batch_of_60_rows_shares_one_client_per_loop_with_429s_and_latency():
    log: list[str] = []
    with ChatServer(latency=(0.0, 0.02), rate_limit_every=7, retry_after=0.01) as s:
        flow = llm_flow(s, log)
        rows = [{"question": f"q{i}", "expected": f"echo: q{i}"} for i in range(60)]

        async def main():
            a = await flow.abatch(rows, concurrency=16)
            b = await flow.abatch(rows, concurrency=16)
            return a, b

        a, b = asyncio.run(main())
        assert list(a["status"].unique()) == ["succeeded"] and list(b["status"].unique()) == ["succeeded"]
        assert a["score"].sum() == 60 and b["score"].sum() == 60
        assert log == ["open", "close"]  # one client for both batches on that loop, closed with it
        assert s.statuses[429] >= 10
        assert s.connections < s.requests / 3  # pooled keep-alive connections, not one per request
        # blocking runs in a script: each its own loop, each its own client, each closed
        for _i in range(3):
            assert flow.run(question="x", expected="echo: x", show=False)["score"] == 1.0
        assert log == ["open", "close"] * 4
