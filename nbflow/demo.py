"""The quickstart flow, end to end, headless: ``python -m nbflow.demo``."""

from __future__ import annotations

import asyncio

import nbflow as nf

flow = nf.Flow("qa")

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


@flow.node
async def answer(question: str, retrieve: list[str]) -> str:
    """A stand-in for an LLM call: waits like one, answers from the top document."""
    await asyncio.sleep(0.05)
    return f"Q: {question}\nA: {retrieve[0]}"


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


def main() -> None:
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
