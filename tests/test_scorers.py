"""nbflow.scorers: the text, number and JSON scorers on edge cases, and the LLM judges through the real openai SDK
against nbflow.testing.ChatServer (off-format answers, a judge that errors, the judge's cost)."""

from __future__ import annotations

import re

import openai
import pydantic
import pytest

import nbflow as nf
from nbflow import scorers
from nbflow.testing import ChatServer


def score_all(declare, rows: list[dict]) -> list:
    """Run a one-scorer flow over ``rows``: the frame's (value, explanation) per row, or the row's error."""
    flow = nf.Flow("scoring")
    declare(flow)
    df = flow.batch(rows)
    (name,) = df.attrs["outputs"]
    out = []
    for _, r in df.iterrows():
        out.append(
            (r[name], r[f"{name}.explanation"]) if r["status"] == "succeeded" else (r["error_type"], r["error_message"])
        )
    return out


def test_exact_and_normalized_match_on_empty_unicode_and_whitespace():
    rows = [
        {"output": " 42\n", "target": "42"},
        {"output": "", "target": "42"},
        {"output": "", "target": ""},
        {"output": "cafe\u0301", "target": "café"},  # decomposed vs composed é
        {"output": "The Answer: Paris!", "target": "the answer paris"},
        {"output": "４２", "target": "42"},  # full-width digits
    ]
    exact = score_all(scorers.exact_match, rows)
    assert [v for v, _ in exact] == [True, False, True, False, False, False]
    assert exact[1][1] == "expected '42', got ''"
    normalized = score_all(scorers.normalized_match, rows)
    assert [v for v, _ in normalized] == [True, False, True, True, True, True]
    assert normalized[4][1] == "matches the target as 'the answer paris'"


def test_includes_and_regex():
    rows = [
        {"output": "Die Straße ist lang", "target": "STRASSE"},
        {"output": "", "target": "x"},
        {"output": "abc", "target": ""},
    ]
    got = score_all(lambda f: scorers.includes(f, name="mentions"), rows)
    assert got[0] == (True, "found 'STRASSE' at character 4")
    assert got[1] == (False, "'x' not in the output ''")
    assert got[2][0] == "ScorerError" and "node 'mentions': the target is empty" in got[2][1]
    got = score_all(lambda f: scorers.regex(f, r"\bJSON\b"), [{"output": "plain JSON here"}, {"output": "jsonish"}])
    assert got == [(True, "/\\bJSON\\b/ matched 'JSON' at character 6"), (False, "/\\bJSON\\b/ not found in 'jsonish'")]
    with pytest.raises(nf.ScorerError, match=r"regex\(name='regex'\): the pattern '\(' is not a regular expression"):
        scorers.regex(nf.Flow("f"), "(")


def test_numeric_reads_the_last_number_within_tolerance():
    rows = [
        {"output": "The total is 1,234.5 dollars", "target": 1234.5},
        {"output": "2 + 2 = 4", "target": "4"},
        {"output": "it is −3", "target": -3},  # a Unicode minus
        {"output": "four", "target": 4},
        {"output": "", "target": 4},
        {"output": "about 102", "target": 100},
        {"output": "7", "target": "seven"},
    ]
    got = score_all(lambda f: scorers.numeric(f, tolerance=0.5), rows)
    assert [v for v, _ in got[:6]] == [True, True, True, False, False, False]
    assert got[3][1] == "no number in the output 'four'"
    assert got[5][1] == "102 is 2 from 100 (allowed 0.5)"
    assert got[6][0] == "ScorerError" and "the target 'seven' is not a number" in got[6][1]
    relative = score_all(lambda f: scorers.numeric(f, relative=0.05), [{"output": "about 102", "target": 100}])
    assert relative == [(True, "102 is within 5 of 100")]


class Person(pydantic.BaseModel):
    name: str
    age: int


def test_json_valid_parses_and_validates_against_a_model_or_a_schema():
    rows = [
        {"output": '{"name": "Ada", "age": 36}'},
        {"output": '```json\n{"name": "Ada", "age": 36}\n```'},
        {"output": '{"name": "Ada", "age": "old"}'},
        {"output": "{'name': 'Ada'}"},
        {"output": ""},
    ]
    plain = score_all(scorers.json_valid, rows)
    assert [v for v, _ in plain] == [True, True, True, False, False]
    assert plain[3][1].startswith("not JSON: Expecting property name enclosed in double quotes at character 1")
    model = score_all(lambda f: scorers.json_valid(f, schema=Person), rows)
    assert [v for v, _ in model] == [True, True, False, False, False]
    assert model[2][1].startswith("JSON, but does not fit the schema at age: Input should be a valid integer")
    schema = {"type": "object", "required": ["name", "age"], "properties": {"age": {"type": "integer"}}}
    js = score_all(lambda f: scorers.json_valid(f, schema=schema), rows)
    assert [v for v, _ in js] == [True, True, False, False, False]
    assert js[2][1] == "JSON, but does not fit the schema at age: 'old' is not of type 'integer'"
    with pytest.raises(nf.ScorerError, match="takes a pydantic model class or a JSON Schema dict, got str"):
        scorers.json_valid(nf.Flow("f"), schema="Person")


# --- judges ---------------------------------------------------------------------------------------
def grader(messages: list[dict]) -> str:
    """A judge: C when the answer contains the reference, I otherwise; off-format for a question about 'ramble'."""
    text = messages[-1]["content"]
    question = text.split("[Question]\n")[1].split("\n")[0]
    if "ramble" in question:
        return "I think it is fine, really."
    reference = text.split("[Reference answer]\n")[1].split("\n")[0]
    answer = text.split("[Answer to grade]\n")[1].split("\n\nCompare")[0]
    good = reference in answer
    return f"The answer {'contains' if good else 'lacks'} {reference}.\nGRADE: {'C' if good else 'I'}"


def judged_flow(server: ChatServer, **options) -> nf.Flow:
    flow = nf.Flow("judged")

    @flow.resource
    async def judge():
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
        yield client
        await client.close()

    @flow.node
    def answer(question: str) -> str:
        answers = {"2+2?": "It is 4.", "capital of France?": "Lyon", "ramble": "...", "¿capital de España?": "Madrid ✓"}
        return answers.get(question, "")  # (an empty answer for the rest)

    scorers.model_graded(flow, "answer", "question", "expected", price=(1.0, 2.0), name="graded", **options)
    return flow


ROWS = [
    {"question": "2+2?", "expected": "4"},
    {"question": "capital of France?", "expected": "Paris"},
    {"question": "ramble", "expected": "x"},
    {"question": "¿capital de España?", "expected": "Madrid"},  # unicode through the judge and back
    {"question": "silent", "expected": "42"},  # an empty answer
]


def test_model_graded_grades_explains_and_records_its_cost():
    with ChatServer(answers=grader) as server:
        df = judged_flow(server).batch(ROWS)
        assert server.completions == 5
    assert df["graded"].tolist()[3:] == [1.0, 0.0]
    assert df["graded.explanation"].tolist()[3:] == ["The answer contains Madrid.", "The answer lacks 42."]
    assert df["graded"].tolist()[:2] == [1.0, 0.0]
    assert df["graded.explanation"].tolist()[:2] == ["The answer contains 4.", "The answer lacks Paris."]
    assert df["graded.grade"].tolist()[:2] == ["C", "I"]
    # the judge's call is the row's usage: ChatServer counts words; price = (1, 2) per million tokens
    first = df.iloc[0]
    assert first["output_tokens"] == len(["The", "answer", "contains", "4.", "GRADE:", "C"])
    assert first["cost"] == pytest.approx((first["input_tokens"] * 1.0 + first["output_tokens"] * 2.0) / 1e6)
    # off-format: the row fails with a ScorerError naming the node and quoting the judge
    bad = df.iloc[2]
    assert bad["status"] == "failed" and bad["error_type"] == "ScorerError" and bad["error_node"] == "graded"
    assert re.search(
        r"node 'graded': the judge's answer has no last line 'GRADE: <C\|P\|I>' \(it answered 'I think",
        bad["error_message"],
    )
    assert bad["failed_cost"] > 0  # the off-format call cost money: kept apart
    s = nf.summarize(df, scores="graded", by=[], failed_as=0, digits=None)
    assert s.loc["all", "graded_mean"] == pytest.approx(2 / 5)


def test_a_judge_that_errors_fails_its_row_and_a_retry_can_save_it():
    with ChatServer(answers=grader, error_rate=1.0) as server:
        df = judged_flow(server).batch(ROWS[:1])
    assert df.loc[0, "status"] == "failed" and df.loc[0, "error_type"] == "InternalServerError"
    with ChatServer(answers=grader, rate_limit_every=1, retry_after=0.01) as server:
        server_ok = server
        df = judged_flow(server, retry=nf.Retry(attempts=1)).batch(ROWS[:1])
        assert df.loc[0, "error_type"] == "RateLimitError"
        server_ok.rate_limit_every = 2  # every other call limited: a retry gets through
        df = judged_flow(server, retry=nf.Retry(attempts=3, backoff=0.01)).batch(ROWS[:1])
    assert df.loc[0, "status"] == "succeeded" and df.loc[0, "graded"] == 1.0


def test_a_rubric_naming_an_unknown_field_is_refused_when_declared():
    with pytest.raises(
        nf.ScorerError, match=r"the rubric uses \{answer\}, which it cannot fill; it may use \{output\}"
    ):
        scorers.model_graded(nf.Flow("f"), rubric="Grade {answer}")
    with pytest.raises(nf.ScorerError, match=r"uses \{target\}"):
        scorers.model_graded(nf.Flow("f"), rubric="Grade {output} against {target}")  # no target= column


def prefer_paris(messages: list[dict]) -> str:
    """A pairwise judge preferring the answer saying Paris; a tie when both or neither do; off-format on '??'."""
    text = messages[-1]["content"]
    first = text.split("[Answer 1]\n")[1].split("\n\n[Answer 2]")[0]
    second = text.split("[Answer 2]\n")[1].split("\n\nWhich")[0]
    if "??" in text:
        return "Both are lovely."
    a, b = "Paris" in first, "Paris" in second
    winner = "TIE" if a == b else ("1" if a else "2")
    return f"Answer {winner} names the capital.\nWINNER: {winner}"


def test_pairwise_judge_randomises_the_order_records_it_and_maps_the_winner_back():
    base = nf.Flow("capitals")

    @base.node
    def answer(question: str, prompt: str) -> str:
        if question.endswith("??"):
            return "??"
        return "Paris" if prompt == "v2" or question.startswith("tie") else "Lyon"

    questions = [f"q{i}" for i in range(12)] + ["tie1", "tie2", "odd??"]
    df = base.batch([{"question": q} for q in questions], grid={"prompt": ["v1", "v2"]})
    rows = scorers.pairs(df, "v1", "v2", by="prompt", output="answer")
    assert len(rows) == 15 and rows[0]["output_a"] == "Lyon" and rows[0]["output_b"] == "Paris"

    def pairwise(server: ChatServer) -> nf.Flow:
        judge = nf.Flow("pairwise")

        @judge.resource
        def judge_client():
            return openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)

        scorers.pairwise_judge(judge, client="judge_client", seed=7)
        return judge

    with ChatServer(answers=prefer_paris) as server:
        judged = pairwise(server).batch(rows)
    ok = judged[judged["status"] == "succeeded"]
    assert len(ok) == 14, judged.loc[judged["status"] != "succeeded", ["question", "error_message"]].values.tolist()
    assert ok["preference"].tolist() == [1.0] * 12 + [0.5, 0.5]  # v2 wins whichever order it was shown in
    assert set(ok["preference.shown_first"]) == {"a", "b"}  # both orders happened
    assert (ok["preference.seed"] == 7).all()
    assert ok["preference.explanation"].iloc[0].startswith("Answer ")
    odd = judged[judged["status"] == "failed"].iloc[0]
    assert odd["error_type"] == "ScorerError" and "'WINNER: 1', 'WINNER: 2' or 'WINNER: TIE'" in odd["error_message"]
    line = scorers.pairwise_verdict(judged)
    assert line == "preference: v2 preferred on 12, v1 on 0, 2 ties of 14; sign test p < 0.001"
    # the same seed draws the same order: the record is reproducible
    with ChatServer(answers=prefer_paris) as server:
        again = pairwise(server).batch(rows)
    assert (again["status"] == judged["status"]).all()
    assert again["preference.shown_first"].fillna("-").tolist() == judged["preference.shown_first"].fillna("-").tolist()


def test_scores_survive_the_store_and_show_in_the_explorer(tmp_path):
    from nbflow._batch.explore import query

    flow = nf.Flow("stored")

    @flow.node
    def answer(question: str) -> str:
        return question.upper()

    scorers.exact_match(flow, "answer", "expected", name="exact")
    df = flow.batch(
        [{"question": "a", "expected": "A"}, {"question": "b", "expected": "c"}],
        store=tmp_path / "r.db",
        experiment="e1",
    )
    back = nf.load_batch(tmp_path / "r.db", "e1")
    assert (
        back["exact"].tolist() == [True, False]
        and back["exact.explanation"].tolist() == df["exact.explanation"].tolist()
    )
    state = query(df, {})
    cols = state["columns"]
    assert cols.index("exact.explanation") == cols.index("exact") + 1  # beside its score, not among the inputs
    assert state["rows"][1]["exact.explanation"] == "expected 'c', got 'B'"


@pytest.mark.anyio
async def test_a_judge_scorer_is_still_a_plain_function_outside_the_flow():
    with ChatServer(answers=grader) as server:
        graded = judged_flow(server).nodes["graded"].func
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key)
        score = await graded("It is 4.", "2+2?", "4", client)
        await client.close()
    assert score == nf.Score(1.0, "The answer contains 4.", {"grade": "C"})
