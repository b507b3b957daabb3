"""Secrets: values that must never reach a store, a trace or a widget."""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from nbflow._core.errors import SHOWN, ConfigError

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
# is_secret_name; docs/secrets.md holds the table). A name is split into parts on ``_``, ``-``, ``.``,
# spaces and camelCase, in any case style. It is secret when:
# - a part is a credential word (``HF_TOKEN``, ``db_pwd``, ``session_cookie``, ``JWT``, ``Authorization``, ``AWS_CREDS``);
# - two parts make a credential (``api_key``, ``client_secret``, ``database_url``, ``connection_string``);
# - ``key`` follows a provider or a kind of key (``OPENAI_KEY``, ``azure_openai_key``, ``ssh_key``);
# - its last part is ``pat``, ``dsn`` or ``pass`` after another part (``GH_PAT``, ``SENTRY_DSN``, ``DB_PASS``);
# - it holds ``password``/``passwd``/``passphrase`` anywhere (``PGPASSWORD``).
# Not secret: ``max_tokens``, ``token_count``, ``prompt_tokens`` (a "token" that is counted), ``keyword``,
# ``key_points``, ``cache_key``, ``sort_key``, ``author``, ``tokenizer``: a batch does not store secret-named
# columns, so a false positive loses data.
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
        "cred",
        "creds",
        "cookie",
        "apikey",
        "passphrase",
        "privatekey",
        "accesskey",
        "secretkey",
        "jwt",
        "bearer",
        "dsn",
        "pgpass",
        "connstr",
    }
)
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("access", "key"),
        ("private", "key"),
        ("secret", "key"),
        ("client", "secret"),
        ("database", "url"),
        ("database", "uri"),
        ("db", "url"),
        ("db", "uri"),
        ("connection", "string"),
        ("conn", "string"),
        ("conn", "str"),
        ("webhook", "url"),
    }
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ``<this>_key`` is a credential: API providers, and kinds of keys (``cache_key``, ``sort_key``, ``s3_key``,
# ``primary_key`` are not).
_KEY_OWNERS = _words(
    # providers of model and data APIs
    "openai anthropic claude azure cohere mistral groq gemini google gcp vertex aws hf huggingface replicate "
    "together fireworks perplexity deepseek xai grok openrouter voyage jina nvidia nim ai21 deepinfra anyscale "
    "cerebras sambanova pinecone weaviate qdrant chroma langchain langsmith langfuse wandb serpapi serper "
    "tavily exa firecrawl elevenlabs assemblyai deepgram stripe sendgrid twilio mailgun postmark slack github "
    "gh gitlab discord telegram notion airtable algolia datadog dd sentry mapbox bing brave youtube "
    "openweather supabase firebase vercel netlify heroku cloudflare digitalocean linear jira atlassian "
    "shopify paypal zapier segment mixpanel amplitude newrelic honeycomb modal runpod "
    # kinds of keys
    "ssh rsa dsa ecdsa ed25519 gpg pgp signing encryption decryption master hmac license licence deploy "
    "service app consumer session crypto cipher aes fernet admin root subscription account storage sas"
)
# "token" counted, not a credential: ``token_count``, ``token_ids``, ``max_token``, ``input_token_count``.
_COUNT_AFTER = _words(
    "count counts usage used limit limits len length budget cost costs total num number ids id type types "
    "index logprobs logprob probs prob estimate rate stats size per left remaining"
)
_COUNT_BEFORE = _words(
    "max min num n total input output prompt completion cached reasoning avg mean per first last next end "
    "start special pad eos bos unk sep cls mask"
)
# ``first_pass``, ``second_pass``: a pass of an algorithm, not a password.
_NOT_PASS = _words("first second third last final single multi one two next by")
_CONTAINED = ("password", "passwd", "passphrase")
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
            text = str.__str__(self)
            _MARKED.add(text)  # (see remark_secrets)
            if text not in _KNOWN.texts:
                _KNOWN.add(text)
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
    back into an ``nf.Secret``; returns the columns where that happened, for a warning. A record is replaced in
    ``records`` by a copy before it is changed: the dicts themselves may be the caller's."""
    if not _MARKED:
        return []
    marked = _MARKED
    found: dict[str, None] = {}
    for j, rec in enumerate(records):
        keys = [k for k, v in rec.items() if type(v) is str and v in marked]
        if keys:
            rec = records[j] = dict(rec)
            for k in keys:
                rec[k] = Secret(rec[k])
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
    for i, p in enumerate(parts):
        if p in _SECRET_WORDS and not (p == "token" and _counted(parts, i)):
            return True
    for pair in itertools.pairwise(parts):
        if pair in _SECRET_PAIRS or (pair[1] == "key" and pair[0] in _KEY_OWNERS):
            return True
    if len(parts) > 1 and (parts[-1] == "pat" or (parts[-1] == "pass" and parts[-2] not in _NOT_PASS)):
        return True
    lowered = name.lower()
    return any(word in lowered for word in _CONTAINED)


def _counted(parts: list[str], i: int) -> bool:
    """Whether the "token" at ``parts[i]`` is a count of tokens (``token_count``, ``max_token``), not a credential."""
    return (i + 1 < len(parts) and parts[i + 1] in _COUNT_AFTER) or (i > 0 and parts[i - 1] in _COUNT_BEFORE)


def redact(name: str, value: Any) -> Any:
    """``REDACTED`` for a Secret or a secret-looking name, else the value."""
    return REDACTED if isinstance(value, Secret) or is_secret_name(name) else value


def env(name: str, default: str | None = None) -> Secret:
    """The environment variable ``name`` as an ``nf.Secret`` (never stored, logged or shown).

    ``nf.env("OPENAI_API_KEY")``; a missing variable raises ConfigError naming it, unless
    ``default`` is given.
    """
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
        self._seen = -1  # the version of the known secrets that _ordered holds
        self._match: re.Pattern[str] | None = None
        self._bmatch: re.Pattern[bytes] | None = None
        self._encoded: tuple[bytes, ...] = ()
        self._json_safe = True
        self.add(secrets)

    @classmethod
    def for_inputs(cls, values: Mapping[Any, Any], marker: str = REDACTED_TEXT) -> Redactor:
        return cls(secret_texts(values), marker)

    def add(self, secrets: Iterable[str]) -> None:
        for s in secrets:
            if isinstance(s, str) and len(s) >= 4:
                self._secrets.add(str.__str__(s))
        self._seen = -1

    def _texts(self) -> tuple[str, ...]:
        """Its own secrets and every secret known in this process (``learn``), longest first (overlaps)."""
        if self._seen != _KNOWN.version:
            texts = self._secrets | _KNOWN.texts if _KNOWN.texts else self._secrets
            self._ordered = tuple(sorted(texts, key=len, reverse=True))
            self._match, self._bmatch = _trie_patterns(self._ordered) if len(self._ordered) > _FEW else (None, None)
            self._encoded = tuple(t.encode() for t in self._ordered)
            self._json_safe = all(map(_json_safe, self._ordered))
            self._seen = _KNOWN.version
        return self._ordered

    @property
    def json_safe(self) -> bool:
        """Whether JSON writes each of its secrets as itself (so a search of a JSON text finds every one)."""
        self._texts()
        return self._json_safe

    def collect(self, values: Mapping[Any, Any]) -> None:
        """Remember the secret values in ``values`` (``nf.Secret`` anywhere, secret-named entries)."""
        self.add(_secret_values(values))

    def __call__(self, text: str) -> str:
        texts = self._texts()
        if self._match is not None:
            return self._match.sub(self.marker, text)
        for s in texts:
            if s in text:
                text = text.replace(s, self.marker)
        return text

    def found_in(self, data: bytes | str) -> bool:
        """Whether ``data`` holds the text of a known secret."""
        texts = self._texts()
        if isinstance(data, str):
            if self._match is not None:
                return self._match.search(data) is not None
            return any(s in data for s in texts)
        if self._bmatch is not None:
            return self._bmatch.search(data) is not None
        return any(s in data for s in self._encoded) if texts else False

    def scrub(self, value: Any, depth: int = 0) -> Any:
        """``value`` with secret texts replaced in its strings (dicts, lists, tuples, sets copied; others as is)."""
        if not self._texts() or depth > 50:
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
        if type(value).__module__.startswith("pandas") and hasattr(value, "map") and hasattr(value, "index"):
            return self._scrub_table(value)
        return value

    def _scrub_table(self, table: Any) -> Any:
        """A pandas DataFrame or Series with secrets' texts redacted in its cells, labels and index; the same
        object when none holds one (a pickle would carry the text of a string column's buffers)."""
        frame = table.to_frame() if not hasattr(table, "columns") else table
        labels = [*frame.columns, *frame.index.names, *([frame.index] if frame.index.dtype == object else [])]
        columns = [frame[c] for c in frame.columns if frame[c].dtype.kind in "OSUT" or "str" in str(frame[c].dtype)]
        text = "\n".join(map(str, labels)) + "\n".join("\n".join(map(str, c.tolist())) for c in columns)
        if not self.found_in(text):
            return table

        def cell(v: Any) -> Any:
            if isinstance(v, Secret):
                return REDACTED_TEXT if self.marker == REDACTED_TEXT else self.marker
            return self(v) if type(v) is str else self.scrub(v, 1)

        out = table.map(cell)
        out.index = out.index.map(cell)
        if hasattr(out, "columns"):
            out.columns = out.columns.map(cell)
        elif isinstance(out.name, str):
            out.name = self(out.name)
        return out

    def __bool__(self) -> bool:
        return bool(self._secrets) or bool(_KNOWN.texts)

    def has_own(self) -> bool:
        """Does it hold secrets of its own (not only those every redactor of the process knows)?"""
        return bool(self._secrets)


# --- secrets known by their value ---------------------------------------------------------------------------------
# As CI systems mask registered secrets in logs: the texts below are replaced wherever they appear inside any text
# a sink writes (``gate``; every ``Redactor`` adds them to its own). They are learned from the environment (a
# variable whose name is secret, or whose value has a token's shape), from every ``nf.Secret``/``nf.env`` value,
# and from the inputs of every run (secret-named ones, and token-shaped values under any name). A text shorter than
# LEARNED_MIN_LENGTH is never learned: "admin" or "1234" would redact ordinary text everywhere.
LEARNED_MIN_LENGTH = MARKED_MIN_LENGTH

# Token formats: a value that *is* one of these (the whole value, surrounding spaces aside) is a secret under any
# name. A small table (docs/secrets.md) rather than detect-secrets: its regex plugins hold the same formats, its
# entropy plugins flag ordinary hashes and ids, and it scans files line by line, not one value.
SHAPES: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.DOTALL)
    for name, pattern in (
        ("OpenAI, Anthropic, DeepSeek key (sk-..., sk-proj-..., sk-ant-...)", r"sk-[A-Za-z0-9_\-]{16,}"),
        ("GitHub token (ghp_, gho_, ghu_, ghs_, ghr_)", r"gh[pousr]_[A-Za-z0-9]{30,}"),
        ("GitHub fine-grained token (github_pat_...)", r"github_pat_[A-Za-z0-9_]{30,}"),
        ("GitLab token (glpat-...)", r"glpat-[A-Za-z0-9_\-]{20,}"),
        ("Slack token (xoxb-, xoxp-, xoxa-, xoxs-, xoxr-, xoxe-)", r"xox[bpasre]-[A-Za-z0-9\-]{10,}"),
        ("Slack webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}"),
        ("AWS access key id (AKIA..., ASIA...)", r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"),
        ("Google API key (AIza...)", r"AIza[0-9A-Za-z_\-]{35}"),
        ("Hugging Face token (hf_...)", r"hf_[A-Za-z0-9]{30,}"),
        ("Stripe secret key (sk_live_, rk_test_...)", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        ("npm token (npm_...)", r"npm_[A-Za-z0-9]{36}"),
        ("PyPI token (pypi-...)", r"pypi-[A-Za-z0-9_\-]{50,}"),
        ("SendGrid key (SG.x.y)", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
        ("JSON Web Token (eyJ...eyJ...)", r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
        ("private key (PEM)", r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*"),
        ("URL with a password (scheme://user:password@host)", r"[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:[^/\s@]+@\S+"),
    )
}
_ANY_SHAPE = re.compile("|".join(f"(?:{shape.pattern})" for shape in SHAPES.values()), re.DOTALL)
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:([^/\s@]+)@")
# Environment variables that are secret by name but hold no secret: the working directory (``PWD``: "pwd" is a
# password's short name), the ssh agent's socket.
_PLAIN_ENVIRONMENT = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "SSH_AGENT_PID"})
_FEW = 16  # up to this many secrets a plain substring search is fastest; more go through one trie regex


class _Known:
    """The texts learned in this process; ``version`` changes with each new one (redactors rebuild)."""

    __slots__ = ("environment", "json_safe", "texts", "version")

    def __init__(self) -> None:
        self.texts: frozenset[str] = frozenset()
        self.version = 0
        self.json_safe = True  # every text is written by JSON as itself (ASCII, nothing escaped)
        self.environment: dict[Any, Any] | None = None  # the environment learned from, to see a change

    def add(self, *texts: str) -> None:
        new = {t for t in texts if len(t) >= LEARNED_MIN_LENGTH} - self.texts
        if new:
            self.texts = self.texts | new
            self.json_safe = self.json_safe and all(_json_safe(t) for t in new)
            self.version += 1


def _json_safe(text: str) -> bool:
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


_KNOWN = _Known()


def looks_like_token(text: object) -> str | None:
    """The name of the token format (``SHAPES``) that ``text`` has as a whole, or None."""
    if not isinstance(text, str) or len(text) < LEARNED_MIN_LENGTH:
        return None
    value = text.strip()
    if " " in value and not value.startswith("-----BEGIN"):  # prose: only a PEM key holds a space
        return None
    if _ANY_SHAPE.fullmatch(value) is None:  # (one search for the common value, which has no token's shape)
        return None
    for name, shape in SHAPES.items():
        if shape.fullmatch(value):
            return name
    return None


def _secret_parts(text: str) -> list[str]:
    """``text`` and, for a URL with a password, the password alone (plain and %-decoded): what to learn of it."""
    parts = [str.__str__(text), text.strip()]
    found = _URL_PASSWORD.match(text.strip())
    if found:
        from urllib.parse import unquote

        parts += [found.group(1), unquote(found.group(1))]
    return parts


def learn(*texts: object) -> None:
    """Remember these texts as secrets of this process: every sink redacts them from now on (``gate``)."""
    for text in texts:
        if isinstance(text, str) and len(text) >= LEARNED_MIN_LENGTH:
            _KNOWN.add(*_secret_parts(text))


def learn_environment() -> None:
    """Learn the values of the environment variables that look secret, by name or by shape (``looks_like_token``).

    Called when a run or a batch starts; costs one dict comparison when the environment did not change since.
    """
    data = getattr(os.environ, "_data", None)
    snapshot = dict(data) if isinstance(data, dict) else dict(os.environ)
    if snapshot == _KNOWN.environment:
        return
    _KNOWN.environment = snapshot
    for name, value in os.environ.items():
        if (
            len(value) >= LEARNED_MIN_LENGTH
            and name not in _PLAIN_ENVIRONMENT
            and (is_secret_name(name) or looks_like_token(value))
        ):
            _KNOWN.add(*_secret_parts(value))


def learn_inputs(values: Mapping[Any, Any], by_name: bool = True, environment: bool = True) -> None:
    """Learn the secrets among a run's inputs: ``nf.Secret``s, secret-named values, token-shaped values under
    any name (top level and one level into dicts and lists). The environment is looked at again first.

    ``by_name=False``: not the secret-named ones (a batch with ``store_secrets=True``); ``environment=False``:
    the caller looked at the environment already (a batch, once for all its rows).
    """
    if environment:
        learn_environment()
    found = list(secret_texts(values, by_name=by_name))
    for v in values.values():
        t = type(v)
        if t is str:
            if len(v) >= LEARNED_MIN_LENGTH and looks_like_token(v):
                found.append(v)
            continue
        if t is int or t is float or t is bool or v is None:  # (most cells: nothing to look at)
            continue
        items = v.values() if isinstance(v, Mapping) else v if isinstance(v, list | tuple) else ()
        found.extend(item for item in items if type(item) is str and looks_like_token(item))
    if found:
        learn(*found)


def known_secrets() -> frozenset[str]:
    """The secret texts learned in this process (for a test or a sink that searches bytes)."""
    return _KNOWN.texts


_GATE = Redactor()


def redactor(secrets: Iterable[str] = ()) -> Redactor | None:
    """A redactor for ``secrets`` and every known secret; None when there is nothing to redact (a fast path)."""
    if secrets:
        return Redactor(secrets)
    return _GATE if _KNOWN.texts else None


def json_holds_no_secret(text: str) -> bool:
    """Whether the JSON text ``text`` surely holds no known secret (a writer's fast path: write it as it is).

    False when a secret's text is in it, or when some secret would be escaped by JSON (then a search of the
    text could miss it: the writer redacts value by value instead).
    """
    return not _KNOWN.texts or (_KNOWN.json_safe and not _GATE.found_in(text))


def gate(value: Any, extra: Iterable[str] = ()) -> Any:
    """THE redaction gate: ``value`` with the text of every known secret replaced by ``[REDACTED]``.

    A string gives a string; dicts, lists, tuples and sets give copies with their strings redacted; an
    ``nf.Secret`` gives ``REDACTED``; anything else comes back as is. ``extra``: more secret texts for this call
    (e.g. the run's own secret inputs of 4 to 7 characters). Every sink that writes text (a store, a file, a
    trace, a transcript, a report, a message to the browser, a warning, an error message) passes it through here.
    """
    if extra:
        return Redactor(extra).scrub(value)
    if not _KNOWN.texts:
        return value
    return _GATE.scrub(value)


@functools.lru_cache(maxsize=64)  # a redactor per run, the same secrets: compiled once
def _trie_patterns(texts: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[bytes]]:
    """One regex matching any of ``texts``, longest first, built as a trie (fast for hundreds of secrets); and
    the same for their UTF-8 bytes."""
    root: dict[str, Any] = {}
    for text in texts:
        node = root
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}
    pattern = _trie_regex(root)
    return re.compile(pattern), re.compile(pattern.encode())


def _trie_regex(node: dict[str, Any]) -> str:
    alternatives = []
    for ch, child in node.items():
        if ch == "":
            continue
        chain = [ch]
        while len(child) == 1 and "" not in child:  # a run of single children: one literal
            ((nxt, child),) = child.items()
            chain.append(nxt)
        rest = _trie_regex(child)
        alternatives.append(re.escape("".join(chain)) + rest)
    if not alternatives:
        return ""
    body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    return f"(?:{body})?" if "" in node else body


def _shown_input(parameter: str, value: Any, shown: str, detail: str) -> tuple[str, str]:
    """How an error quotes a node's input (``TypeValidationError``): a secret one (by name, ``nf.Secret``) never."""
    if is_secret_name(parameter) or isinstance(value, Secret):
        return REDACTED_TEXT, Redactor([str.__str__(value)])(detail) if isinstance(value, str) and detail else detail
    return shown, detail


# Every NbflowError and NbflowWarning shows its message through the gate (see errors._Shown).
SHOWN.text = gate  # type: ignore[method-assign,assignment]
SHOWN.input = _shown_input  # type: ignore[method-assign]
