"""Per-node resilience policies as values: ``Retry``, ``Default``, and the error-as-data types.

These only describe what to do; ``nbflow/_engine/policy.py`` applies them. See docs/resilience.md.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import field
from typing import Any, Literal

from nbflow._core.errors import (
    FlowDefinitionError,
    GraphError,
    MapItemError,
    NbflowError,
    NodeTimeoutError,
    ResourceError,
)
from nbflow._core.records import record

__all__ = ["Default", "ErrorInfo", "Failed", "OnError", "Retry", "is_transient", "retry_after_of"]

# Exceptions from HTTP/LLM client libraries are recognised by class name, so nbflow imports none of
# them: httpx (TimeoutException, ConnectError, NetworkError), requests (Timeout, ConnectionError),
# openai/anthropic (APIConnectionError, APITimeoutError).
_TRANSIENT_NAME_SUFFIXES = (
    "Timeout",
    "TimeoutError",
    "TimeoutException",
    "ConnectionError",
    "ConnectError",
    "NetworkError",
)


def _status_of(exc: BaseException) -> int | None:
    for obj in (exc, getattr(exc, "response", None)):
        if obj is None:
            continue
        for attr in ("status_code", "status"):
            value = getattr(obj, attr, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def retry_after_of(exc: BaseException) -> float | None:
    """Seconds the error asks to wait: its ``retry_after`` attribute, else a numeric ``Retry-After`` header."""
    value: Any = getattr(exc, "retry_after", None)
    if value is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
        if headers is not None and hasattr(headers, "get"):
            try:
                value = headers.get("retry-after") or headers.get("Retry-After")
            except Exception:
                value = None
    if value is None or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None  # an HTTP date or garbage: not honoured
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def is_transient(exc: BaseException) -> bool:
    """The default retry rule: is ``exc`` an error that may go away if the call is made again?
    (A ``ResourceError`` is judged by its factory's error.)

    In order: a ``retryable`` attribute decides if present (True or False); a ``MapItemError`` is
    judged by the item's error; nbflow's own errors are not transient except ``NodeTimeoutError``; ``TimeoutError`` and ``ConnectionError`` are; an HTTP
    status (``status_code``/``status`` on the error or its ``response``) of 408, 425, 429 or 5xx is,
    any other status is not; an error carrying ``retry_after`` is; an error whose class (or a base
    class) is named like a client library's timeout/connection error (``...Timeout``,
    ``...TimeoutException``, ``...ConnectionError``, ``...ConnectError``, ``...NetworkError``) is.
    Everything else (``ValueError``, ``TypeError``, ``KeyError``, ...) is not.
    """
    flag = getattr(exc, "retryable", None)
    if flag is not None:
        return bool(flag)
    if isinstance(exc, MapItemError | ResourceError) and exc.__cause__ is not None:
        return is_transient(exc.__cause__)  # judged by the item's / the resource factory's own error
    if isinstance(exc, NbflowError):
        return isinstance(exc, NodeTimeoutError)
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    status = _status_of(exc)
    if status is not None:
        return status in (408, 425, 429) or 500 <= status <= 599
    if retry_after_of(exc) is not None:
        return True
    return any(cls.__name__.endswith(_TRANSIENT_NAME_SUFFIXES) for cls in type(exc).__mro__)


RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]


@record(frozen=True)
class Retry:
    """Try a node up to ``attempts`` times in all, waiting between attempts.

    The wait before attempt ``n + 1`` is ``backoff * factor ** (n - 1)`` seconds, capped at
    ``max_delay``; ``jitter`` (0 to 1) takes off a random fraction up to that much (``jitter=1`` is
    "full jitter", uniform between 0 and the delay). When the error carries ``retry_after``
    seconds (or a numeric ``Retry-After`` header on its ``response``), the wait is at least that; if
    it asks for more than ``max_delay``, the node fails at once instead (raise ``max_delay`` to wait
    longer).

    ``on`` says which errors are retried: an exception class, a tuple of them, or a predicate
    ``f(exc) -> bool``; by default ``nbflow.is_transient`` (timeouts, connection errors, 429/5xx,
    errors that say ``retryable = True``). Input validation errors are never retried (the inputs
    do not change between attempts), nor are ``FlowDefinitionError``/``GraphError``; a
    return-value ``TypeValidationError`` is retried only if ``on`` asks for it (e.g.
    ``on=nf.TypeValidationError`` for malformed LLM answers).
    """

    attempts: int = 3
    backoff: float = 1.0
    factor: float = 2.0
    max_delay: float | None = 60.0
    jitter: float = 0.0
    on: RetryOn | None = None
    _rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        a = self.attempts
        if not isinstance(a, int) or isinstance(a, bool) or a < 1:
            raise FlowDefinitionError(f"Retry(attempts={a!r}): attempts is the total number of tries, an int >= 1")
        for name, low in (("backoff", 0.0), ("factor", 1.0)):
            v = getattr(self, name)
            if not _is_number(v) or v < low or not math.isfinite(v):
                raise FlowDefinitionError(f"Retry({name}={v!r}): {name} must be a finite number >= {low:g}")
        m = self.max_delay
        if m is not None and (not _is_number(m) or m < 0):
            raise FlowDefinitionError(f"Retry(max_delay={m!r}): max_delay must be a number >= 0 or None (no cap)")
        j = self.jitter
        if not _is_number(j) or not 0 <= j <= 1:
            raise FlowDefinitionError(f"Retry(jitter={j!r}): jitter is a fraction between 0 and 1 (1 = full jitter)")
        on = self.on
        if on is not None and not (_is_exc_type(on) or _is_exc_tuple(on) or callable(on)):
            raise FlowDefinitionError(
                f"Retry(on={on!r}): give an exception class, a tuple of them, or a function exc -> bool"
            )

    def should_retry(self, exc: BaseException) -> bool:
        """Whether ``exc`` is an error this policy retries (ignoring the attempt count)."""
        on = self.on
        if isinstance(exc, (FlowDefinitionError, GraphError)):
            return False  # a misdeclared flow fails the same way every time, whatever 'on' says
        if on is None:
            return is_transient(exc)
        if _is_exc_type(on) or _is_exc_tuple(on):
            if isinstance(exc, ResourceError) and isinstance(exc.__cause__, on):  # type: ignore[arg-type]
                return True  # the resource factory raised one of the listed errors
            return isinstance(exc, on)  # type: ignore[arg-type]
        return bool(on(exc))  # type: ignore[operator]

    def base_delay(self, attempt: int) -> float:
        """The wait after failed attempt number ``attempt`` (1-based), before jitter."""
        delay = self.backoff * self.factor ** (attempt - 1)
        return delay if self.max_delay is None else min(delay, self.max_delay)

    def next_delay(self, attempt: int, exc: BaseException) -> float | None:
        """The wait before the next attempt after attempt ``attempt`` failed with ``exc``; None: give up."""
        if attempt >= self.attempts or not self.should_retry(exc):
            return None
        delay = self.base_delay(attempt)
        if self.jitter:
            delay *= 1.0 - self.jitter * self._rng.random()
        wait = retry_after_of(exc)
        if wait is not None:
            if self.max_delay is not None and wait > self.max_delay:
                exc.add_note(
                    f"nbflow: not retried: the error asks to retry after {wait:g}s, more than "
                    f"Retry(max_delay={self.max_delay:g}); raise max_delay to wait that long"
                )
                return None
            delay = max(delay, wait)
        return delay


@record(frozen=True)
class Default:
    """``on_error=nf.Default(value)``: if the node fails (after its retries), its output is ``value``.

    The node ends SUCCEEDED with ``record.recovered = True``; ``record.error`` keeps the error.
    """

    value: Any


OnError = Literal["fail", "continue"] | Default


@record(frozen=True)
class ErrorInfo:
    """A node's failure as data: what a failure handler (``on_failure_of=``) receives.

    ``node`` failed with ``error`` (the exception); ``type`` and ``message`` are its class name and
    text, ``traceback`` the formatted traceback, ``attempts`` how many tries were made.
    """

    node: str
    type: str
    message: str
    traceback: str
    error: BaseException = field(repr=False)
    attempts: int = 1

    def __str__(self) -> str:
        return f"{self.node} failed: {self.type}: {self.message}"


@record(frozen=True, repr=False)
class Failed(ErrorInfo):
    """The marker a node downstream of an ``on_error="continue"`` node receives instead of its output.

    Test for it with ``isinstance(value, nf.Failed)``; it is falsy, and it is never ``None``. Type
    hints are not checked against it (it carries the failure, not a value).
    """

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<Failed {self.node!r}: {self.type}: {self.message}>"


def error_info(cls: type[ErrorInfo], node: str, exc: BaseException, tb: str, attempts: int) -> ErrorInfo:
    return cls(node=node, type=type(exc).__name__, message=str(exc), traceback=tb, error=exc, attempts=attempts)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_exc_type(v: object) -> bool:
    return isinstance(v, type) and issubclass(v, BaseException)


def _is_exc_tuple(v: object) -> bool:
    return isinstance(v, tuple) and bool(v) and all(_is_exc_type(t) for t in v)
