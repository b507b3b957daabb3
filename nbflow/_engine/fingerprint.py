"""Fingerprints for the node cache: a stable digest of values, and of a node's code and declaration.

A value's digest is the SHA-256 of its pickle (``nf.Secret`` values count by their real value: the
digest is computed in memory and only the hash is ever kept). A function's fingerprint is its
source text when Python can find it (notebook cells included), else its byte code and constants,
plus what it reads that a notebook user edits in other cells: simple global values (strings,
numbers, containers of them) and helper functions from the same module (recursively, by source).
"""

from __future__ import annotations

import dis
import functools
import hashlib
import inspect
import io
import pickle
import textwrap
import types
from collections.abc import Callable
from typing import Any

from nbflow._core.secrets import Secret

__all__ = ["Unhashable", "code_fingerprint", "digest", "globals_fingerprint"]

_PROTOCOL = 5  # fixed: the same value gives the same bytes across runs and processes
_SIMPLE = (str, bytes, int, float, complex, bool, type(None))
_DEPTH = 3  # how deep helper functions are followed


class Unhashable(Exception):
    """The cache cannot fingerprint a value (it cannot be pickled); its node runs uncached."""


def _secret(value: str) -> str:  # only named in digests, never unpickled
    return value


class _DigestPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Secret):
            return (_secret, (obj.reveal(),))  # Secret.__reduce__ would redact: every key would look alike
        return NotImplemented


def digest(value: Any) -> str:
    """SHA-256 (hex) of ``value``'s pickle; raises Unhashable if it cannot be pickled."""
    buf = io.BytesIO()
    try:
        _DigestPickler(buf, protocol=_PROTOCOL).dump(value)
    except Exception as exc:
        raise Unhashable(f"{type(value).__name__} cannot be pickled ({type(exc).__name__}: {exc})") from None
    return hashlib.sha256(buf.getvalue()).hexdigest()


def _code_bytes(code: types.CodeType, out: list[bytes]) -> None:
    out.append(code.co_code)
    out.append(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_bytes(const, out)
        else:
            out.append(repr(const).encode())


def _function(func: Any) -> types.FunctionType | None:
    func = inspect.unwrap(func)
    if isinstance(func, types.MethodType):
        func = func.__func__
    return func if isinstance(func, types.FunctionType) else None


def code_fingerprint(func: Callable[..., Any]) -> str:
    """A digest of what ``func`` does: its source text, else its byte code; Unhashable if neither."""
    if isinstance(func, functools.partial):
        return digest((code_fingerprint(func.func), func.args, func.keywords))
    fn = _function(func)
    if fn is None:  # a callable object: its class's __call__ and its own state
        call = type(func).__dict__.get("__call__")  # defined by the class itself, in Python
        if call is None or _function(call) is None:
            raise Unhashable(f"cannot read the code of {func!r}")
        return digest((code_fingerprint(call), func))
    return digest((_code_digest(fn.__code__), fn.__defaults__, fn.__kwdefaults__))


@functools.lru_cache(maxsize=4096)
def _code_digest(code: types.CodeType) -> str:
    """Per code object: functions made in a loop share one, and ``getsource`` costs ~0.1 ms."""
    try:
        return digest(("source", textwrap.dedent(inspect.getsource(code))))
    except (OSError, TypeError):
        parts: list[bytes] = []
        _code_bytes(code, parts)
        return digest(("code", b"\0".join(parts)))


@functools.lru_cache(maxsize=4096)
def _globals_of(code: types.CodeType) -> tuple[frozenset[str], frozenset[str]]:
    """(names ``code`` and its nested functions may read, names they assign with ``global``)."""
    names = set(code.co_names)
    stored = {i.argval for i in dis.get_instructions(code) if i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner, inner_stored = _globals_of(const)
            names |= inner
            stored |= inner_stored
    return frozenset(names), frozenset(stored)


def _is_simple(value: Any, depth: int = 0) -> bool:
    """Plain data: exact builtin types only (a Counter or a custom class is state, not a setting)."""
    kind = type(value)
    if kind in _SIMPLE:
        return True
    if depth > 4:
        return False
    if kind in (tuple, list, frozenset, set):
        return all(_is_simple(v, depth + 1) for v in value)
    if kind is dict:
        return all(_is_simple(k, depth + 1) and _is_simple(v, depth + 1) for k, v in value.items())
    return False


def globals_fingerprint(func: Callable[..., Any]) -> str:
    """A digest of the globals ``func`` reads that a notebook user may edit in another cell.

    Simple values (a prompt string, a model name, a dict of settings) count by value; functions of
    the same module (helpers defined in the notebook) by their code and their own globals. Anything
    else (modules, classes, clients, a Counter) is left out, and so are names the code assigns with
    ``global`` (counters): editing those does not invalidate the cache.
    Computed at each run, since a global can change without the flow changing.
    """
    fn = _function(func.func if isinstance(func, functools.partial) else func)
    if fn is None:
        return ""
    parts: list[tuple[str, Any]] = []
    seen: set[int] = {id(fn)}
    written: set[str] = set()

    def visit(f: types.FunctionType, depth: int) -> None:
        names, stored = _globals_of(f.__code__)
        written.update(stored)
        for name in sorted(names):
            if name not in f.__globals__:
                continue
            value = f.__globals__[name]
            if isinstance(value, set | frozenset) and _is_simple(value):
                parts.append((name, sorted(map(repr, value))))  # set order differs between processes
            elif _is_simple(value):
                parts.append((name, value))
            elif isinstance(value, types.FunctionType) and value.__module__ == fn.__module__:
                if id(value) in seen or depth >= _DEPTH:
                    continue
                seen.add(id(value))
                try:
                    parts.append((name, code_fingerprint(value)))
                except Unhashable:
                    continue
                visit(value, depth + 1)

    visit(fn, 0)
    parts = [p for p in parts if p[0] not in written]  # ``global n; n += 1``: a counter, not a setting
    try:
        return digest(parts) if parts else ""
    except Unhashable:  # cannot happen for simple values; never fail a run over a fingerprint
        return ""
