"""The per-user key that signs the pickled parts of stores, checkpoints and caches (HMAC-SHA256).

A store holds plain JSON wherever it can; what only pickle can represent is written with an HMAC tag
made with a key that only this user has, kept **outside** the store: ``$NBFLOW_STORE_KEY`` (any text;
tests and shared service accounts), else the file ``store.key`` (32 random bytes, mode 0600) in
``$NBFLOW_CONFIG_DIR``, ``$XDG_CONFIG_HOME/nbflow`` or ``~/.config/nbflow``, created on first use.
A file someone else wrote has no valid tag: its pickled parts are refused unless the reader passes
``allow_pickle=True`` (docs/human_in_the_loop.md, "Safe to open").
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
from pathlib import Path

__all__ = ["key_path", "sign", "store_key", "verify"]

_LOCK = threading.Lock()
_KEYS: dict[str, bytes] = {}


def key_path() -> Path:
    folder = os.environ.get("NBFLOW_CONFIG_DIR")
    if folder:
        return Path(folder) / "store.key"
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "nbflow" / "store.key"


_BY_ENV: dict[tuple[str | None, ...], bytes] = {}  # the key per the settings that locate it (hot: every pickle)


def store_key() -> bytes:
    """This user's signing key (created on first use)."""
    environ = os.environ
    where = (
        environ.get("NBFLOW_STORE_KEY"),
        environ.get("NBFLOW_CONFIG_DIR"),
        environ.get("XDG_CONFIG_HOME"),
        environ.get("HOME"),
    )
    found = _BY_ENV.get(where)
    if found is not None:
        return found
    key = _store_key(where[0])
    _BY_ENV[where] = key
    return key


def _store_key(env: str | None) -> bytes:
    if env:
        return hashlib.sha256(b"nbflow-store-key:" + env.encode()).digest()
    path = key_path()
    with _LOCK:
        found = _KEYS.get(str(path))
        if found is not None:
            return found
        try:
            key = path.read_bytes()
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process made it first
                key = path.read_bytes()
            else:
                key = secrets.token_bytes(32)
                with os.fdopen(fd, "wb") as f:
                    f.write(key)
        if len(key) < 16:
            from nbflow._core.errors import StoreError

            raise StoreError(f"the nbflow store key {str(path)!r} is damaged (too short); delete it to make a new one")
        _KEYS[str(path)] = key
        return key


def sign(data: bytes) -> bytes:
    return hmac.new(store_key(), data, hashlib.sha256).digest()


def verify(data: bytes, tag: bytes) -> bool:
    return hmac.compare_digest(sign(data), tag)
