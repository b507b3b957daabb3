"""Secrets: values that must never reach a store, a trace or a widget."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REDACTED", "Secret", "looks_secret", "redact"]

# Whole words, in any case style: "auth_token", "OPENAI_API_KEY", "apiKey", "db_password" are
# secrets; "max_tokens", "author", "tokenizer" are not (a batch would otherwise drop such columns).
_SECRET_WORDS = frozenset(
    {"token", "password", "passwd", "secret", "credential", "credentials", "auth", "authorization", "apikey"}
)
_SECRET_JOINED = ("apikey", "privatekey", "accesskey", "secretkey")


class Secret(str):
    """A string that works as itself in your code but is never stored, logged or displayed.

    ``nf.Secret("sk-...")``: pass it as a flow input; nodes receive it and use it like any str. Its
    ``repr`` is ``Secret('***')``; checkpoint and batch stores write a redaction marker instead of it,
    and the notebook widgets mask it.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('***')"

    def reveal(self) -> str:
        """The plain value (a plain ``str``)."""
        return str.__str__(self)

    def __reduce__(self) -> Any:
        # Pickling (stores, process pools) must never carry the value by accident.
        return (_redacted, ())


class _Redacted:
    """Stands where a secret was: stores write this instead of the value."""

    __slots__ = ()
    _instance: _Redacted | None = None

    def __new__(cls) -> _Redacted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "nbflow.REDACTED"

    def __reduce__(self) -> str:
        return "REDACTED"


REDACTED = _Redacted()


def _redacted() -> _Redacted:
    return REDACTED


def looks_secret(name: str) -> bool:
    """True for names such as ``api_key``, ``token``, ``password``: treated as secrets when shown."""
    words = [w.lower() for w in re.findall(r"[A-Za-z][a-z]*|[0-9]+", name)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    joined = "".join(words)
    return any(j in joined for j in _SECRET_JOINED)


def redact(name: str, value: Any) -> Any:
    """``REDACTED`` for a Secret or a secret-looking name, else the value."""
    return REDACTED if isinstance(value, Secret) or looks_secret(name) else value
