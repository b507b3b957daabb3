"""nf.summarize: per-variant counts, error rate, latency percentiles and score means."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import nbflow as nf


def scored_flow() -> nf.Flow:
    flow = nf.Flow("eval")

    @flow.node
    def answer(question: str, prompt: str) -> str:
        if prompt == "terse" and question == "q2":
            raise ValueError("empty completion")
        return question if prompt == "exact" else question.upper()

    @flow.node
    def exact(answer: str, expected: str) -> bool:
        return answer == expected

    @flow.node
    def length(answer: str) -> int:
        return len(answer)

    return flow


ROWS = [{"question": f"q{i}", "expected": f"q{i}"} for i in range(4)]


def test_summary_per_grid_variant():
    df = scored_flow().batch(ROWS, grid={"prompt": ["exact", "terse"]})
    summary = nf.summarize(df)  # by defaults to the grid keys, scores to numeric/bool outputs
    assert summary.index.name == "prompt"
    assert summary.index.tolist() == ["exact", "terse"]
    assert summary["rows"].tolist() == [4, 4]
    assert summary["succeeded"].tolist() == [4, 3]
    assert summary["failed"].tolist() == [0, 1]
    assert summary["error_rate"].tolist() == [0.0, 0.25]
    assert summary["exact_mean"].tolist() == [1.0, 0.0]
    assert summary["length_mean"].tolist() == [2.0, 2.0]
    assert (summary["latency_p95"] >= summary["latency_p50"]).all()


def test_summary_with_explicit_columns_several_keys_and_no_key():
    df = scored_flow().batch(ROWS, grid={"prompt": ["exact", "terse"], "seed": [1, 2]})
    two = nf.summarize(df, by=["prompt", "seed"], scores="exact")
    assert two.index.names == ["prompt", "seed"]
    assert list(two.columns) == [
        "rows",
        "succeeded",
        "failed",
        "not_finished",
        "error_rate",
        "latency_p50",
        "latency_p95",
        "exact_mean",
    ]
    assert two.loc[("terse", 1), "failed"] == 1
    overall = nf.summarize(df, by=[], scores=["exact"])
    assert overall.index.tolist() == ["all"]
    assert overall.loc["all", "rows"] == 16


def test_summary_of_rows_that_never_finished():
    frame = pd.DataFrame(
        {"v": ["a", "a"], "status": ["pending", "cancelled"], "latency": [None, 0.5], "ok": [None, None]}
    )
    s = nf.summarize(frame, by="v", scores="ok")
    assert s.loc["a", "not_finished"] == 2
    assert math.isnan(s.loc["a", "error_rate"]) and math.isnan(s.loc["a", "latency_p50"])
    assert math.isnan(s.loc["a", "ok_mean"])


def test_summary_errors_name_the_column():
    df = scored_flow().batch(ROWS[:1], grid={"prompt": ["exact"]})
    with pytest.raises(nf.BatchError, match="'promt' is not a column"):
        nf.summarize(df, by="promt")
    with pytest.raises(nf.BatchError, match="needs a batch result"):
        nf.summarize(pd.DataFrame({"x": [1]}))
