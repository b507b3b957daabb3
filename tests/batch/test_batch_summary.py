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
    df = scored_flow().batch(ROWS, grid={"prompt": ["exact", "terse"], "seed": [1, 2]}, labels=["seed"])
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
        "exact_se",  # (session 11: a standard error and the n of every score)
        "exact_ci_low",
        "exact_ci_high",
        "exact_n",
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


def test_intervals_wilson_for_rates_bootstrap_for_means():
    frame = pd.DataFrame(
        {
            "status": ["succeeded"] * 10,
            "latency": [0.1] * 10,
            "ok": [True] * 8 + [False] * 2,
            "score": [float(i) for i in range(10)],
        }
    )
    s = nf.summarize(frame, by=[], scores=["ok", "score"])
    assert (s.loc["all", "ok_ci_low"], s.loc["all", "ok_ci_high"]) == (0.4902, 0.9433)  # Wilson, 4 digits
    low, high = s.loc["all", "score_ci_low"], s.loc["all", "score_ci_high"]
    assert 2.5 < low < 4.5 < high < 6.5  # bootstrap of the mean 4.5
    again = nf.summarize(frame, by=[], scores=["score"])
    assert again.loc["all", "score_ci_low"] == low  # a fixed seed: the same interval every time
    big = pd.DataFrame({"status": ["succeeded"] * 2000, "latency": [0.1] * 2000, "x": [0.0, 2.0] * 1000})
    b = nf.summarize(big, by=[], scores="x", digits=None)
    assert b.loc["all", "x_ci_low"] == pytest.approx(1 - 1.96 * 1.0005 / math.sqrt(2000), abs=1e-3)
    with pytest.raises(nf.BatchError, match="confidence level"):
        nf.summarize(frame, ci=95)


@pytest.mark.parametrize("n", [40, 3000])
@pytest.mark.parametrize("kind", ["int64", "float64 with NaN", "Int64 with NA", "object numbers"])
def test_a_numeric_score_column_gives_the_figures_of_the_value_by_value_formula(n, kind):
    # Issue 14: a column of numbers is read as an array (no check per value), and the normal interval's
    # deviation comes from numpy; the figures are those of the per-value formula.
    import numbers
    import random
    import statistics

    rng = random.Random(n)
    values: list = [rng.randint(-50, 50) for _ in range(n)]
    if kind == "float64 with NaN":
        values = [v / 7 if i % 9 else float("nan") for i, v in enumerate(values)]
    column = pd.Series(values, dtype={"int64": "int64", "Int64 with NA": "Int64"}.get(kind))
    if kind == "Int64 with NA":
        column[::11] = pd.NA
    if kind == "object numbers":
        column = pd.Series([v if i % 5 else "n/a" for i, v in enumerate(values)], dtype=object)
    frame = pd.DataFrame({"score": column, "status": "succeeded", "latency": 0.1})
    frame.attrs["outputs"] = ["score"]
    got = nf.summarize(frame, by=[], scores=["score"], digits=None).loc["all"]
    kept = [float(v) for v in column if isinstance(v, numbers.Real) and not (isinstance(v, float) and math.isnan(v))]
    assert len(kept) > n // 2
    assert got["score_mean"] == sum(kept) / len(kept)
    if len(kept) > 500:
        half = statistics.NormalDist().inv_cdf(0.975) * statistics.stdev(kept) / math.sqrt(len(kept))
        mean = statistics.fmean(kept)
        assert got["score_ci_low"] == pytest.approx(mean - half, rel=1e-12)
        assert got["score_ci_high"] == pytest.approx(mean + half, rel=1e-12)
    else:
        assert got["score_ci_low"] < got["score_mean"] < got["score_ci_high"]
