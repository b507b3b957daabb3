"""Every batch row keeps its run: keep=, df.nbflow, load_run of batch rows, paused rows and flow.answer."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from tests.helpers.store_files import after_restart


def eval_flow() -> nf.Flow:
    flow = nf.Flow("eval_rows")

    @flow.node
    def prompt(question: str, variant: str = "terse") -> str:
        return f"[{variant}] {question}"

    @flow.node
    def answer(prompt: str) -> str:
        if "boom" in prompt:
            raise ValueError(f"model refused: {prompt}")
        return prompt.upper()

    @flow.node
    def score(answer: str) -> float:
        return float(len(answer) % 3 == 0)

    return flow


CASES = [{"question": q} for q in ("a", "boom one", "bb", "boom two", "ccc")]


def test_failed_rows_keep_their_run_by_default_and_open_from_the_frame() -> None:
    df = eval_flow().batch(CASES, grid={"variant": ["terse", "steps"]}, progress=False)
    failed = df[df["status"] == "failed"]
    assert len(failed) == 4
    run = failed.nbflow.run(0)  # by position in the filtered frame
    assert isinstance(run, nf.Run) and run.run_id == failed["run_id"].iloc[0]
    assert run.nodes["prompt"].output.startswith("[terse] boom")  # an intermediate output of the failed row
    assert run.nodes["answer"].error_type == "ValueError"
    assert run.nodes["score"].status is nf.NodeStatus.SKIPPED
    tb = failed.nbflow.traceback(0)
    assert "model refused" in tb and 'raise ValueError(f"model refused' in tb
    label = failed.index[1]
    assert df.nbflow.run(label).run_id == df.loc[label, "run_id"]  # by index label
    assert df.nbflow.run(0)["score"] == df.loc[0, "score"]  # a succeeded row opens too by default (packed)
    explicit = eval_flow().batch(CASES, keep="failed", progress=False)
    with pytest.raises(nf.BatchError, match=r"was not kept.*keep='failed'.*keep='all'"):
        explicit.nbflow.run(0)  # a succeeded row: not kept under an explicit keep="failed"
    assert df.nbflow.traceback(0) is None
    assert [r.run_id for r in df.nbflow.runs(df["status"] == "failed")] == list(failed["run_id"])


def test_keep_all_and_none_and_the_bound() -> None:
    flow = eval_flow()
    everything = flow.batch(CASES, keep="all", progress=False)
    assert [everything.nbflow.run(i).run_id for i in range(len(everything))] == list(everything["run_id"])
    assert everything.nbflow.run(0)["score"] == everything.loc[0, "score"]
    nothing = flow.batch(CASES, keep="none", progress=False)
    with pytest.raises(nf.BatchError, match="keep='none'"):
        nothing.nbflow.run(1)
    bounded = flow.batch(CASES, keep="all", keep_limit=2, concurrency=1, progress=False)  # rows 0 and 1 kept
    bounded.nbflow.run(1)
    with pytest.raises(nf.BatchError, match="at most 2 in memory"):
        bounded.nbflow.run(4)
    with pytest.raises(nf.BatchError, match="keep= says which rows"):
        flow.batch(CASES, keep="some", progress=False)


def test_the_frame_stays_an_ordinary_dataframe(tmp_path: Path) -> None:
    flow = eval_flow()
    a = flow.batch(CASES[:2], progress=False)
    b = flow.batch(CASES[2:4], progress=False)
    both = pd.concat([a, b], ignore_index=True)  # attrs dropped (they differ): found by run id
    assert both.nbflow.run(1).nodes["answer"].error_type == "ValueError"
    assert both.nbflow.run(3).nodes["answer"].error_type == "ValueError"
    assert both.loc[[1, 3], "status"].tolist() == ["failed", "failed"]
    pytest.importorskip("pyarrow")
    path = tmp_path / "results.parquet"
    a.to_parquet(path)
    back = pd.read_parquet(path)
    assert back.nbflow.run(1).run_id == a.loc[1, "run_id"]  # the archive's id survived the file
    no_ids = a.drop(columns=["run_id"])
    with pytest.raises(nf.BatchError, match="no 'run_id' column"):
        no_ids.nbflow.run(0)


def test_with_a_store_every_row_keeps_its_run_on_disk(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    df = eval_flow().batch(CASES, store=db, progress=False)
    for i in range(len(df)):
        run = nf.load_run(db, df.loc[i, "run_id"])
        assert run.status.value == df.loc[i, "status"]
        if df.loc[i, "status"] == "succeeded":
            assert run["score"] == df.loc[i, "score"]
        else:
            rec = run.nodes["answer"]
            assert "model refused" in rec.error_message and "ValueError: model refused" in rec.traceback
    # A new process (a kernel restart): the frame read back from the store opens its rows from disk.
    out = after_restart(db, 'run = frame.nbflow.run(1)\nprint(run.status.name, run.nodes["prompt"].output)')
    assert out.strip() == "FAILED [terse] boom one"


def approval_flow() -> nf.Flow:
    flow = nf.Flow("approve_rows")

    @flow.node
    def draft(topic: str) -> str:
        return f"post about {topic}"

    @flow.node
    async def review(draft: str, topic: str) -> str:
        if topic.startswith("auto"):
            return "approve"
        return await nf.ask(f"Publish {draft!r}?", options=["approve", "reject"])

    @flow.node
    def publish(review: str, draft: str) -> str:
        return draft.upper() if review == "approve" else "(rejected)"

    return flow


@pytest.mark.parametrize("stored", [False, True])
def test_paused_rows_show_their_question_and_resume_with_flow_answer(tmp_path: Path, stored: bool) -> None:
    flow = approval_flow()
    rows = [{"topic": t} for t in ("auto-1", "tea", "coffee", "auto-2")]
    db = tmp_path / "runs.db" if stored else None
    df = flow.batch(rows, store=db, keep="none", progress=False)
    assert list(df["status"]) == ["succeeded", "paused", "paused", "succeeded"]
    assert df.loc[1, "question_prompt"] == "Publish 'post about tea'?"
    assert df.loc[1, "question_options"] == ["approve", "reject"]
    assert pd.isna(df.loc[0, "question_prompt"]) and df.loc[1, "error_type"] is None
    assert df.attrs["counts"] == {"succeeded": 2, "paused": 2}
    with pytest.raises(nf.AnswerError):
        flow.answer(df, {1: "maybe"})  # not an option: nothing changes
    with pytest.raises(nf.BatchError, match=r"not 'paused'.*paused rows: 1, 2"):
        flow.answer(df, {0: "approve"})
    out = flow.answer(df, {1: "approve", 2: "reject"})
    assert out is df
    assert list(df["status"]) == ["succeeded"] * 4
    assert list(df["publish"]) == ["POST ABOUT AUTO-1", "POST ABOUT TEA", "(rejected)", "POST ABOUT AUTO-2"]
    assert df["question_prompt"].isna().all()
    if not stored:
        with pytest.raises(nf.BatchError, match="keep='none'"):
            df.nbflow.run(1)  # answered and succeeded: keep="none" lets it go from memory
    if stored:
        with nf.BatchStore(db) as store:
            saved = store.load(df.attrs["batch_id"])
        assert list(saved["status"]) == ["succeeded"] * 4 and saved.loc[2, "publish"] == "(rejected)"
        assert nf.load_run(db, df.loc[2, "run_id"])["publish"] == "(rejected)"


def test_a_paused_row_does_not_trip_the_circuit_breaker() -> None:
    flow = approval_flow()
    rows = [{"topic": t} for t in ("a", "b", "c", "d")]
    df = flow.batch(rows, max_consecutive_failures=2, progress=False)
    assert list(df["status"]) == ["paused"] * 4 and df.attrs["stopped"] is None
