"""Per-variant progress: one entry per grid combination with its row counts by status.

One rule for both places that show it: the explorer (``nf.explore``, from a finished frame) and the
batch's live display in a kernel (from the running batch's state, refreshed 4 times a second while
it runs). Counting reads the batch's result list; the row engine does nothing extra per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from nbflow._core.secrets import SCREEN_MASK, Secret, is_secret_name

if TYPE_CHECKING:
    from nbflow._batch.rows import State
    from nbflow._core.secrets import Redactor

__all__ = ["ORDER", "count_by_variant", "live_variants", "variant_labels"]

MASK = SCREEN_MASK
# The order of the segments in a bar (and of the counts in its text).
ORDER = ("succeeded", "failed", "paused", "cancelled", "running", "pending")


def short(value: Any, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def variant_labels(keys: Sequence[str], rows: Iterable[Sequence[Any]], redact: Redactor | None = None) -> list[str]:
    """A label per row's grid values: ``"gpt-4o"`` for one grid key, ``"model=gpt-4o, temperature=0.2"``
    for several. A secret-named key's values (and ``nf.Secret`` values) never show: they are numbered in
    order of appearance (``api_key=••••••#2``), so variants stay apart without their values reaching the
    screen; ``redact`` masks the run's secret texts inside the others (before shortening: a cut secret
    would still leak)."""
    secret = [is_secret_name(k) for k in keys]
    seen: list[dict[str, int]] = [{} for _ in keys]
    labels = []
    for values in rows:
        shown = []
        for j, v in enumerate(values):
            if secret[j] or isinstance(v, Secret):
                n = seen[j].setdefault(repr(v), len(seen[j]) + 1)
                shown.append(f"{MASK}#{n}")
            else:
                shown.append(short(redact(str(v)) if redact else v))
        labels.append(shown[0] if len(keys) == 1 else ", ".join(f"{k}={v}" for k, v in zip(keys, shown, strict=True)))
    return labels


def count_by_variant(labels: Iterable[str], statuses: Iterable[str]) -> list[dict[str, Any]]:
    """``[{"label": ..., "counts": {status: n, ...}}, ...]`` in first-seen order, counts in ``ORDER``."""
    groups: dict[str, dict[str, int]] = {}
    for label, status in zip(labels, statuses, strict=True):
        counts = groups.get(label)
        if counts is None:
            counts = groups[label] = dict.fromkeys(ORDER, 0)
        counts[status] = counts.get(status, 0) + 1
    return [{"label": label, "counts": counts} for label, counts in groups.items()]


def live_variants(state: State) -> Any:
    """A function returning the running batch's per-variant counts (None when the batch has no grid)."""
    cases = state.cases
    keys = list(cases.grid_keys)
    if not keys:
        return None
    labels = variant_labels(keys, ([case.row.get(k) for k in keys] for case in cases.cases))
    results, running = state.results, state.running

    def counts() -> list[dict[str, Any]]:
        statuses = [
            s if s is not None else ("running" if i in running else "pending") for i, s in enumerate(results.statuses())
        ]
        return count_by_variant(labels, statuses)

    return counts
