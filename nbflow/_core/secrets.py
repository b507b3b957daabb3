"""Secrets: values that must never reach a store, a trace or a widget."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["REDACTED", "SCRUBBED", "Secret", "is_secret_name", "redact", "scrub", "secret_texts"]

# The one rule for secret names (stores, checkpoints, caches, batch ids, Dask and the widgets all ask
# is_secret_name). A name is split into parts on ``_``, ``-``, ``.``, spaces and camelCase, in any case
# style: ``HF_TOKEN``, ``hfToken``, ``hf-token``, ``db_pwd``, ``OPENAI_API_KEY``, ``session_cookie`` are
# secret; ``max_tokens``, ``author``, ``tokenizer`` are not (a batch would otherwise drop such columns).
_SECRET_WORDS = frozenset(
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
        "privatekey",
        "accesskey",
        "secretkey",
    }
)
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("client", "secret")}
)
_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")


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


def is_secret_name(name: object) -> bool:
    """True when ``name`` looks like it holds a secret (``api_key``, ``HF_TOKEN``, ``db_pwd``, ``apiKey``...)."""
    if not isinstance(name, str):
        return False
    parts = [p.lower() for p in _SPLIT.split(name) if p]
    if any(p in _SECRET_WORDS for p in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


def redact(name: str, value: Any) -> Any:
    """``REDACTED`` for a Secret or a secret-looking name, else the value."""
    return REDACTED if isinstance(value, Secret) or is_secret_name(name) else value


SCRUBBED = "***"
"""What stands in a text where a secret's text was (``Secret``'s own repr shows the same)."""


def secret_texts(values: Mapping[str, Any]) -> tuple[str, ...]:
    """The texts of the secrets among ``values``: every ``nf.Secret``, and every str under a secret name.

    Texts shorter than 4 characters are left out: replacing them would garble every text, and no
    real credential is that short. Longest first, so overlapping secrets are replaced whole.
    """
    found = {
        str.__str__(v) for k, v in values.items() if isinstance(v, str) and (isinstance(v, Secret) or is_secret_name(k))
    }
    return tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with the text of every secret in ``secrets`` replaced by ``SCRUBBED`` (messages a node echoed)."""
    for s in secrets:
        if s in text:
            text = text.replace(s, SCRUBBED)
    return text
