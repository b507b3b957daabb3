"""The quickstart flow, end to end, headless: ``python -m nbflow.demo``.

The answer comes from a model through the official ``openai`` SDK (the ``demo`` extra), held by a
``@flow.resource``. By default the endpoint is ``nbflow.testing.ChatServer`` on 127.0.0.1 (no key, no
network), which answers from the retrieved context; with ``OPENAI_BASE_URL`` or ``OPENAI_API_KEY`` set it
is that endpoint (``OPENAI_MODEL``, default ``gpt-4o-mini``).
"""

from __future__ import annotations

import os
import re
from typing import Any

import nbflow as nf

flow = nf.Flow("qa", retry=nf.Retry(attempts=3, backoff=0.2))

ENDPOINT: dict[str, Any] = {}
"""Where the ``llm`` resource connects: ``base_url``, ``api_key``, ``model`` (set by ``use_endpoint``)."""

PRICES = {"gpt-4o-mini": (0.15, 0.60), "nbflow-test": (0.15, 0.60)}
"""Per million input and output tokens, in dollars, for each call's ``cost``: gpt-4o-mini's list price when this was
written, and the local test model priced as it, so that the demo's cost columns show what a priced model gives. Another
model has no price here: its cost stays unknown (NaN), as nbflow never guesses one."""

DOCS = {
    "sky": "Sunlight scatters off air molecules; blue light scatters most (Rayleigh scattering).",
    "sea": "The sea looks blue because water absorbs red light and reflects the sky.",
    "grass": "Grass is green because chlorophyll reflects green light.",
}


@flow.node
def retrieve(question: str, k: int = 2) -> list[str]:
    """Rank the embedded documents by words shared with the question."""
    words = set(question.lower().replace("?", "").split()) - {"why", "is", "the", "a"}
    scored = sorted(DOCS.values(), key=lambda d: -len(words & set(d.lower().split())))
    return scored[:k]


@flow.resource
async def llm() -> Any:
    """One ``openai.AsyncOpenAI`` per event loop, closed with it."""
    try:
        import openai
    except ImportError:  # pragma: no cover - the demo extra is missing
        raise nf.ConfigError("the demo calls a model through the openai SDK: pip install 'nbflow[demo]'") from None
    if not ENDPOINT:
        use_endpoint()
    client = openai.AsyncOpenAI(base_url=ENDPOINT["base_url"], api_key=ENDPOINT["api_key"], max_retries=3)
    nf.recorded(client, prices=PRICES)  # each call's transcript and cost (a resource's client is recorded anyway)
    yield client
    await client.close()


@flow.node
async def answer(question: str, retrieve: list[str], llm: Any) -> str:
    """Ask the model, with the top document as context."""
    out = await llm.chat.completions.create(
        model=ENDPOINT["model"],
        messages=[
            {"role": "system", "content": "Answer in one sentence, from the context only."},
            {"role": "user", "content": f"Context: {retrieve[0]}\nQuestion: {question}"},
        ],
    )
    return f"Q: {question}\nA: {out.choices[0].message.content}"


@flow.node
def word_count(answer: str) -> int:
    return len(answer.split())


QUESTIONS = [
    {"question": "Why is the sky blue?", "topic": "sky"},
    {"question": "Why is the sea blue?", "topic": "sea"},
    {"question": "Why is grass green?", "topic": "grass"},
]


@flow.node
def correct(answer: str, topic: str) -> bool:
    """A score node: did the answer come from the right document?"""
    return DOCS[topic] in answer


def _from_context(messages: list[dict[str, Any]]) -> str:
    """The local server's stand-in for a model: the context sentence it was given."""
    found = re.search(r"Context: (.*)\nQuestion:", str(messages[-1].get("content", "")))
    return found.group(1) if found else "I do not know."


def use_endpoint() -> str:
    """Point ``llm`` at OPENAI_BASE_URL/OPENAI_API_KEY when set, else at a local ChatServer; says which."""
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        ENDPOINT.update(
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
            api_key=nf.env("OPENAI_API_KEY", default="none"),
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        )
        return f"model endpoint: {ENDPOINT['base_url'] or 'the OpenAI default'} (from the environment)"
    from nbflow.testing import ChatServer

    server = ChatServer(answers=_from_context, latency=0.05).start()
    ENDPOINT.update(base_url=server.base_url, api_key=server.api_key, model="nbflow-test")
    return f"model endpoint: nbflow.testing.ChatServer at {server.base_url} (set OPENAI_BASE_URL/OPENAI_API_KEY for a real one)"


def main() -> None:
    print(use_endpoint())
    run = flow.run(question="Why is the sky blue?", topic="sky")
    print(run.summary())
    print()
    print(run["answer"])
    print(f"({run['word_count']} words, {len(run['retrieve'])} documents retrieved)")
    run.raise_for_status()

    print("\nBatch: every question x k in (1, 2), concurrently")
    df = flow.batch(QUESTIONS, grid={"k": [1, 2]}, outputs=["word_count", "correct"], progress=False)
    print(df[["question", "k", "word_count", "correct", "status"]].to_string(index=False))
    print()
    print(nf.summarize(df, by="k", scores=["correct"]).to_string())


if __name__ == "__main__":
    main()
