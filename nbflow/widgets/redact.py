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

from nbflow._core.secrets import is_secret_name

__all__ = ["MASK", "Redactor", "is_secret_name", "mask_mapping"]

MASK = "••••••"


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


class Redactor:
    """Replaces the text of known secret values (strings of 4+ characters) with the mask."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        for s in secrets:
            if isinstance(s, str) and len(s) >= 4:
                self._secrets.add(s)

    def collect(self, values: Mapping[Any, Any]) -> None:
        """Remember the string values of secret-named entries of ``values`` (recursively)."""
        for k, v in values.items():
            if is_secret_name(k):
                self.add(_strings(v))
            elif isinstance(v, Mapping):
                self.collect(v)

    def __call__(self, text: str) -> str:
        for s in sorted(self._secrets, key=len, reverse=True):  # longest first: overlapping secrets
            if s in text:
                text = text.replace(s, MASK)
        return text

    def __bool__(self) -> bool:
        return bool(self._secrets)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    get = getattr(value, "get_secret_value", None)  # pydantic SecretStr
    if callable(get):
        inner = get()
        return [inner] if isinstance(inner, str) else []
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []
