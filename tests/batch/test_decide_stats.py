"""Deciding between prompts: nf.summarize's intervals, failed_as and repeats, nf.compare's paired tests and verdict.

Every statistic is checked against a published worked example or scipy (the reference implementation;
nbflow computes them in pure Python, nbflow/_batch/stats.py).
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from scipy import stats as scipy_stats

import nbflow as nf
from nbflow._batch import stats


def frame(rows: list[dict], outputs: list[str], grid: list[str] | None = None) -> pd.DataFrame:
    df = pd.DataFrame([{"status": "succeeded", "latency": 0.1, **r} for r in rows])
    df.attrs.update(outputs=outputs, grid=grid or [])
    return df


# --- nf.summarize ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 40, 97, 1000])
@pytest.mark.parametrize("share", [0.0, 1.0])
def test_a_rate_of_0_or_100_percent_has_an_interval_inside_0_1_that_contains_it(n, share):
    df = frame([{"ok": share == 1.0}] * n, ["ok"])
    for digits in (None, 4):
        s = nf.summarize(df, by=[], digits=digits).loc["all"]
        assert s["ok_mean"] == share
        assert 0.0 <= s["ok_ci_low"] <= share <= s["ok_ci_high"] <= 1.0
        assert s["ok_ci_low" if share == 0 else "ok_ci_high"] == share  # the end at the rate is exact
        assert s["ok_n"] == n
        # matplotlib's yerr takes the distances to the ends: never negative
        assert s["ok_mean"] - s["ok_ci_low"] >= 0 and s["ok_ci_high"] - s["ok_mean"] >= 0


def test_wilson_and_clopper_pearson_give_the_published_values():
    # Newcombe (1998), Statistics in Medicine 17:857-872, Table I: method 3 (Wilson score)
    published = {
        (81, 263): (0.2553, 0.3662),
        (15, 148): (0.0624, 0.1605),
        (0, 20): (0.0, 0.1611),
        (1, 29): (0.0061, 0.1718),
    }
    for (k, n), (low, high) in published.items():
        got = stats.wilson(k, n)
        assert (round(got[0], 4), round(got[1], 4)) == (low, high)
    # Clopper–Pearson: the "rule of three" closed form at k = 0 (upper end 1 - (alpha/2)^(1/n)) and scipy
    for n in (1, 5, 20, 100):
        assert stats.clopper_pearson(0, n) == (0.0, pytest.approx(1 - 0.025 ** (1 / n), abs=1e-12))
        assert stats.clopper_pearson(n, n) == (pytest.approx(0.025 ** (1 / n), abs=1e-12), 1.0)
    for k, n in [(81, 263), (15, 148), (1, 29), (7, 10), (499, 1000)]:
        ref = scipy_stats.binomtest(k, n).proportion_ci(method="exact")
        assert stats.clopper_pearson(k, n) == (pytest.approx(ref.low, abs=1e-10), pytest.approx(ref.high, abs=1e-10))
        ref = scipy_stats.binomtest(k, n).proportion_ci(method="wilson")
        assert stats.wilson(k, n) == (pytest.approx(ref.low, abs=1e-12), pytest.approx(ref.high, abs=1e-12))
    df = frame([{"ok": i < 15} for i in range(148)], ["ok"])
    s = nf.summarize(df, by=[], interval="clopper-pearson").loc["all"]
    assert (s["ok_ci_low"], s["ok_ci_high"]) == (0.05784, 0.1617)
    with pytest.raises(nf.BatchError, match=r"interval=.*'wilson', 'clopper-pearson'"):
        nf.summarize(df, interval="exact")


def test_failed_as_counts_failed_rows_or_leaves_them_out_and_says_which():
    rows = [{"v": "a", "ok": True}] * 6 + [{"v": "a", "ok": None, "status": "failed"}] * 2
    rows += [{"v": "b", "ok": True}] * 8
    df = frame(rows, ["ok"])
    out = nf.summarize(df, by="v", failed_as=None)
    assert out.loc["a", "ok_mean"] == 1.0 and out.loc["a", "ok_n"] == 6
    assert out.attrs["failed_as"] is None and "failed rows left out" in out.attrs["summary"]
    zero = nf.summarize(df, by="v", failed_as=0, digits=None)
    assert zero.loc["a", "ok_mean"] == 0.75 and zero.loc["a", "ok_n"] == 8
    assert (zero.loc["a", "ok_ci_low"], zero.loc["a", "ok_ci_high"]) == stats.wilson(6, 8)  # still a rate
    assert zero.attrs["failed_as"] == 0 and "failed rows counted as 0" in zero.attrs["summary"]
    assert zero.loc["b", "ok_mean"] == 1.0
    with pytest.raises(nf.BatchError, match=r"failed_as=\.\.\.\) is the score a failed row counts as"):
        nf.summarize(df, failed_as="zero")


def test_standard_error_per_variant_and_overall_with_n():
    rows = [{"v": v, "x": float(x)} for v, xs in (("a", [1, 2, 3, 4]), ("b", [2, 2, 8])) for x in xs]
    s = nf.summarize(frame(rows, ["x"]), by="v", overall=True, digits=None)
    assert s.index.tolist() == ["a", "b", "all"]
    assert s["x_n"].tolist() == [4, 3, 7]
    for name, xs in (("a", [1, 2, 3, 4]), ("b", [2, 2, 8]), ("all", [1, 2, 3, 4, 2, 2, 8])):
        assert s.loc[name, "x_se"] == pytest.approx(scipy_stats.sem(xs), rel=1e-12)
        assert s.loc[name, "x_ci_low"] <= s.loc[name, "x_mean"] <= s.loc[name, "x_ci_high"]
    assert s.attrs["summary"].startswith("x: a 2.5 (95% CI")


def test_repeats_reduce_each_case_before_the_statistics():
    # 3 cases x 4 samples: case 0 passes 1 of 4, case 1 passes 2, case 2 passes 4
    passes = {0: 1, 1: 2, 2: 4}
    rows = [{"q": q, "sample": i, "ok": i < passes[q]} for q in passes for i in range(4)]
    df = frame(rows, ["ok"])
    mean = nf.summarize(df, by=[], digits=None).loc["all"]  # samples present: "mean" per case by default
    assert mean["ok_n"] == 3 and mean["ok_mean"] == pytest.approx((0.25 + 0.5 + 1.0) / 3)
    assert nf.summarize(df, by=[], repeats="max", digits=None).loc["all", "ok_mean"] == 1.0
    majority = nf.summarize(df, by=[], repeats="majority", digits=None).loc["all"]
    assert majority["ok_mean"] == pytest.approx(1 / 3)  # 1 of 4: fail; 2 of 4, a split vote: fail; 4 of 4: pass
    assert (majority["ok_ci_low"], majority["ok_ci_high"]) == stats.wilson(1, 3)  # still a rate
    at2 = nf.summarize(df, by=[], repeats="pass@2", digits=None).loc["all"]
    closed = [1 - math.comb(4 - c, 2) / math.comb(4, 2) for c in passes.values()]
    assert at2["ok_mean"] == pytest.approx(sum(closed) / 3, rel=1e-12)
    assert nf.summarize(df, by=[], repeats=lambda vs: vs[0], digits=None).loc["all", "ok_mean"] == 1.0
    with pytest.raises(nf.BatchError, match="fewer than k=5"):
        nf.summarize(df, by=[], repeats="pass@5")
    with pytest.raises(nf.BatchError, match="'pass@k'"):
        nf.summarize(df, by=[], repeats="median")
    with pytest.raises(nf.BatchError, match="no 'sample' column"):
        nf.summarize(frame([{"ok": True}], ["ok"]), by=[], repeats="max")


def test_pass_at_k_is_the_unbiased_estimator():
    for n in range(1, 11):
        for c in range(n + 1):
            for k in range(1, n + 1):
                closed = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert stats.pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12)
    # the estimator is the mean over every k-subset of the samples of "some sample in it passed"
    samples = [1, 0, 0, 1, 0, 0, 0]
    subsets = list(itertools.combinations(samples, 3))
    assert stats.pass_at_k(7, 2, 3) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


@settings(max_examples=300, deadline=None)
@given(
    hs.integers(1, 2000).flatmap(lambda n: hs.tuples(hs.just(n), hs.integers(0, n))),
    hs.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_rate_intervals_stay_in_bounds_and_contain_the_rate(nk, level):
    n, k = nk
    for low, high in (stats.wilson(k, n, level), stats.clopper_pearson(k, n, level)):
        assert 0.0 <= low <= k / n <= high <= 1.0


@settings(max_examples=150, deadline=None)
@given(hs.lists(hs.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60), hs.booleans())
def test_summarize_intervals_contain_the_mean(values, rate):
    rows = [{"x": v > 0 if rate else v} for v in values]
    s = nf.summarize(frame(rows, ["x"]), by=[], digits=None).loc["all"]
    assert s["x_ci_low"] <= s["x_mean"] <= s["x_ci_high"]
    if rate:
        assert s["x_ci_low"] >= 0 and s["x_ci_high"] <= 1
    low, high = stats.paired_bootstrap(values, resamples=200)
    assert low <= math.fsum(values) / len(values) <= high


# --- the tests ------------------------------------------------------------------------------------
def test_mcnemar_on_a_published_table():
    # Fagerland, Lydersen & Laake (2013), BMC Med Res Methodol 13:91, Table 1 (airway hyper-responsiveness
    # before and after stem cell transplantation, 21 children): discordant pairs 1 and 7; exact conditional p = 0.070
    assert round(stats.mcnemar_exact(1, 7), 3) == 0.070
    assert stats.mcnemar_exact(1, 7) == scipy_stats.binomtest(1, 8).pvalue
    table = [(True, True)] * 1 + [(True, False)] * 1 + [(False, True)] * 7 + [(False, False)] * 12
    rows = [
        {"child": i, "when": w, "ahr": pair[j]}
        for i, pair in enumerate(table)
        for j, w in enumerate(("before", "after"))
    ]
    diff = nf.compare(frame(rows, ["ahr"], ["when"]), "before", "after", by="when")
    (s,) = diff.attrs["stats"]
    assert (s["test"], s["n"], s["better"], s["worse"], s["tied"]) == ("mcnemar", 21, 7, 1, 13)
    assert s["p_value"] == pytest.approx(0.0703125)
    assert diff.attrs["verdict"].startswith("ahr: no evidence of a difference between after and before")
    assert "after better on 7, worse on 1 of 21; +0.29 (95% CI" in diff.attrs["verdict"]
    assert diff.attrs["verdict"].endswith("p = 0.07)")


def test_wilcoxon_and_sign_test_match_scipy():
    rng = random.Random(7)
    for n in (3, 8, 20, 50, 51, 120):
        for shift in (0.0, 0.4):
            diffs = [rng.gauss(shift, 1) for _ in range(n)]
            stat, p = stats.wilcoxon(diffs)
            ref = scipy_stats.wilcoxon(diffs)
            assert stat == ref.statistic and p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
    for _ in range(20):  # ties and zeros: the normal approximation with the tie correction
        diffs = [rng.choice([-2, -1, 0, 1, 1, 2, 3]) for _ in range(rng.randint(10, 60))]
        ref = scipy_stats.wilcoxon(diffs)
        assert stats.wilcoxon(diffs) == (ref.statistic, pytest.approx(ref.pvalue, rel=1e-9))
    for pos, neg in [(10, 3), (0, 5), (7, 7), (30, 12)]:
        assert stats.sign_test(pos, neg) == pytest.approx(scipy_stats.binomtest(pos, pos + neg).pvalue, rel=1e-12)


def test_t_quantiles_and_holm():
    for df_ in (1, 2, 5, 39, 200):
        for q in (0.9, 0.975, 0.995, 0.025):
            assert stats.t_ppf(q, df_) == pytest.approx(scipy_stats.t.ppf(q, df_), rel=1e-9)
    # Holm (1979): sorted p 0.01, 0.03, 0.04 times 3, 2, 1, made monotone
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]  # (capped at 1, then never below an earlier step)


def test_the_paired_bootstrap_interval_covers_the_true_difference():
    # 500 simulated experiments (seeded): 40 cases, the new prompt's score = the old one's + 0.2 + noise
    rng = np.random.default_rng(2026)
    covered = 0
    for i in range(500):
        base = rng.normal(0.5, 0.3, size=40)
        new = base + 0.2 + rng.normal(0.0, 0.5, size=40)
        low, high = stats.paired_bootstrap(list(new - base), 0.95, seed=i)
        covered += low <= 0.2 <= high
    assert covered / 500 >= 0.93


# --- nf.compare -----------------------------------------------------------------------------------
def two_prompts(n: int = 40, seed: int = 1) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        hard = rng.random()
        rows.append({"q": i, "prompt": "v1", "ok": hard < 0.5, "words": 10 + rng.gauss(0, 2)})
        rows.append({"q": i, "prompt": "v2", "ok": hard < 0.8, "words": 12 + rng.gauss(0, 2)})
    return frame(rows, ["ok", "words"], ["prompt"])


def test_compare_names_columns_after_the_sides_and_says_a_verdict():
    diff = nf.compare(two_prompts(), "v1", "v2", by="prompt")
    assert [c for c in diff.columns if c.startswith(("ok", "status"))] == [
        "ok_v1", "ok_v2", "ok_delta", "status_v1", "status_v2",
    ]  # fmt: skip
    ok, words = diff.attrs["stats"]
    assert (ok["test"], words["test"]) == ("mcnemar", "wilcoxon")
    assert ok["better"] == int(((diff["ok_v2"] == 1) & (diff["ok_v1"] == 0)).sum())
    assert ok["worse"] == 0 and ok["n"] == 40
    assert ok["diff"] == pytest.approx(diff["ok_delta"].mean())
    assert ok["ci_low"] <= ok["diff"] <= ok["ci_high"]
    assert ok["p_value"] == pytest.approx(scipy_stats.binomtest(0, ok["better"]).pvalue)
    line = diff.attrs["verdict"]
    assert line == (
        f"ok: v2 better on {ok['better']}, worse on 0 of 40; +{ok['diff']:.2g} "
        f"(95% CI {ok['ci_low']:.2g}–{ok['ci_high']:.2g}), p < 0.001"
    )
    same = nf.compare(two_prompts(), "v1", "v2", by="prompt", seed=0)
    assert same.attrs["stats"] == diff.attrs["stats"]  # seeded: the same interval every time
    sign = nf.compare(two_prompts(), "v1", "v2", by="prompt", scores="words", test="sign").attrs["stats"][0]
    assert sign["test"] == "sign"
    assert sign["p_value"] == pytest.approx(
        scipy_stats.binomtest(sign["better"], sign["better"] + sign["worse"]).pvalue
    )


def test_compare_against_a_baseline_adjusts_with_holm():
    df = two_prompts()
    extra = df[df["prompt"] == "v1"].copy()
    extra["prompt"] = "v3"
    table = nf.compare(
        pd.concat([df, extra]).set_axis(range(120)).pipe(lambda f: f.__finalize__(df)), by="prompt", baseline="v1"
    )
    assert table[["variant", "score"]].values.tolist() == [["v2", "ok"], ["v2", "words"], ["v3", "ok"], ["v3", "words"]]
    for score in ("ok", "words"):
        rows = table[table["score"] == score]
        assert rows["p_holm"].tolist() == pytest.approx(stats.holm(rows["p_value"].tolist()))
    v3 = table[table["variant"] == "v3"].iloc[0]
    assert v3["better"] == v3["worse"] == 0 and v3["verdict"].startswith("ok: no evidence of a difference")
    assert table.attrs["correction"] == "holm" and " | " in table.attrs["verdict"]
    with pytest.raises(nf.BatchError, match=r"baseline=.v9.*no rows"):
        nf.compare(df, by="prompt", baseline="v9")
    with pytest.raises(nf.BatchError, match=r"compare\(df, by='column', baseline='v1'\)"):
        nf.compare(df)


def test_compare_refuses_data_that_do_not_pair_and_names_the_fix():
    df = two_prompts(6)
    dup = pd.concat([df, df]).set_axis(range(24))
    dup.attrs = df.attrs
    with pytest.raises(nf.BatchError, match=r"more than one row for the case \{'q': 0\}.*pass on=\[\.\.\.\]"):
        nf.compare(dup, "v1", "v2", by="prompt")
    with pytest.raises(nf.BatchError, match="a variant compared with itself"):
        nf.compare(df, "v1", "v1", by="prompt")


def test_compare_failed_as_and_repeats():
    rows = []
    for q in range(10):
        rows.append({"q": q, "prompt": "v1", "ok": True})
        failed = q < 3
        rows.append(
            {"q": q, "prompt": "v2", "ok": None if failed else True, "status": "failed" if failed else "succeeded"}
        )
    df = frame(rows, ["ok"], ["prompt"])
    left_out = nf.compare(df, "v1", "v2", by="prompt").attrs["stats"][0]
    assert (left_out["n"], left_out["excluded"], left_out["worse"]) == (7, 3, 0)
    assert left_out["verdict"].startswith("ok: no evidence")
    counted = nf.compare(df, "v1", "v2", by="prompt", failed_as=0).attrs["stats"][0]
    assert (counted["n"], counted["excluded"], counted["worse"]) == (10, 0, 3)
    # samples: 2 per case; v2 passes one of two on every case
    rows = [
        {"q": q, "sample": s, "prompt": p, "ok": p == "v1" or s == 0}
        for q in range(8)
        for s in range(2)
        for p in ("v1", "v2")
    ]
    df = frame(rows, ["ok"], ["prompt"])
    assert nf.compare(df, "v1", "v2", by="prompt").attrs["stats"][0]["diff"] == -0.5  # mean per case
    assert nf.compare(df, "v1", "v2", by="prompt", repeats="max").attrs["stats"][0]["diff"] == 0.0
    majority = nf.compare(df, "v1", "v2", by="prompt", repeats="majority").attrs["stats"][0]
    assert (majority["test"], majority["worse"], majority["diff"]) == ("mcnemar", 8, -1.0)


def test_repeats_of_a_real_batch_are_reduced_per_case_and_a_sample_column_of_data_is_not():
    import threading

    flow = nf.Flow("sampled")
    calls: dict[int, int] = {}
    lock = threading.Lock()

    @flow.node
    def ok(q: int) -> bool:
        with lock:
            calls[q] = calls.get(q, 0) + 1
            return calls[q] <= q  # case q passes q of its 3 samples

    df = flow.batch([{"q": q} for q in range(4)], repeats=3)
    assert df.attrs["repeats"] == 3 and len(df) == 12
    s = nf.summarize(df, scores="ok", digits=None).loc["all"]
    assert s["ok_n"] == 4 and s["ok_mean"] == pytest.approx((0 + 1 / 3 + 2 / 3 + 1) / 4)
    at1 = nf.summarize(df, scores="ok", repeats="pass@1", digits=None).loc["all"]
    assert at1["ok_mean"] == pytest.approx(s["ok_mean"])  # pass@1 is the mean pass rate
    calls.clear()
    plain = flow.batch([{"q": q, "sample": q} for q in range(4)])  # a row column named "sample": data
    assert nf.summarize(plain, scores="ok").loc["all", "ok_n"] == 4
    with pytest.raises(nf.BatchError, match="no 'sample' column with several samples"):
        nf.summarize(plain, scores="ok", repeats="max")
