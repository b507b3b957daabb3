"""Keeping secrets off the screen: which names look secret, masking them, redacting their values.

Rule (documented in docs/widgets.md): a parameter or key is secret when one of the parts of its name
(split on ``_``, ``-``, ``.`` and camelCase) is password, passwd, pwd, secret, token, auth,
authorization, credential(s), cookie, apikey or passphrase, or when two neighbouring parts are
api+key, access+key, private+key, secret+key or client+secret. So ``api_key``, ``hf_token``,
``db_password`` and ``apiKey`` are masked; ``max_tokens`` and ``author`` are not. The widget shows
such values as ``••••••``, and redacts the text of secret string values wherever it would appear
(outputs, error messages, tracebacks, the graph's tooltips).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "Redactor", "is_secret_name", "mask_mapping"]

MASK = "••••••"
_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "secret",
        "token",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "apikey",
        "passphrase",
    }
)
_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("client", "secret")})
_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")


def is_secret_name(name: object) -> bool:
    """True when ``name`` looks like it holds a secret (see the module docstring for the rule)."""
    if not isinstance(name, str):
        return False
    parts = [p.lower() for p in _SPLIT.split(name) if p]
    if any(p in _WORDS for p in parts):
        return True
    return any(pair in _PAIRS for pair in itertools.pairwise(parts))


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
