"""Secrets: values that must never reach a store, a trace or a widget."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["REDACTED", "SCRUBBED", "Secret", "looks_secret", "redact", "scrub", "secret_texts"]

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


SCRUBBED = "***"
"""What stands in a text where a secret's text was (``Secret``'s own repr shows the same)."""


def secret_texts(values: Mapping[str, Any]) -> tuple[str, ...]:
    """The texts of the secrets among ``values``: every ``nf.Secret``, and every str under a secret-looking name.

    Texts shorter than 4 characters are left out: replacing them would garble every text, and no
    real credential is that short.
    """
    found = {
        str.__str__(v)
        for k, v in values.items()
        if isinstance(v, str) and (isinstance(v, Secret) or (isinstance(k, str) and looks_secret(k)))
    }
    return tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))  # longest first: overlaps


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with the text of every secret in ``secrets`` replaced by ``SCRUBBED`` (for messages a node echoed)."""
    for s in secrets:
        if s in text:
            text = text.replace(s, SCRUBBED)
    return text
