"""Repeats never collapse silently (issue 30): with the flow's cache on and one ``cache=False`` node (the logging
node docs/caching.md recommends), ``repeats=N`` makes N model calls per case, counted by the test server with
the real ``openai`` SDK; nodes cached only by the flow's default are keyed per sample in such a batch."""

from __future__ import annotations

import collections

import pytest

import nbflow as nf
from nbflow.testing import ChatServer

openai = pytest.importorskip("openai")

CASES = [{"question": f"q{i}"} for i in range(5)]


@pytest.fixture
def server():
    asked: collections.Counter[str] = collections.Counter()

    def answer(messages: list[dict]) -> str:
        question = messages[-1]["content"]
        asked[question] += 1
        return f"{question} #{asked[question]}"  # a sampled model: each call its own answer

    with ChatServer(answers=answer) as chat:
        chat.asked = asked  # type: ignore[attr-defined]
        yield chat


def sampling_flow(url: str, logged: list[str], **answer_options: object) -> nf.Flow:
    flow = nf.Flow("samples", cache=True)

    @flow.resource
    async def llm():
        client = openai.AsyncOpenAI(base_url=url, api_key="sk-test-nbflow")
        yield client
        await client.close()

    @flow.node(**answer_options)
    async def answer(question: str, llm: openai.AsyncOpenAI) -> str:
        response = await llm.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
        return response.choices[0].message.content or ""

    @flow.node(cache=False)  # side effects: always runs (docs/caching.md)
    def log(answer: str) -> str:
        logged.append(answer)
        return answer

    return flow


def test_repeats_with_a_logging_node_make_one_model_call_per_sample(server):
    logged: list[str] = []
    flow = sampling_flow(server.base_url, logged)
    df = flow.batch(CASES, repeats=3, progress=False)
    assert server.completions == 15  # 5 cases x 3 samples, not 5
    assert dict(server.asked) == {f"q{i}": 3 for i in range(5)}  # 3 distinct calls per case
    assert df.groupby("question")["log"].nunique().eq(3).all()  # 3 distinct answers per case
    assert len(logged) == 15

    again = flow.batch(CASES, repeats=3, progress=False)  # each sample hits its own cache entry
    assert server.completions == 15
    assert again["log"].tolist() == df["log"].tolist()

    more = flow.batch(CASES, repeats=4, progress=False)  # a 4th sample is one new call per case
    assert server.completions == 20
    assert more.groupby("question")["log"].nunique().eq(4).all()


def test_outside_repeats_the_default_cached_node_is_shared_as_before(server):
    logged: list[str] = []
    flow = sampling_flow(server.base_url, logged)
    flow.batch(CASES, progress=False)
    flow.batch(CASES, progress=False)
    assert server.completions == 5  # one call per case, then hits: keys unchanged outside repeats=
    run = flow.run(question="q0")
    assert run.nodes["answer"].cached


def test_a_node_declared_deterministic_is_shared_by_the_samples_by_declaration(server):
    logged: list[str] = []
    flow = sampling_flow(server.base_url, logged, cache=True)
    df = flow.batch(CASES, repeats=3, progress=False)
    assert server.completions == 5  # cache=True declares it deterministic: one call serves the samples
    assert df.groupby("question")["log"].nunique().eq(1).all()


def test_per_sample_declared_node_makes_one_call_per_sample(server):
    logged: list[str] = []
    flow = sampling_flow(server.base_url, logged, cache="per-sample")
    flow.batch(CASES, repeats=2, progress=False)
    assert server.completions == 10
