"""Keeping secrets off the screen: which names look secret, masking them, redacting their values.

The rule for secret names is the package's one rule (``nbflow._core.secrets.is_secret_name``, documented in
docs/widgets.md): ``api_key``, ``HF_TOKEN``, ``db_password`` and ``apiKey`` are masked; ``max_tokens`` and
``author`` are not. The widget shows
such values as ``••••••``, and redacts the text of secret string values wherever it would appear
(outputs, error messages, tracebacks, the graph's tooltips).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nbflow._core.secrets import SCREEN_MASK, is_secret_name
from nbflow._core.secrets import Redactor as _CoreRedactor

__all__ = ["MASK", "Redactor", "is_secret_name", "mask_mapping"]

MASK = SCREEN_MASK


def mask_mapping(values: Mapping[Any, Any]) -> dict[Any, Any]:
    """A copy of ``values`` with secret-named entries masked, recursively through dicts and lists."""
    return {k: MASK if is_secret_name(k) else _mask_nested(v) for k, v in values.items()}


def _mask_nested(value: Any, depth: int = 0) -> Any:
    if depth > 20:
        return value
    if isinstance(value, Mapping):
        return {k: MASK if is_secret_name(k) else _mask_nested(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask_nested(v, depth + 1) for v in value) if isinstance(value, list) else value
    return value


class Redactor(_CoreRedactor):
    """The package's one redaction mechanism (``nbflow._core.secrets.Redactor``) with the widget's mask."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__(secrets, MASK)
