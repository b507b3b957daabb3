"""``nf.summarize``: per-variant figures of a batch result (counts, error rate, latency, score means)."""

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
) -> pd.DataFrame:
    """Per-variant figures of a batch result: one row per value of ``by`` (default: the grid keys).

    Columns: ``rows``, ``succeeded``, ``failed``, ``not_finished`` (cancelled or pending),
    ``error_rate`` (failed / finished), ``latency_p50`` and ``latency_p95`` (seconds, finished rows)
    and ``<score>_mean`` for each score column (default: the numeric or boolean output columns),
    averaged over succeeded rows.
    """
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
            values = [float(v) for v in good[s] if isinstance(v, numbers.Real)]
            out[f"{s}_mean"] = sum(values) / len(values) if values else math.nan
        return out

    if not by:
        return pd.DataFrame([figures(frame)], index=pd.Index(["all"], name="batch"))
    rows = []
    keys: list[Any] = []
    for key, g in frame.groupby(by, sort=False, dropna=False):
        keys.append(key if len(by) > 1 else (key[0] if isinstance(key, tuple) else key))
        rows.append(figures(g))
    index = pd.MultiIndex.from_tuples(keys, names=by) if len(by) > 1 else pd.Index(keys, name=by[0])
    return pd.DataFrame(rows, index=index)


def _all_numbers(series: pd.Series) -> bool:
    return len(series) > 0 and all(isinstance(v, numbers.Real) for v in series)
