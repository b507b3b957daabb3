"""A result frame given back to ``flow.batch`` (issue 30): its rows (all, or a filtered subset such as the
failures) run again with the *values* of their named variants, never the names; the grid columns stay the
labels; ``grid=`` given again gives the values instead of raising "grid key ... is also a column";
``df.nbflow.rerun(flow)`` is the documented way. The prompts the model saw are read from the test server."""

from __future__ import annotations

import collections

import pandas as pd
import pytest

import nbflow as nf
from nbflow.testing import ChatServer
from tests.helpers.chat_flow import chat_answer_flow

openai = pytest.importorskip("openai")

VARIANTS = {"bare": "", "terse": "Answer tersely."}
CASES = [{"question": f"q{i}", "expected": f"q{i}"} for i in range(6)]
FAIL: set[str] = set()  # questions whose score fails (a fixture sets it)


@pytest.fixture
def server():
    systems: collections.Counter[str] = collections.Counter()

    def answer(messages: list[dict]) -> str:
        system = next((m["content"] for m in messages if m["role"] == "system"), None)
        systems[system] += 1
        return f"[{system}] {messages[-1]['content']}"

    with ChatServer(answers=answer) as chat:
        chat.systems = systems  # type: ignore[attr-defined]
        yield chat


def eval_flow(url: str) -> nf.Flow:
    flow = chat_answer_flow("refeed", url)

    @flow.node
    def score(answer: str, question: str) -> float:
        if question in FAIL:
            raise ValueError("the judge was down")
        return float(answer.endswith(question))

    return flow


@pytest.fixture
def failing():
    FAIL.update({"q1", "q4"})
    yield
    FAIL.clear()


def test_refed_failures_run_with_their_variants_values_not_their_names(server, failing):
    flow = eval_flow(server.base_url)
    df = flow.batch(CASES, grid={"system": VARIANTS}, outputs=["answer", "score"], progress=False)
    assert df["status"].value_counts().to_dict() == {"succeeded": 8, "failed": 4}
    assert server.systems == {"": 6, "Answer tersely.": 6}

    FAIL.clear()  # the judge is back
    failed = df[df["status"] == "failed"]
    again = failed.nbflow.rerun(flow, progress=False)
    assert server.systems == {"": 8, "Answer tersely.": 8}  # the values: never "bare" / "terse"
    assert "bare" not in server.systems and "terse" not in server.systems
    assert again["status"].eq("succeeded").all()
    assert again.index.tolist() == failed.index.tolist()  # each row keeps its label in the frame
    assert again["system"].tolist() == failed["system"].tolist()  # the variant names stay the labels
    assert again["answer"].tolist() == [
        f"[{VARIANTS[s]}] {q}" for s, q in zip(again["system"], again["question"], strict=True)
    ]
    assert again.attrs["grid"] == ["system"] and again.attrs["variants"] == {"system": VARIANTS}
    summary = nf.summarize(again, by="system")  # the labels still group the rows
    assert sorted(summary.index) == ["bare", "terse"]

    df.update(again)  # the documented way back into the whole frame
    assert df["status"].eq("succeeded").all()


def test_the_grid_given_again_gives_the_values_and_is_not_crossed(server):
    flow = eval_flow(server.base_url)
    df = flow.batch(CASES[:2], grid={"system": VARIANTS}, outputs=["answer"], progress=False)
    edited = {"bare": "", "terse": "Answer in one word."}  # a prompt edited since
    again = flow.batch(df, grid={"system": edited}, outputs=["answer"], progress=False)  # was: BatchError
    assert len(again) == 4  # the frame's own rows, not rows x grid
    assert again["system"].tolist() == ["bare", "terse", "bare", "terse"]
    assert server.systems["Answer in one word."] == 2
    with pytest.raises(nf.BatchError, match=r"column 'system' holds 'terse', which is not one of its variants"):
        flow.batch(df, grid={"system": {"bare": ""}}, outputs=["answer"])

    # A grid key the frame does not have is a new dimension, crossed with its rows as usual.
    flow2 = nf.Flow("refeed")

    @flow2.node
    def answer(question: str, system: str, temperature: float = 0.0) -> str:
        return f"{system}|{question}|{temperature}"

    first = flow2.batch(CASES[:2], grid={"system": VARIANTS}, progress=False)
    more = flow2.batch(first, grid={"temperature": [0.0, 1.0]}, progress=False)
    assert len(more) == 8 and set(more["answer"]) >= {"Answer tersely.|q1|1.0", "|q0|0.0"}


def test_a_frame_read_back_from_parquet_or_the_store_reruns_with_its_values(server, tmp_path):
    flow = eval_flow(server.base_url)
    db = tmp_path / "runs.db"
    df = flow.batch(CASES[:3], grid={"system": VARIANTS}, outputs=["answer"], store=db, experiment="e")
    path = tmp_path / "results.parquet"
    df.to_parquet(path)
    back = pd.read_parquet(path)
    again = flow.batch(back, outputs=["answer"], progress=False)
    assert again["answer"].tolist() == df["answer"].tolist()
    assert server.systems == {"": 6, "Answer tersely.": 6}

    loaded = nf.load_batch(db, "e")  # the store's copy: exact variant values kept in its record
    assert loaded.attrs["variants_exact"] is True
    resumed = flow.batch(loaded, outputs=["answer"], store=db, experiment="e", resume=True, progress=False)
    assert server.completions == 12  # every row found again by content: nothing ran
    assert resumed["answer"].tolist() == df["answer"].tolist()


class Persona:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Persona({self.text!r})"


def test_variant_objects_known_only_by_their_repr_are_refused_with_the_fix(tmp_path):
    flow = nf.Flow("personas")

    @flow.node
    def answer(question: str, persona: Persona) -> str:
        return f"{persona.text}: {question}"

    db = tmp_path / "runs.db"
    grid = {"persona": {"pirate": Persona("arr"), "butler": Persona("sir")}}
    df = flow.batch(CASES[:2], grid=grid, store=db, experiment="p", progress=False)
    assert flow.batch(df, progress=False)["answer"].tolist() == df["answer"].tolist()  # this process: real values
    loaded = nf.load_batch(db, "p")  # the store has the values by their repr only
    with pytest.raises(nf.BatchError, match=r"column 'persona' holds variant names.*grid=\{'persona': \{'pirate'"):
        flow.batch(loaded)
    again = flow.batch(loaded, grid=grid, progress=False)
    assert again["answer"].tolist() == df["answer"].tolist()


def test_refed_samples_keep_their_sample_and_run_again_each(server):
    flow = nf.Flow("sampled", cache=True)
    calls: collections.Counter[int] = collections.Counter()

    @flow.node(cache="per-sample")
    def draw(question: str) -> str:
        calls[0] += 1
        return f"{question}#{calls[0]}"

    df = flow.batch(CASES[:2], repeats=3, progress=False)
    assert calls[0] == 6 and df["sample"].tolist() == [0, 1, 2, 0, 1, 2]
    again = flow.batch(df[df["sample"] > 0], progress=False)  # per-sample cache: each sample its own hit
    assert calls[0] == 6 and again["draw"].tolist() == df[df["sample"] > 0]["draw"].tolist()
    with pytest.raises(nf.BatchError, match=r"samples of a batch run with repeats=3.*without repeats="):
        flow.batch(df, repeats=3)


def test_rows_of_another_flow_are_plain_rows(server):
    """A result frame of flow A fed to flow B (a pipeline step) keeps every column as data."""
    first = nf.Flow("first")

    @first.node
    def upper(question: str) -> str:
        return question.upper()

    second = nf.Flow("second")

    @second.node
    def shout(upper: str) -> str:
        return upper + "!"

    out = second.batch(first.batch(CASES[:2], progress=False)[["question", "upper"]], progress=False)
    assert out["shout"].tolist() == ["Q0!", "Q1!"]
