"""The shared look of nbflow's widgets: state colours (from ``nbflow.view``), chips, symbols, CSS.

Everything here returns HTML strings, so any widget (run view, batch progress) can reuse it.
"""

from __future__ import annotations

import functools
import html

from nbflow._core.states import NodeStatus, RunStatus
from nbflow._show.draw import STATE_COLORS, SYMBOLS

__all__ = ["CSS", "STATE_COLORS", "SYMBOLS", "badge", "chip", "chips", "colors", "esc"]

# Order in which counts are listed: what needs attention first.
ORDER = ("failed", "running", "paused", "cancelled", "skipped", "succeeded", "pending")

CSS = """
<style>
.nbflow-w { font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; line-height: 1.4; }
.nbflow-w .nbflow-chip { display: inline-block; padding: 0 7px; margin: 1px 3px 1px 0; border-radius: 9px;
  border: 1px solid; font-size: 12px; color: #212529; white-space: nowrap; }
.nbflow-w .nbflow-badge { display: inline-block; padding: 1px 8px; border-radius: 4px; border: 1px solid;
  font-weight: 600; color: #212529; }
.nbflow-w pre { margin: 2px 0; padding: 6px; background: rgba(128,128,128,0.08); border-radius: 4px;
  white-space: pre-wrap; word-break: break-word; font-size: 12px; }
.nbflow-w .nbflow-scroll { max-height: 320px; overflow: auto; }
.nbflow-w table { border-collapse: collapse; font-size: 12px; }
.nbflow-w th, .nbflow-w td { text-align: left; padding: 2px 8px; border-bottom: 1px solid rgba(128,128,128,0.2);
  vertical-align: top; }
.nbflow-w .nbflow-muted { color: #868e96; }
.nbflow-w .nbflow-err { color: #c92a2a; }
.nbflow-graph g.nbflow-node { cursor: pointer; }
.nbflow-graph g.nbflow-selected path { stroke: #1c7ed6 !important; stroke-width: 3px; }
</style>
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def colors(status: NodeStatus | RunStatus | str) -> tuple[str, str]:
    """(fill, border) for a node or run state; run states borrow the node colours."""
    try:
        return STATE_COLORS[NodeStatus(str(status))]
    except ValueError:
        return STATE_COLORS[NodeStatus.PENDING]


def chip(status: NodeStatus | RunStatus | str, text: str | None = None) -> str:
    """A rounded coloured label, e.g. ``✓ 3 succeeded``."""
    return _chip(str(status), text)


@functools.lru_cache(maxsize=1024)  # a few states and counts: the same labels on every redraw
def _chip(value: str, text: str | None) -> str:
    fill, line = colors(value)
    label = text if text is not None else value
    return (
        f'<span class="nbflow-chip nbflow-chip-{esc(value)}" style="background:{fill};border-color:{line}">'
        f"{SYMBOLS.get(value, '')} {esc(label)}</span>"
    )


def chips(counts: dict[str, int]) -> str:
    """Chips for counts by state, most urgent first (``{"failed": 1, "succeeded": 3}``)."""
    return "".join(chip(s, f"{counts[s]} {s}") for s in ORDER if counts.get(s))


def badge(status: NodeStatus | RunStatus | str) -> str:
    """A bold status label, for a run's header."""
    value = str(status)
    fill, line = colors(value)
    return (
        f'<span class="nbflow-badge nbflow-badge-{esc(value)}" style="background:{fill};border-color:{line}">'
        f"{SYMBOLS.get(value, '')} {esc(value.upper())}</span>"
    )
