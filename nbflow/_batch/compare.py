"""``nf.compare``: per-case deltas and a paired test between two batch results (two experiments, or two
variants of one), or between every variant of a frame and a baseline.

Cases are matched by the values of the ``on`` columns (by default the row columns and the grid keys
the two sides share, never position); repeated samples of a case are reduced to one value (``repeats=``,
the mean by default); a side with two rows for one case that are not samples is refused. Each case gets
the scores of both sides (columns named after the sides), their deltas, both statuses and a ``change``:

* ``newly_failing`` — succeeded in ``a``, no success in ``b``; ``fixed`` — the reverse;
* ``improved`` / ``regressed`` — the first score moved by more than ``tolerance``; ``unchanged``;
* ``both_failed``; ``only_a`` / ``only_b`` — the case is on one side only.

The frame is sorted worst first (newly failing, regressed, ...) and ``frame.attrs["summary"]`` holds
one line, e.g. ``b vs a on 20 cases: 3 improved, 1 regressed, 15 unchanged, 1 newly failing``.

The decision (nbflow/_batch/stats.py): per score, over the cases scored on both sides, McNemar's exact
test for 0/1 scores or Wilcoxon's signed-rank test (or the sign test) for numbers, the mean difference
with a paired bootstrap interval, and ``frame.attrs["verdict"]``: "v2 better on 12, worse on 3 of 40;
+0.22 (95% CI 0.08–0.36), p = 0.02" or "no evidence of a difference ...". Against a baseline, the
p-values are Holm-adjusted over the variants of each score (the family of comparisons with one baseline).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nbflow._batch import stats
from nbflow._batch.cases import SAMPLE_COLUMN, STATUS_COLUMNS
from nbflow._batch.summary import Repeats, check_failed_as, check_pass_at_k, check_repeats
from nbflow._core.errors import BatchError
from nbflow._core.usage import USAGE_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CHANGES", "STAT_COLUMNS", "classify", "compare", "verdict"]

CHANGES = ("newly_failing", "regressed", "both_failed", "only_a", "only_b", "fixed", "improved", "unchanged")


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame | str | None = None,
    variant: str | None = None,
    *,
    by: str | None = None,
    baseline: str | None = None,
    on: str | Sequence[str] | None = None,
    scores: str | Sequence[str] | None = None,
    tolerance: float = 1e-9,
    failed_as: float | None = None,
    repeats: Repeats = None,
    test: str = "auto",
    ci: float = 0.95,
    alpha: float = 0.05,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-case deltas and a paired test from ``a`` to ``b``: ``nf.compare(old, new)`` for two batch results
    (e.g. two ``nf.load_batch`` experiments), ``nf.compare(df, "v1", "v2", by="prompt")`` for two variants of
    one result, or ``nf.compare(df, by="prompt", baseline="v1")`` for every variant against a baseline.

    ``on``: the columns that identify a case (default: the row columns and shared grid keys);
    ``scores``: the score columns (default: numeric or boolean outputs; the first one decides
    ``change`` and the verdict). ``failed_as``: None leaves a case out of the test when a side failed,
    a number counts the failed side as that score. ``repeats``: the samples of a case become one value
    (``"mean"``, ``"majority"``, ``"max"``, ``"pass@k"``). ``test``: ``"auto"`` (McNemar's exact test
    for 0/1 scores, Wilcoxon's signed-rank test otherwise), ``"wilcoxon"`` or ``"sign"``. ``ci``: the
    level of the paired bootstrap interval of the mean difference (``seed``: its resampling), ``alpha``:
    the p-value below which the verdict reports a difference. Raises BatchError naming the column and
    the fix when the data do not pair up.

    Two sides: one row per case, columns named after the sides (``<score>_<side>``, ``<score>_delta``,
    ``status_<side>``, ``change``); ``attrs["verdict"]`` is one line, ``attrs["stats"]`` one dict per
    score (the columns of the baseline form). Baseline form: one row per variant and score with
    ``variant``, ``baseline``, ``score``, ``n``, ``better``, ``worse``, ``tied``, ``excluded``,
    ``baseline_mean``, ``variant_mean``, ``diff``, ``ci_low``, ``ci_high``, ``test``, ``p_value``,
    ``p_holm`` (Holm-adjusted over the variants of a score) and ``verdict``.
    """
    import pandas as pd

    check_failed_as(failed_as, "compare")
    how = check_repeats(repeats, "compare")
    if test not in _TESTS:
        raise BatchError(f"compare(test=...) is one of {', '.join(map(repr, _TESTS))}; got {test!r}")
    for name, level in (("ci", ci), ("alpha", alpha)):
        if not isinstance(level, float) or not 0 < level < 1:
            raise BatchError(f"compare({name}=...) is a number between 0 and 1 (e.g. 0.95 / 0.05), got {level!r}")
    options = {"tolerance": tolerance, "test": test, "ci": ci, "alpha": alpha, "seed": seed}
    if b is None:
        return _against_baseline(a, by, baseline, on, scores, how, failed_as, variant, options)
    if baseline is not None:
        raise BatchError(
            "compare(..., baseline=...) compares every variant of one frame with the baseline: "
            "compare(df, by='column', baseline='name'); for two sides give no baseline"
        )
    if isinstance(b, str):
        left, right, labels = _variants(a, b, variant, by)
    else:
        if variant is not None or by is not None:
            raise BatchError(
                "compare(a, b): with two frames, give no variant/by; for two variants of one frame use "
                "compare(df, 'name_a', 'name_b', by='column')"
            )
        left, right, labels = a, b, _labels(a, b)
    for side, frame in (("a", left), ("b", right)):
        if not isinstance(frame, pd.DataFrame) or "status" not in frame:
            raise BatchError(f"compare(): {side} must be a batch result (the frame flow.batch or nf.load_batch gave)")
    outputs = [o for o in dict.fromkeys([*left.attrs.get("outputs", []), *right.attrs.get("outputs", [])])]
    keys = _on(on, left, right, outputs, by)
    score_cols = _scores(scores, left, right, outputs)
    if not score_cols:
        raise BatchError("compare(): no score columns; pass scores=[...] (numeric or boolean output columns)")

    sa = _per_case(left, keys, score_cols, how, failed_as, labels[0])
    sb = _per_case(right, keys, score_cols, how, failed_as, labels[1])
    merged = sa.merge(sb, on="_case", how="outer", suffixes=("_a", "_b"), sort=False, indicator=True)
    if len(sa) and len(sb) and not (merged["_merge"] == "both").any():
        raise BatchError(_no_shared_case(left, right, keys))
    la, lb = labels
    rows = []
    first = score_cols[0]
    for _, r in merged.iterrows():
        side = r["_merge"]
        values = r["_values_a"] if side != "right_only" else r["_values_b"]
        row: dict[str, Any] = dict(zip(keys, values, strict=True))
        for s in score_cols:
            row[f"{s}_{la}"], row[f"{s}_{lb}"] = r.get(f"{s}_a"), r.get(f"{s}_b")
            row[f"{s}_delta"] = _delta(row[f"{s}_{la}"], row[f"{s}_{lb}"])
        ok_a, ok_b = r.get("_ok_a"), r.get("_ok_b")
        row[f"status_{la}"] = None if side == "right_only" else ("succeeded" if ok_a else "failed")
        row[f"status_{lb}"] = None if side == "left_only" else ("succeeded" if ok_b else "failed")
        if side == "left_only":
            change = "only_a"
        elif side == "right_only":
            change = "only_b"
        else:
            change = classify(bool(ok_a), bool(ok_b), row[f"{first}_delta"], tolerance)
        row["change"] = change
        rows.append(row)
    columns = [
        *keys,
        *(f"{s}_{x}" for s in score_cols for x in (la, lb, "delta")),
        f"status_{la}",
        f"status_{lb}",
        "change",
    ]
    out = pd.DataFrame(rows, columns=columns)
    order = {c: i for i, c in enumerate(CHANGES)}
    changes = out["change"].tolist()
    out = out.iloc[sorted(range(len(out)), key=lambda i: order[changes[i]])].reset_index(drop=True)
    counts = {c: int((out["change"] == c).sum()) for c in CHANGES}
    results = [_paired(out, s, labels, options) for s in score_cols]
    out.attrs.update({"counts": counts, "on": keys, "scores": score_cols, "labels": labels})
    out.attrs["summary"] = _summary(out, counts, first, labels)
    out.attrs["stats"] = results
    out.attrs["verdict"] = results[0]["verdict"]
    out.attrs["failed_as"] = failed_as
    return out


_TESTS = ("auto", "wilcoxon", "sign")
STAT_COLUMNS = (
    "variant",
    "baseline",
    "score",
    "n",
    "better",
    "worse",
    "tied",
    "excluded",
    "baseline_mean",
    "variant_mean",
    "diff",
    "ci_low",
    "ci_high",
    "test",
    "p_value",
)


def _paired(out: pd.DataFrame, score: str, labels: tuple[str, str], options: dict[str, Any]) -> dict[str, Any]:
    """The paired statistics of one score between the two sides of a per-case frame (see ``compare``)."""
    la, lb = labels
    xa, xb = out[f"{score}_{la}"].astype("float64").tolist(), out[f"{score}_{lb}"].astype("float64").tolist()
    both = out["change"].isin(("only_a", "only_b")).tolist()
    pairs = [(x, y) for x, y, only in zip(xa, xb, both, strict=True) if not only and x == x and y == y]
    shared = sum(1 for only in both if not only)
    tol = options["tolerance"]
    diffs = [y - x for x, y in pairs]
    n = len(pairs)
    better = sum(1 for d in diffs if d > tol)
    worse = sum(1 for d in diffs if d < -tol)
    binary = n > 0 and all(v in (0.0, 1.0) for p in pairs for v in p)
    kind = options["test"]
    if kind == "auto":
        kind = "mcnemar" if binary else "wilcoxon"
    if kind == "mcnemar":
        p = stats.mcnemar_exact(better, worse)
    elif kind == "sign":
        p = stats.sign_test(better, worse)
    else:
        p = stats.wilcoxon([0.0 if abs(d) <= tol else d for d in diffs])[1]
    low, high = stats.paired_bootstrap(diffs, options["ci"], seed=options["seed"])
    row = {
        "variant": lb,
        "baseline": la,
        "score": score,
        "n": n,
        "better": better,
        "worse": worse,
        "tied": n - better - worse,
        "excluded": shared - n,
        "baseline_mean": math.fsum(x for x, _ in pairs) / n if n else math.nan,
        "variant_mean": math.fsum(y for _, y in pairs) / n if n else math.nan,
        "diff": math.fsum(diffs) / n if n else math.nan,
        "ci_low": low,
        "ci_high": high,
        "test": kind,
        "p_value": p if n else math.nan,
    }
    row["verdict"] = verdict(row, row["p_value"], options["ci"], options["alpha"])
    return row


def verdict(row: dict[str, Any], p: float, ci: float, alpha: float) -> str:
    """One line: "v2 better on 12, worse on 3 of 40; +0.22 (95% CI 0.08–0.36), p = 0.02" or no evidence."""
    v, base, score = row["variant"], row["baseline"], row["score"]
    if not row["n"]:
        return f"{score}: {v} vs {base}: no case scored on both sides, nothing to decide"
    low, high = row["ci_low"], row["ci_high"]
    interval = f"{_num(low)}–{_num(high)}" if low >= 0 else f"{_num(low)} to {_num(high)}"
    pv = "p < 0.001" if p < 0.001 else f"p = {p:.2g}"
    counts = f"{v} better on {row['better']}, worse on {row['worse']} of {row['n']}"
    figures = f"{_num(row['diff'], sign=True)} ({ci:.0%} CI {interval}), {pv}"
    if p < alpha:
        return f"{score}: {counts}; {figures}"
    return f"{score}: no evidence of a difference between {v} and {base} ({counts}; {figures})"


def _num(x: float, sign: bool = False) -> str:
    """Two significant digits below 1 (a rate: 0.22), three above (a length: 12.3)."""
    return f"{x:{'+' if sign else ''}.{2 if abs(x) < 1 else 3}g}"


def _against_baseline(
    frame: pd.DataFrame,
    by: str | None,
    baseline: str | None,
    on: str | Sequence[str] | None,
    scores: str | Sequence[str] | None,
    how: Any,
    failed_as: float | None,
    variant: str | None,
    options: dict[str, Any],
) -> pd.DataFrame:
    """Every variant of ``by`` against ``baseline``: one row per variant and score, Holm-adjusted per score."""
    import pandas as pd

    if by is None or baseline is None or variant is not None:
        raise BatchError(
            "compare(a, b) compares two results; compare(df, 'v1', 'v2', by='column') two variants; "
            "compare(df, by='column', baseline='v1') every variant against v1"
        )
    if by not in frame:
        raise BatchError(f"compare(by={by!r}): not a column; columns: {', '.join(map(str, frame.columns))}")
    names = list(dict.fromkeys(frame[by].tolist()))
    if baseline not in names:
        raise BatchError(f"compare(baseline={baseline!r}): no rows with {by} == {baseline!r}; values: {sorted(names)}")
    others = [v for v in names if v != baseline]
    if not others:
        raise BatchError(f"compare(baseline={baseline!r}): {by} has no other value to compare with it")
    rows: list[dict[str, Any]] = []
    for v in others:
        diff = compare(frame, baseline, v, by=by, on=on, scores=scores, failed_as=failed_as, repeats=how, **options)
        rows.extend(diff.attrs["stats"])
    for s in dict.fromkeys(r["score"] for r in rows):
        group = [r for r in rows if r["score"] == s]
        tested = [r for r in group if r["p_value"] == r["p_value"]]
        for r, adjusted in zip(tested, stats.holm([r["p_value"] for r in tested]), strict=True):
            r["p_holm"] = adjusted
        for r in group:
            r.setdefault("p_holm", math.nan)
            r["verdict"] = verdict(r, r["p_holm"], options["ci"], options["alpha"]) + (
                " (Holm-adjusted)" if len(tested) > 1 else ""
            )
    out = pd.DataFrame(rows, columns=[*STAT_COLUMNS, "p_holm", "verdict"])
    out.attrs.update({"baseline": baseline, "by": by, "failed_as": failed_as, "correction": "holm"})
    out.attrs["verdict"] = " | ".join(out["verdict"])
    return out


def _labels(a: Any, b: Any) -> tuple[str, str]:
    """The two sides' names: their experiment names (nf.load_batch), else "a" and "b"."""
    names = (a.attrs.get("experiment"), b.attrs.get("experiment"))
    if all(isinstance(n, str) and n for n in names) and names[0] != names[1]:
        return str(names[0]), str(names[1])
    return "a", "b"


def _no_shared_case(a: Any, b: Any, keys: list[str]) -> str:
    """Why no case of ``a`` matches one of ``b``: the key columns whose values never meet, and the fix."""
    disjoint = [k for k in keys if not set(map(repr, a[k].unique())) & set(map(repr, b[k].unique()))]
    if disjoint:
        k = disjoint[0]
        sample_a, sample_b = sorted(map(str, a[k].unique()))[:3], sorted(map(str, b[k].unique()))[:3]
        rest = [c for c in keys if c not in disjoint]
        fix = f"on={rest!r}" if rest else "on=[...] naming the case columns"
        return (
            f"compare(): no case of a matches one of b: column {k!r} has other values on each side "
            f"({', '.join(sample_a)} vs {', '.join(sample_b)}); to compare across it, pass {fix}"
        )
    return f"compare(): no case of a matches one of b on the columns {keys!r}; pass on=[...] naming the case columns"


def classify(ok_a: bool, ok_b: bool, delta: float | None, tolerance: float = 1e-9) -> str:
    """A case present on both sides: ``newly_failing``, ``fixed``, ``both_failed``, ``improved``,
    ``regressed`` (the score moved by more than ``tolerance``) or ``unchanged``."""
    if ok_a and not ok_b:
        return "newly_failing"
    if ok_b and not ok_a:
        return "fixed"
    if not ok_a and not ok_b:
        return "both_failed"
    if delta is None or math.isnan(delta) or abs(delta) <= tolerance:
        return "unchanged"
    return "improved" if delta > 0 else "regressed"


def _variants(frame: pd.DataFrame, b: str, variant: str | None, by: str | None) -> tuple[Any, Any, tuple[str, str]]:
    if by is None or variant is None:
        raise BatchError("compare(df, 'name_a', 'name_b', by='column'): give both variant names and by=")
    if by not in frame:
        raise BatchError(f"compare(by={by!r}): not a column; columns: {', '.join(map(str, frame.columns))}")
    a_name, b_name = b, variant
    if a_name == b_name:
        raise BatchError(
            f"compare(df, {b!r}, {variant!r}, by={by!r}): a variant compared with itself; name two variants"
        )
    for name in (a_name, b_name):
        if not (frame[by] == name).any():
            raise BatchError(
                f"compare(by={by!r}): no rows with {by} == {name!r}; values: {sorted(map(str, frame[by].unique()))}"
            )
    left, right = frame[frame[by] == a_name], frame[frame[by] == b_name]
    left.attrs = right.attrs = dict(frame.attrs)
    return left, right, (str(a_name), str(b_name))


def _on(on: str | Sequence[str] | None, a: Any, b: Any, outputs: list[str], by: str | None) -> list[str]:
    if on is not None:
        keys = [on] if isinstance(on, str) else list(on)
        for k in keys:
            for side, frame in (("a", a), ("b", b)):
                if k not in frame:
                    raise BatchError(f"compare(on=...): {k!r} is not a column of {side}")
        return keys
    skip = {*outputs, *STATUS_COLUMNS, *USAGE_COLUMNS, SAMPLE_COLUMN, by}
    keys = [
        c
        for c in a.columns
        if c in b.columns and c not in skip and not str(c).startswith(tuple(f"{o}." for o in outputs))
    ]
    if not keys:
        raise BatchError("compare(): the two results share no case column; pass on=[...] naming the case columns")
    return keys


def _scores(scores: str | Sequence[str] | None, a: Any, b: Any, outputs: list[str]) -> list[str]:
    if scores is not None:
        cols = [scores] if isinstance(scores, str) else list(scores)
        for s in cols:
            for side, frame in (("a", a), ("b", b)):
                if s not in frame:
                    raise BatchError(f"compare(scores=...): {s!r} is not a column of {side}")
        return cols
    out = []
    for o in outputs:
        if o in a and o in b:
            ok = a.loc[a["status"] == "succeeded", o]
            if len(ok) and all(isinstance(v, numbers.Real) for v in ok):
                out.append(o)
    return out


def _per_case(frame: Any, keys: list[str], scores: list[str], how: Any, failed_as: float | None, side: str) -> Any:
    """One row per case: its key values, whether any sample succeeded, and each score reduced over its samples."""
    import pandas as pd

    groups: dict[str, dict[str, Any]] = {}
    sampled = SAMPLE_COLUMN in frame.columns
    samples = frame[SAMPLE_COLUMN].tolist() if sampled else [None] * len(frame)
    for (_, r), sample in zip(frame.iterrows(), samples, strict=True):
        values = tuple(r[k] for k in keys)
        case = repr(values)
        g = groups.setdefault(
            case, {"_case": case, "_values": values, "_ok": False, "_samples": set(), **{s: [] for s in scores}}
        )
        if sample in g["_samples"]:
            raise BatchError(
                f"compare(): {side} has more than one row for the case {dict(zip(keys, values, strict=True))!r}, so "
                f"its cases cannot be paired; pass on=[...] naming the columns that identify a case"
                + ("" if sampled else " (repeated samples come from flow.batch(..., repeats=N))")
            )
        g["_samples"].add(sample)
        if r["status"] == "succeeded":
            g["_ok"] = True
            for s in scores:
                v = r[s]
                if isinstance(v, numbers.Real) and not (isinstance(v, float) and math.isnan(v)):
                    g[s].append(float(v))
        elif r["status"] == "failed" and failed_as is not None:
            for s in scores:
                g[s].append(float(failed_as))
    rows = []
    for g in groups.values():
        reduced = {}
        for s in scores:
            vs = g[s]
            if isinstance(how, str) and how.startswith("pass@") and vs:
                check_pass_at_k(vs, how, s, "compare")
            reduced[s] = (float(how(vs)) if callable(how) else stats.reduce_repeats(vs, how)) if vs else math.nan
        rows.append({**g, **reduced})
    return pd.DataFrame(rows, columns=["_case", "_values", "_ok", *scores])


def _delta(x: Any, y: Any) -> float:
    try:
        return float(y) - float(x)
    except (TypeError, ValueError):
        return math.nan


def _summary(out: Any, counts: dict[str, int], first: str, labels: tuple[str, str]) -> str:
    a, b = labels
    parts = [f"{counts[c]} {c.replace('_', ' ')}" for c in CHANGES if counts[c]]
    ma, mb = out[f"{first}_{a}"].astype("float64").mean(), out[f"{first}_{b}"].astype("float64").mean()
    means = f"; mean {first} {ma:.3f} -> {mb:.3f} ({mb - ma:+.3f})" if not (math.isnan(ma) or math.isnan(mb)) else ""
    return f"{b} vs {a} on {len(out)} cases: {', '.join(parts) or 'nothing to compare'}{means}"
