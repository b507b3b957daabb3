"""``nf.compare``: per-case deltas between two batch results (two experiments, or two variants of one).

Cases are matched by the values of the ``on`` columns (by default the row columns and the grid keys
the two sides share, never position); repeated samples of a case are averaged. Each case gets the
scores of both sides, their deltas, both statuses and a ``change``:

* ``newly_failing`` — succeeded in ``a``, no success in ``b``; ``fixed`` — the reverse;
* ``improved`` / ``regressed`` — the first score moved by more than ``tolerance``; ``unchanged``;
* ``both_failed``; ``only_a`` / ``only_b`` — the case is on one side only.

The frame is sorted worst first (newly failing, regressed, ...) and ``frame.attrs["summary"]`` holds
one line, e.g. ``b vs a on 20 cases: 3 improved, 1 regressed, 15 unchanged, 1 newly failing``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nbflow._batch.cases import SAMPLE_COLUMN, STATUS_COLUMNS
from nbflow._core.errors import BatchError
from nbflow._core.usage import USAGE_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CHANGES", "classify", "compare"]

CHANGES = ("newly_failing", "regressed", "both_failed", "only_a", "only_b", "fixed", "improved", "unchanged")


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame | str,
    variant: str | None = None,
    *,
    by: str | None = None,
    on: str | Sequence[str] | None = None,
    scores: str | Sequence[str] | None = None,
    tolerance: float = 1e-9,
) -> pd.DataFrame:
    """Per-case deltas from ``a`` to ``b``: ``nf.compare(old, new)`` for two batch results
    (e.g. two ``nf.load_batch`` experiments), or ``nf.compare(df, "terse", "steps", by="prompt")``
    for two variants of one result.

    ``on``: the columns that identify a case (default: the row columns and shared grid keys);
    ``scores``: the score columns (default: numeric or boolean outputs; the first one decides
    ``change``). Raises BatchError naming the column and the fix when they do not fit.
    """
    import pandas as pd

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

    sa, sb = _per_case(left, keys, score_cols), _per_case(right, keys, score_cols)
    merged = sa.merge(sb, on="_case", how="outer", suffixes=("_a", "_b"), sort=False, indicator=True)
    if len(sa) and len(sb) and not (merged["_merge"] == "both").any():
        raise BatchError(_no_shared_case(left, right, keys))
    rows = []
    first = score_cols[0]
    for _, r in merged.iterrows():
        side = r["_merge"]
        values = r["_values_a"] if side != "right_only" else r["_values_b"]
        row: dict[str, Any] = dict(zip(keys, values, strict=True))
        for s in score_cols:
            row[f"{s}_a"], row[f"{s}_b"] = r.get(f"{s}_a"), r.get(f"{s}_b")
            row[f"{s}_delta"] = _delta(row[f"{s}_a"], row[f"{s}_b"])
        ok_a, ok_b = r.get("_ok_a"), r.get("_ok_b")
        row["status_a"] = None if side == "right_only" else ("succeeded" if ok_a else "failed")
        row["status_b"] = None if side == "left_only" else ("succeeded" if ok_b else "failed")
        if side == "left_only":
            change = "only_a"
        elif side == "right_only":
            change = "only_b"
        else:
            change = classify(bool(ok_a), bool(ok_b), row[f"{first}_delta"], tolerance)
        row["change"] = change
        rows.append(row)
    columns = [*keys, *(f"{s}_{x}" for s in score_cols for x in ("a", "b", "delta")), "status_a", "status_b", "change"]
    out = pd.DataFrame(rows, columns=columns)
    order = {c: i for i, c in enumerate(CHANGES)}
    changes = out["change"].tolist()
    out = out.iloc[sorted(range(len(out)), key=lambda i: order[changes[i]])].reset_index(drop=True)
    counts = {c: int((out["change"] == c).sum()) for c in CHANGES}
    out.attrs.update({"counts": counts, "on": keys, "scores": score_cols, "labels": labels})
    out.attrs["summary"] = _summary(out, counts, first, labels)
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
    for name in (a_name, b_name):
        if not (frame[by] == name).any():
            raise BatchError(
                f"compare(by={by!r}): no rows with {by} == {name!r}; values: {sorted(map(str, frame[by].unique()))}"
            )
    left, right = frame[frame[by] == a_name], frame[frame[by] == b_name]
    left.attrs = right.attrs = dict(frame.attrs)
    return left, right, (a_name, b_name)


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


def _per_case(frame: Any, keys: list[str], scores: list[str]) -> Any:
    import pandas as pd

    groups: dict[str, dict[str, Any]] = {}
    for _, r in frame.iterrows():
        values = tuple(r[k] for k in keys)
        case = repr(values)
        g = groups.setdefault(case, {"_case": case, "_values": values, "_ok": False, **{s: [] for s in scores}})
        if r["status"] == "succeeded":
            g["_ok"] = True
            for s in scores:
                v = r[s]
                if isinstance(v, numbers.Real) and not (isinstance(v, float) and math.isnan(v)):
                    g[s].append(float(v))
    rows = []
    for g in groups.values():
        rows.append({**g, **{s: (sum(g[s]) / len(g[s]) if g[s] else math.nan) for s in scores}})
    return pd.DataFrame(rows, columns=["_case", "_values", "_ok", *scores])


def _delta(x: Any, y: Any) -> float:
    try:
        return float(y) - float(x)
    except (TypeError, ValueError):
        return math.nan


def _summary(out: Any, counts: dict[str, int], first: str, labels: tuple[str, str]) -> str:
    a, b = labels
    parts = [f"{counts[c]} {c.replace('_', ' ')}" for c in CHANGES if counts[c]]
    ma, mb = out[f"{first}_a"].astype("float64").mean(), out[f"{first}_b"].astype("float64").mean()
    means = f"; mean {first} {ma:.3f} -> {mb:.3f} ({mb - ma:+.3f})" if not (math.isnan(ma) or math.isnan(mb)) else ""
    return f"{b} vs {a} on {len(out)} cases: {', '.join(parts) or 'nothing to compare'}{means}"
