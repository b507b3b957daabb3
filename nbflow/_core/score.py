"""``nf.Score``: what a scorer node returns — a value for the statistics and an explanation for a reader.

A batch frame splits an output column of Scores into the value (the column itself: bool or number, what
``nf.summarize`` and ``nf.compare`` read) and ``<node>.explanation`` (plus ``<node>.<key>`` for each
entry of ``details``), shown beside the score in the results explorer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from nbflow._core.records import record

__all__ = ["Score"]


@record(frozen=True)
class Score:
    """A scorer's verdict on one output: ``value`` (bool or number), ``explanation`` (why), ``details``
    (more columns, e.g. the order a pairwise judge saw the answers in)."""

    value: bool | float | None
    explanation: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
