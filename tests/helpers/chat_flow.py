"""A flow whose ``answer`` node calls a chat model through the real ``openai`` SDK (an ``AsyncOpenAI`` client as
a ``@flow.resource``), for tests against ``nbflow.testing.ChatServer``; tests add their own scorers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nbflow as nf


def chat_answer_flow(name: str, url: str) -> nf.Flow:
    """``answer(question, system)``: the model's reply to ``question`` under the system prompt ``system``."""
    import openai

    flow = nf.Flow(name)

    @flow.resource
    async def llm() -> AsyncIterator[openai.AsyncOpenAI]:
        client = openai.AsyncOpenAI(base_url=url, api_key="sk-test-nbflow")
        yield client
        await client.close()

    @flow.node
    async def answer(question: str, system: str, llm: openai.AsyncOpenAI) -> str:
        response = await llm.chat.completions.create(
            model="m", messages=[{"role": "system", "content": system}, {"role": "user", "content": question}]
        )
        return response.choices[0].message.content or ""

    return flow
