"""Secrets: values that must never reach a store, a trace or a widget."""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "REDACTED_TEXT",
    "Redactor",
    "Secret",
    "env",
    "is_secret_name",
    "redact",
    "remark_secrets",
    "secret_texts",
]

REDACTED_TEXT = "[REDACTED]"
# What a screen shows instead of a secret value (the run view, the explorer, variant labels).
SCREEN_MASK = "••••••"
"""What replaces the text of a secret value inside a string written to disk (messages, tracebacks, outputs)."""

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

    def __new__(cls, value: object = "") -> Secret:
        self = super().__new__(cls, value)
        if len(self) >= MARKED_MIN_LENGTH:
            _MARKED.add(str.__str__(self))  # (see remark_secrets)
        return self

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


# The texts of the ``nf.Secret`` values made in this process (those of MARKED_MIN_LENGTH characters or more: a
# shorter text could be ordinary data). pandas (3: strings get their own dtype) turns a column of ``nf.Secret``
# into plain ``str``, so a batch would see unmarked text: ``remark_secrets`` marks it again.
MARKED_MIN_LENGTH = 8
_MARKED: set[str] = set()


def remark_secrets(records: list[dict[str, Any]]) -> list[str]:
    """Turn every plain ``str`` value of ``records`` whose text is that of an ``nf.Secret`` made in this process
    back into an ``nf.Secret`` (in place); returns the columns where that happened, for a warning."""
    if not _MARKED:
        return []
    marked = _MARKED
    found: dict[str, None] = {}
    for rec in records:
        for k, v in rec.items():
            if type(v) is str and v in marked:
                rec[k] = Secret(v)
                found[k] = None
    return list(found)


def is_secret_name(name: object) -> bool:
    """True when ``name`` looks like it holds a secret (``api_key``, ``HF_TOKEN``, ``db_pwd``, ``apiKey``...)."""
    if not isinstance(name, str):
        return False
    return _secret_name(str(name))  # a str subclass is judged by its text


@functools.lru_cache(maxsize=4096)  # the same few names (parameters, columns) are asked about for every row
def _secret_name(name: str) -> bool:
    parts = [p.lower() for p in _SPLIT.split(name) if p]
    if any(p in _SECRET_WORDS for p in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


def redact(name: str, value: Any) -> Any:
    """``REDACTED`` for a Secret or a secret-looking name, else the value."""
    return REDACTED if isinstance(value, Secret) or is_secret_name(name) else value


def env(name: str, default: str | None = None) -> Secret:
    """The environment variable ``name`` as an ``nf.Secret`` (never stored, logged or shown).

    ``nf.env("OPENAI_API_KEY")``; a missing variable raises ConfigError naming it, unless
    ``default`` is given.
    """
    from nbflow._core.errors import ConfigError

    if not isinstance(name, str) or not name:
        raise ConfigError(f"nf.env(name): the name of an environment variable, got {name!r}")
    value = os.environ.get(name, default)
    if value is None:
        raise ConfigError(
            f"nf.env({name!r}): the environment variable {name} is not set; set it before starting Python "
            f"(export {name}=...) or pass nf.env({name!r}, default=...)"
        )
    return Secret(value)


def _strings(value: Any, depth: int = 0) -> list[str]:
    if depth > 20:
        return []
    if isinstance(value, str):
        return [str.__str__(value)]
    get = getattr(value, "get_secret_value", None)  # pydantic SecretStr
    if callable(get):
        inner = get()
        return [inner] if isinstance(inner, str) else []
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v, depth + 1)]
    if isinstance(value, list | tuple | set | frozenset):
        return [s for v in value for s in _strings(v, depth + 1)]
    return []


def _secret_values(values: Mapping[Any, Any], depth: int = 0, by_name: bool = True) -> list[str]:
    """The texts of an ``nf.Secret`` under any name, and of string values under secret-looking names."""
    found: list[str] = []
    if depth > 20:
        return found
    for k, v in values.items():
        if isinstance(v, Secret) or (by_name and is_secret_name(k)) or type(v).__name__ in ("SecretStr", "SecretBytes"):
            found.extend(_strings(v))
        elif isinstance(v, Mapping):
            found.extend(_secret_values(v, depth + 1, by_name))
        elif isinstance(v, list | tuple):
            for item in v:
                if isinstance(item, Secret):
                    found.append(str.__str__(item))
                elif isinstance(item, Mapping):
                    found.extend(_secret_values(item, depth + 1, by_name))
    return found


def secret_texts(values: Mapping[Any, Any], by_name: bool = True) -> tuple[str, ...]:
    """Every known secret value's text in ``values`` (4+ characters), longest first.

    ``by_name=False``: only values marked secret (``nf.Secret``, pydantic ``SecretStr``), for a batch
    that opted in to storing secret-looking columns (``store_secrets=True``).
    """
    if type(values) is dict:  # the common case, every value a plain scalar: nothing to look into
        for k, v in values.items():
            t = type(v)
            if t is str:
                if by_name and is_secret_name(k):
                    break
            elif t is not int and t is not float and t is not bool and v is not None:
                break
        else:
            return ()
    found = {s for s in _secret_values(values, by_name=by_name) if len(s) >= 4}
    return tuple(sorted(found, key=len, reverse=True))


class Redactor:
    """Replaces the text of known secret values with a marker, in strings and (copies of) containers.

    The one mechanism for every text written to disk or sent to the browser: the stores use it with
    ``REDACTED_TEXT``, the run view with its mask. Secrets of 4+ characters count (shorter ones would
    redact ordinary text).
    """

    def __init__(self, secrets: Iterable[str] = (), marker: str = REDACTED_TEXT) -> None:
        self.marker = marker
        self._secrets: set[str] = set()
        self._ordered: tuple[str, ...] = ()
        self.add(secrets)

    @classmethod
    def for_inputs(cls, values: Mapping[Any, Any], marker: str = REDACTED_TEXT) -> Redactor:
        return cls(secret_texts(values), marker)

    def add(self, secrets: Iterable[str]) -> None:
        for s in secrets:
            if isinstance(s, str) and len(s) >= 4:
                self._secrets.add(str.__str__(s))
        self._ordered = tuple(sorted(self._secrets, key=len, reverse=True))  # longest first: overlaps

    def collect(self, values: Mapping[Any, Any]) -> None:
        """Remember the secret values in ``values`` (``nf.Secret`` anywhere, secret-named entries)."""
        self.add(_secret_values(values))

    def __call__(self, text: str) -> str:
        for s in self._ordered:
            if s in text:
                text = text.replace(s, self.marker)
        return text

    def found_in(self, data: bytes | str) -> bool:
        """Whether ``data`` holds the text of a known secret."""
        if isinstance(data, str):
            return any(s in data for s in self._ordered)
        return any(s.encode() in data for s in self._ordered)

    def scrub(self, value: Any, depth: int = 0) -> Any:
        """``value`` with secret texts replaced in its strings (dicts, lists, tuples, sets copied; others as is)."""
        if not self._ordered or depth > 50:
            return value
        if isinstance(value, Secret):
            return REDACTED
        if isinstance(value, str):
            return self(value) if type(value) is str else value
        if isinstance(value, dict):
            return {self.scrub(k, depth + 1): self.scrub(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub(v, depth + 1) for v in value]
        if isinstance(value, tuple) and type(value) is tuple:
            return tuple(self.scrub(v, depth + 1) for v in value)
        if isinstance(value, set | frozenset):
            return type(value)(self.scrub(v, depth + 1) for v in value)
        return value

    def __bool__(self) -> bool:
        return bool(self._secrets)
