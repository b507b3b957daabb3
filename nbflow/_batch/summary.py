"""``nf.summarize``: per-variant figures of a batch result (counts, error rate, latency, score means
with standard errors and confidence intervals, usage and cost).

Intervals (nbflow/_batch/stats.py): a boolean score is a rate, so its interval is Wilson's score interval
(or Clopper–Pearson's, ``interval="clopper-pearson"``), inside [0, 1] and containing the rate, also at 0 %
and 100 %; a numeric score gets a percentile bootstrap of the mean (2,000 resamples, a fixed seed: the same
frame gives the same interval; above 500 values the normal interval, which the bootstrap converges to, at a
fraction of the cost), kept inside the values' range. Every interval contains its mean.

Failed rows have no score: ``failed_as=None`` leaves them out of the mean (the default), ``failed_as=0`` (or
any number) counts each as that score; ``frame.attrs["failed_as"]`` and the one-line ``attrs["summary"]`` say
which. Repeated samples (``repeats=N``: a ``sample`` column) are reduced to one value per case first
(``repeats="mean"`` by default; ``"majority"``, ``"max"``, ``"pass@k"``), so ``<score>_n`` counts cases.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from nbflow._batch import stats
from nbflow._batch.cases import SAMPLE_COLUMN, STATUS_COLUMNS
from nbflow._core.errors import BatchError
from nbflow._core.usage import USAGE_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "case_columns",
    "check_failed_as",
    "check_pass_at_k",
    "check_repeats",
    "reduce_cases",
    "score_values",
    "summarize",
]

_FINISHED = ("succeeded", "failed")
_INTERVALS = ("wilson", "clopper-pearson")

Repeats = str | Callable[[list[float]], float] | None


def summarize(
    frame: pd.DataFrame,
    by: str | Sequence[str] | None = None,
    scores: str | Sequence[str] | None = None,
    *,
    ci: float | None = 0.95,
    digits: int | None = 4,
    failed_as: float | None = None,
    repeats: Repeats = None,
    interval: str = "wilson",
    overall: bool = False,
) -> pd.DataFrame:
    """Per-variant figures of a batch result: one row per value of ``by`` (default: the grid keys).

    Columns: ``rows``, ``succeeded``, ``failed``, ``not_finished`` (cancelled or pending),
    ``error_rate`` (failed / finished), ``latency_p50`` and ``latency_p95`` (seconds, finished rows)
    and for each score column (default: the numeric or boolean output columns) ``<score>_mean``,
    ``<score>_se`` (standard error), ``<score>_ci_low`` / ``<score>_ci_high`` (``ci=0.95``; Wilson
    for booleans — ``interval="clopper-pearson"`` for the exact interval — bootstrap for numbers;
    ``ci=None`` leaves them out) and ``<score>_n`` (the values averaged). ``failed_as``: None leaves
    failed rows out of the scores, a number counts each failed row as that score. ``repeats``: how
    the samples of a case (``repeats=N``) become one value: ``"mean"`` (default), ``"majority"``,
    ``"max"``, ``"pass@k"`` or a function of the list of values. ``overall=True`` adds an ``all`` row.
    When the nodes reported usage (``nf.usage``): ``input_tokens_total``, ``output_tokens_total``,
    ``cost_total``, ``cost_mean`` (per finished row) and ``failed_cost_total`` (attempts that failed).
    Floats are rounded to ``digits`` significant digits for display (``digits=None``: exact).
    ``frame.attrs``: ``failed_as``, ``repeats``, ``scores`` and ``summary`` (one line).
    """
    if ci is not None and (not isinstance(ci, float) or not 0 < ci < 1):
        raise BatchError(f"summarize(ci=...) is a confidence level between 0 and 1 (e.g. 0.95) or None, got {ci!r}")
    if interval not in _INTERVALS:
        raise BatchError(f"summarize(interval=...) is one of {', '.join(map(repr, _INTERVALS))}; got {interval!r}")
    check_failed_as(failed_as, "summarize")
    import pandas as pd

    if "status" not in frame or "latency" not in frame:
        raise BatchError("summarize() needs a batch result (the frame flow.batch returned), with status and latency")
    if by is None:
        by = list(frame.attrs.get("grid") or [])
    by = [by] if isinstance(by, str) else list(by)
    for b in by:
        if b not in frame:
            raise BatchError(f"summarize(by=...): {b!r} is not a column; columns: {', '.join(map(str, frame.columns))}")
    if scores is None:
        outputs = [o for o in frame.attrs.get("outputs", []) if o in frame]
        scores = [
            o
            for o in outputs
            if pd.api.types.is_bool_dtype(frame[o])
            or pd.api.types.is_numeric_dtype(frame[o])
            or _all_numbers(frame.loc[frame["status"] == "succeeded", o])
        ]
    scores = [scores] if isinstance(scores, str) else list(scores)
    for s in scores:
        if s not in frame:
            raise BatchError(
                f"summarize(scores=...): {s!r} is not a column; columns: {', '.join(map(str, frame.columns))}"
            )
    # (flow.batch(repeats=N) records N; a hand-made frame is judged by its column)
    repeats_run = frame.attrs.get("repeats")
    sampled = SAMPLE_COLUMN in frame.columns and (
        repeats_run > 1 if isinstance(repeats_run, int) else frame[SAMPLE_COLUMN].nunique(dropna=True) > 1
    )
    how = check_repeats(repeats, "summarize") if sampled or repeats is not None else None
    if how is not None and not sampled:
        raise BatchError(
            f"summarize(repeats={repeats!r}) reduces the samples of each case, but the frame has no "
            f"{SAMPLE_COLUMN!r} column with several samples (run flow.batch(..., repeats=N)), or leave repeats out"
        )
    cases = case_columns(frame, [*by]) if how is not None else []
    usage = "input_tokens" in frame and "cost" in frame

    def figures(g: pd.DataFrame) -> dict[str, Any]:
        status = g["status"]
        ok = int((status == "succeeded").sum())
        bad = int((status == "failed").sum())
        finished = g.loc[status.isin(_FINISHED), "latency"].astype("float64")
        out: dict[str, Any] = {
            "rows": len(g),
            "succeeded": ok,
            "failed": bad,
            "not_finished": len(g) - ok - bad,
            "error_rate": bad / (ok + bad) if ok + bad else math.nan,
            "latency_p50": float(finished.quantile(0.5)) if len(finished) else math.nan,
            "latency_p95": float(finished.quantile(0.95)) if len(finished) else math.nan,
        }
        for s in scores:
            values, rate = score_values(g, s, failed_as)
            if how is not None:
                values, rate = reduce_cases(g, s, cases, how, failed_as, rate)
            n = len(values)
            mean = sum(values) / n if n else math.nan
            out[f"{s}_mean"] = mean
            out[f"{s}_se"] = stats.standard_error(values)
            if ci is not None:
                if rate:
                    k = round(mean * n)
                    low, high = (stats.wilson if interval == "wilson" else stats.clopper_pearson)(k, n, ci)
                else:
                    low, high = stats.mean_interval(values, ci)
                    if n:  # the mean of these values cannot leave their range
                        low, high = max(low, min(values)), min(high, max(values))
                # (and contains the mean as computed here: a sum of floats can land an ulp outside the range)
                out[f"{s}_ci_low"], out[f"{s}_ci_high"] = min(low, mean), max(high, mean)
            out[f"{s}_n"] = n
        if usage:
            done = g.loc[status.isin(_FINISHED)]
            out["input_tokens_total"] = int(done["input_tokens"].fillna(0).sum())
            out["output_tokens_total"] = int(done["output_tokens"].fillna(0).sum())
            out["cost_total"] = float(done["cost"].sum(min_count=1)) if not done["cost"].isna().any() else math.nan
            out["cost_mean"] = out["cost_total"] / len(done) if len(done) else math.nan
            failed: Any = done.get("failed_cost", [])
            out["failed_cost_total"] = float(pd.Series(failed, dtype="float64").sum())
        return out

    if not by:
        result = pd.DataFrame([figures(frame)], index=pd.Index(["all"], name="batch"))
    else:
        rows = []
        keys: list[Any] = []
        for key, g in frame.groupby(by, sort=False, dropna=False):
            keys.append(key if len(by) > 1 else (key[0] if isinstance(key, tuple) else key))
            rows.append(figures(g))
        if overall:
            keys.append(("all",) * len(by) if len(by) > 1 else "all")
            rows.append(figures(frame))
        index = pd.MultiIndex.from_tuples(keys, names=by) if len(by) > 1 else pd.Index(keys, name=by[0])
        result = pd.DataFrame(rows, index=index)
    result = _rounded(result, digits, scores if ci is not None else [])
    result.attrs.update(
        {
            "scores": scores,
            "failed_as": failed_as,
            "repeats": how if isinstance(how, str) or how is None else getattr(how, "__name__", repr(how)),
            "summary": _line(result, scores, failed_as, how, ci),
        }
    )
    return result


def check_failed_as(failed_as: Any, where: str) -> None:
    """``failed_as`` is None (leave failed rows out) or a finite number (count each as that score)."""
    if failed_as is not None and (
        not isinstance(failed_as, numbers.Real) or (isinstance(failed_as, float) and not math.isfinite(failed_as))
    ):
        raise BatchError(
            f"{where}(failed_as=...) is the score a failed row counts as (e.g. failed_as=0), or None to leave "
            f"failed rows out; got {failed_as!r}"
        )


def check_repeats(repeats: Repeats, where: str) -> str | Callable[[list[float]], float]:
    """The reducer ``repeats=`` names (default ``"mean"``), checked."""
    if repeats is None:
        return "mean"
    if callable(repeats):
        return repeats
    if isinstance(repeats, str):
        if repeats in ("mean", "majority", "max"):
            return repeats
        k = repeats.removeprefix("pass@")
        if repeats.startswith("pass@") and k.isdigit() and int(k) >= 1:
            return repeats
    raise BatchError(
        f"{where}(repeats=...) reduces the samples of a case to one value: 'mean', 'majority', 'max', "
        f"'pass@k' (e.g. 'pass@3') or a function of the list of values; got {repeats!r}"
    )


def case_columns(frame: pd.DataFrame, skip: Sequence[str] = ()) -> list[str]:
    """The columns that identify a case: not an output (nor a ``node.field`` of one), status, usage, sample."""
    outputs = [str(o) for o in frame.attrs.get("outputs", [])]
    drop = {*outputs, *STATUS_COLUMNS, *USAGE_COLUMNS, SAMPLE_COLUMN, *skip}
    prefixes = tuple(f"{o}." for o in outputs)
    return [c for c in frame.columns if c not in drop and not str(c).startswith(prefixes)]


def score_values(g: pd.DataFrame, score: str, failed_as: float | None) -> tuple[list[float], bool]:
    """The values of ``score`` in ``g`` (succeeded rows, plus ``failed_as`` per failed row) and whether it is a rate.

    Row order is kept; a succeeded row with no number (None, NaN, text) has no value."""
    import numpy as np

    status = g["status"]
    good = g.loc[status == "succeeded", score]
    if good.dtype.kind in "iuf":  # a column of numbers (no bools, no objects): no check per value
        array = good.to_numpy(dtype="float64", na_value=math.nan)
        raw: list[Any] = array[~np.isnan(array)].tolist()
        rate = False
    else:
        raw = [v for v in good if isinstance(v, numbers.Real) and not (isinstance(v, float) and math.isnan(v))]
        rate = g[score].dtype.kind == "b" or (bool(raw) and all(isinstance(v, bool | np.bool_) for v in raw))
    values = [float(v) for v in raw]
    if failed_as is not None:
        values += [float(failed_as)] * int((status == "failed").sum())
        rate = rate and failed_as in (0, 1)
    return values, rate


def reduce_cases(
    g: pd.DataFrame,
    score: str,
    cases: list[str],
    how: str | Callable[[list[float]], float],
    failed_as: float | None,
    rate: bool,
) -> tuple[list[float], bool]:
    """One value per case of ``g`` from its samples' values (``how``); still a rate after majority or max."""
    per_case: dict[str, list[float]] = {}
    status = g["status"].tolist()
    column = g[score].tolist()
    keys = [repr(t) for t in g[cases].itertuples(index=False, name=None)] if cases else ["all"] * len(g)
    for key, st, v in zip(keys, status, column, strict=True):
        bucket = per_case.setdefault(key, [])
        if st == "succeeded" and isinstance(v, numbers.Real) and not (isinstance(v, float) and math.isnan(v)):
            bucket.append(float(v))
        elif st == "failed" and failed_as is not None:
            bucket.append(float(failed_as))
    out = []
    for vs in per_case.values():
        if not vs:
            continue
        if isinstance(how, str) and how.startswith("pass@"):
            check_pass_at_k(vs, how, score, "summarize")
        out.append(float(how(vs)) if callable(how) else stats.reduce_repeats(vs, how))
    return out, rate and how in ("majority", "max")


def check_pass_at_k(values: list[float], how: str, score: str, where: str) -> None:
    """pass@k needs pass/fail values and at least k of them per case."""
    k = int(how.removeprefix("pass@"))
    if any(v not in (0.0, 1.0) for v in values):
        raise BatchError(f"{where}(repeats={how!r}): pass@k needs a pass/fail score; {score!r} has {values!r}")
    if len(values) < k:
        raise BatchError(
            f"{where}(repeats={how!r}): a case has {len(values)} scored samples of {score!r}, fewer than k={k}; "
            f"run more repeats (flow.batch(..., repeats=N), N >= {k}) or use a smaller k"
        )


def _line(result: pd.DataFrame, scores: list[str], failed_as: Any, how: Any, ci: float | None) -> str:
    """One line: each group's first score with its interval and n, and how failed rows and samples counted."""
    parts = []
    if scores:
        s = scores[0]
        for key, row in result.iterrows():
            name = "/".join(map(str, key)) if isinstance(key, tuple) else str(key)
            text = f"{name} {row[f'{s}_mean']:.3g}"
            if ci is not None and not math.isnan(row[f"{s}_ci_low"]):
                text += f" ({ci:.0%} CI {row[f'{s}_ci_low']:.3g}–{row[f'{s}_ci_high']:.3g})"
            parts.append(f"{text}, n={int(row[f'{s}_n'])}")
    failed = "failed rows left out" if failed_as is None else f"failed rows counted as {failed_as!r}"
    samples = "" if how is None else f"; samples reduced by {how if isinstance(how, str) else 'a function'}"
    head = f"{scores[0]}: " if scores else ""
    return f"{head}{'; '.join(parts) or 'no scores'} ({failed}{samples})"


def _rounded(frame: pd.DataFrame, digits: int | None, scores: Sequence[str] = ()) -> pd.DataFrame:
    """Floats to ``digits`` significant digits (small costs stay visible, unlike a fixed number of decimals);
    an interval rounded stays around its rounded mean."""
    if digits is None:
        return frame
    for col in frame.columns:
        if frame[col].dtype.kind == "f":
            frame[col] = [_significant(v, digits) for v in frame[col]]
    for s in scores:
        mean = frame[f"{s}_mean"]
        frame[f"{s}_ci_low"] = frame[f"{s}_ci_low"].where(~(frame[f"{s}_ci_low"] > mean), mean)
        frame[f"{s}_ci_high"] = frame[f"{s}_ci_high"].where(~(frame[f"{s}_ci_high"] < mean), mean)
    return frame


def _significant(value: float, digits: int) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def _all_numbers(series: pd.Series) -> bool:
    return len(series) > 0 and all(isinstance(v, numbers.Real) for v in series)
