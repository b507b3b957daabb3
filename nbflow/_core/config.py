"""Global settings a notebook user may change: ``nf.config.show = False`` and friends."""

from __future__ import annotations

from typing import Any

from nbflow._core.errors import ConfigError
from nbflow._core.records import record

__all__ = ["Config", "check_trace", "config"]


@record()
class Config:
    """nbflow's switches (one shared instance: ``nbflow.config``).

    ``show``: in a notebook, ``flow.run``/``arun``/``start`` display the live run view (a per-call
    ``show=`` wins). ``widgets``: displaying a Run or RunHandle in a notebook shows the interactive
    widget; False shows the static SVG instead. ``redraw_interval``: the live view redraws at most
    once per this many seconds (events in between are coalesced). ``trace``: ``"otel"`` sends
    every run's spans to OpenTelemetry's global tracer provider, or set a ``TracerProvider`` (needs
    ``pip install 'nbflow[otel]'``; a per-call ``trace=`` wins; None: off). See docs/tracing.md.

    ``raise_on_failure``: ``flow.run`` raises ``RunFailedError`` when the run did not succeed (for
    script-like notebooks that should stop at the first failed cell). ``check_mutation``: fingerprint
    each node's inputs before and after it runs and fail the node (``InputMutationError``) when it
    changed one in place (costs a hash of the inputs per node; on in nbflow's tests).
    ``process_workers``: how many worker processes ``executor="process"`` nodes share (None: one per core).
    ``keep_memory``: bytes a batch without ``store=`` and without ``keep=`` may spend keeping its succeeded rows'
    runs in memory, packed (64 MiB; 0: none kept); a row past it is marked as not openable (docs/batch.md).
    """

    show: bool = True
    widgets: bool = True
    redraw_interval: float = 0.25
    raise_on_failure: bool = False
    check_mutation: bool = False
    process_workers: int | None = None
    trace: Any = None
    keep_memory: int = 64 * 2**20

    def __setattr__(self, name: str, value: Any) -> None:
        if (
            name == "process_workers"
            and value is not None
            and (isinstance(value, bool) or not isinstance(value, int) or value < 1)
        ):
            raise ConfigError(
                f"nbflow.config.process_workers must be a positive number of processes or None, got {value!r}"
            )
        if name in ("show", "widgets", "raise_on_failure", "check_mutation") and not isinstance(value, bool):
            raise ConfigError(f"nbflow.config.{name} must be True or False, got {value!r}")
        if name == "redraw_interval" and (
            isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 60
        ):
            raise ConfigError(
                f"nbflow.config.redraw_interval must be a number of seconds in (0, 60], got {value!r} "
                f"(e.g. 0.25: at most four redraws a second)"
            )
        if name == "keep_memory" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(
                f"nbflow.config.keep_memory is the bytes a batch may spend keeping its succeeded rows' runs in "
                f"memory, an int >= 0 (e.g. 256 * 2**20 for 256 MiB; 0: keep none); got {value!r}"
            )
        if name == "trace" and value is not None:
            value = check_trace(value, "nbflow.config.trace")
        object.__setattr__(self, name, value)  # an unknown name fails here (slots): no silent typos


def check_trace(value: Any, where: str) -> Any:
    """``value`` if it is a trace option (``"otel"``, a TracerProvider, a Tracer, None or False); else ConfigError."""
    if value is None or value is False:
        return value
    if value == "otel":
        try:
            import opentelemetry.trace  # noqa: F401
        except ImportError:
            raise ConfigError(
                f"{where} = 'otel' needs the OpenTelemetry SDK, which is not installed; "
                f"install it with: pip install 'nbflow[otel]'"
            ) from None
        return value
    if callable(getattr(value, "get_tracer", None)) or callable(getattr(value, "start_span", None)):
        return value
    raise ConfigError(
        f'{where} must be "otel" (OpenTelemetry\'s global tracer provider), a TracerProvider, a Tracer, '
        f"or None/False (off); got {value!r}"
    )


config = Config()
