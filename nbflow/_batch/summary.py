"""``nf.summarize``: per-variant figures of a batch result (counts, error rate, latency, score means
with confidence intervals, usage and cost).

Intervals: a boolean score is a rate, so its interval is Wilson's score interval (right at 0% and
100% and for small n, where the normal approximation is not); a numeric score gets a percentile
bootstrap of the mean (2,000 resamples, a fixed seed: the same frame gives the same interval;
above 500 values the normal interval, which the bootstrap converges to, at a fraction of the cost).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import BatchError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["summarize"]

_FINISHED = ("succeeded", "failed")


def summarize(
    frame: pd.DataFrame,
    by: str | Sequence[str] | None = None,
    scores: str | Sequence[str] | None = None,
    *,
    ci: float | None = 0.95,
    digits: int | None = 4,
) -> pd.DataFrame:
    """Per-variant figures of a batch result: one row per value of ``by`` (default: the grid keys).

    Columns: ``rows``, ``succeeded``, ``failed``, ``not_finished`` (cancelled or pending),
    ``error_rate`` (failed / finished), ``latency_p50`` and ``latency_p95`` (seconds, finished rows)
    and ``<score>_mean`` for each score column (default: the numeric or boolean output columns),
    averaged over succeeded rows, with ``<score>_ci_low`` / ``<score>_ci_high`` (``ci=0.95``; Wilson
    for booleans, bootstrap for numbers; ``ci=None`` leaves them out). When the nodes reported usage
    (``nf.usage``): ``input_tokens_total``, ``output_tokens_total``, ``cost_total``, ``cost_mean``
    (per finished row) and ``failed_cost_total`` (attempts that failed). Floats are rounded to
    ``digits`` significant digits for display (``digits=None``: exact).
    """
    if ci is not None and (not isinstance(ci, float) or not 0 < ci < 1):
        raise BatchError(f"summarize(ci=...) is a confidence level between 0 and 1 (e.g. 0.95) or None, got {ci!r}")
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
        good = g.loc[status == "succeeded"]
        for s in scores:
            column = good[s]
            if column.dtype.kind in "iuf":  # a column of numbers (no bools, no objects): no check per value
                array = column.to_numpy(dtype="float64", na_value=math.nan)
                raw = values = array[~np.isnan(array)].tolist()
            else:
                raw = [
                    v for v in column if isinstance(v, numbers.Real) and not (isinstance(v, float) and math.isnan(v))
                ]
                values = [float(v) for v in raw]
            out[f"{s}_mean"] = sum(values) / len(values) if values else math.nan
            if ci is not None:
                rate = bool(raw) and all(isinstance(v, bool | np_bool) for v in raw)
                low, high = _wilson(values, ci) if rate else _bootstrap(values, ci)
                out[f"{s}_ci_low"], out[f"{s}_ci_high"] = low, high
        if usage:
            done = g.loc[status.isin(_FINISHED)]
            out["input_tokens_total"] = int(done["input_tokens"].fillna(0).sum())
            out["output_tokens_total"] = int(done["output_tokens"].fillna(0).sum())
            out["cost_total"] = float(done["cost"].sum(min_count=1)) if not done["cost"].isna().any() else math.nan
            out["cost_mean"] = out["cost_total"] / len(done) if len(done) else math.nan
            failed: Any = done.get("failed_cost", [])
            out["failed_cost_total"] = float(pd.Series(failed, dtype="float64").sum())
        return out

    import numpy as np

    np_bool = np.bool_
    usage = "input_tokens" in frame and "cost" in frame

    if not by:
        return _rounded(pd.DataFrame([figures(frame)], index=pd.Index(["all"], name="batch")), digits)
    rows = []
    keys: list[Any] = []
    for key, g in frame.groupby(by, sort=False, dropna=False):
        keys.append(key if len(by) > 1 else (key[0] if isinstance(key, tuple) else key))
        rows.append(figures(g))
    index = pd.MultiIndex.from_tuples(keys, names=by) if len(by) > 1 else pd.Index(keys, name=by[0])
    return _rounded(pd.DataFrame(rows, index=index), digits)


def _wilson(values: list[float], level: float) -> tuple[float, float]:
    """Wilson's score interval of a rate (values are 0/1)."""
    n = len(values)
    if not n:
        return math.nan, math.nan
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = sum(values) / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


_BOOTSTRAP_MAX_N = 500  # above this the mean is normal enough (CLT), and resampling costs O(2,000 x n)


def _bootstrap(values: list[float], level: float, resamples: int = 2000) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (fixed seed: reproducible); a normal interval for large n."""
    n = len(values)
    if not n:
        return math.nan, math.nan
    if n == 1:
        return values[0], values[0]
    import numpy as np

    if n > _BOOTSTRAP_MAX_N:
        from statistics import NormalDist, fmean

        # (numpy's deviation: statistics.stdev computes it exactly with fractions, ~0.6 µs a value)
        sd = float(np.std(np.asarray(values, dtype="float64"), ddof=1))
        mean, half = fmean(values), NormalDist().inv_cdf(0.5 + level / 2) * sd / math.sqrt(n)
        return mean - half, mean + half

    rng = np.random.default_rng(0)
    data = np.asarray(values, dtype="float64")
    means = data[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(low), float(high)


def _rounded(frame: pd.DataFrame, digits: int | None) -> pd.DataFrame:
    """Floats to ``digits`` significant digits (small costs stay visible, unlike a fixed number of decimals)."""
    if digits is None:
        return frame
    for col in frame.columns:
        if frame[col].dtype.kind == "f":
            frame[col] = [_significant(v, digits) for v in frame[col]]
    return frame


def _significant(value: float, digits: int) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def _all_numbers(series: pd.Series) -> bool:
    return len(series) > 0 and all(isinstance(v, numbers.Real) for v in series)
