"""Global settings a notebook user may change: ``nf.config.show = False`` and friends."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Config", "config"]


@dataclass(slots=True)
class Config:
    """nbflow's switches (one shared instance: ``nbflow.config``).

    ``show``: in a notebook, ``flow.run``/``arun``/``start`` display the live run view (a per-call
    ``show=`` wins). ``widgets``: displaying a Run or RunHandle in a notebook shows the interactive
    widget; False shows the static SVG instead. ``redraw_interval``: the live view redraws at most
    once per this many seconds (events in between are coalesced).
    """

    show: bool = True
    widgets: bool = True
    redraw_interval: float = 0.25


config = Config()
