"""Fingerprints for the node cache: a stable digest of values, and of a node's code and declaration.

A value's digest is the SHA-256 of its pickle (``nf.Secret`` values count by their real value: the
digest is computed in memory and only the hash is ever kept). A function's fingerprint is its
normalized source when Python can find it (notebook cells included): its AST without docstrings,
so comments, formatting and docstrings do not count; else its byte code and constants,
plus what it reads that a notebook user edits in other cells: simple global values (strings,
numbers, containers of them) and helper functions from the same module or from the user's own modules
(``project_module``: not the standard library, site-packages or nbflow), recursively, by source.
"""

from __future__ import annotations

import ast
import dis
import functools
import hashlib
import inspect
import io
import os
import pickle
import re
import sys
import sysconfig
import textwrap
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from nbflow._core.secrets import Secret

__all__ = ["Unhashable", "code_fingerprint", "digest", "globals_fingerprint", "project_module"]

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


_PLAIN = frozenset({int, float, str, bytes, bool, type(None)})  # pickled alike by both picklers (no Secret inside)


def digest(value: Any) -> str:
    """SHA-256 (hex) of ``value``'s pickle; raises Unhashable if it cannot be pickled."""
    if type(value) in _PLAIN:  # the same bytes without making a pickler (a third of the time)
        return hashlib.sha256(pickle.dumps(value, protocol=_PROTOCOL)).hexdigest()
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
        source = textwrap.dedent(inspect.getsource(code))
    except (OSError, TypeError):
        source = None
    if source is not None:
        return digest(("ast", normalized_source(source)))
    parts: list[bytes] = []
    _code_bytes(code, parts)
    return digest(("code", b"\0".join(parts)))


def normalized_source(source: str) -> str:
    """What the code says, not how it is written: its AST without docstrings (comments and formatting
    never reach it). Source that does not parse alone (a lambda cut from its line) counts as text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "text:" + source
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


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


def _is_data(value: Any) -> bool:
    kind = type(value)
    module = kind.__module__
    return (kind.__name__ in ("DataFrame", "Series") and (module == "pandas" or module.startswith("pandas."))) or (
        kind.__name__ == "ndarray" and module == "numpy"
    )


def project_module(name: str) -> bool:
    """Is module ``name`` the user's own code: a ``.py`` file outside the standard library, site-packages and
    nbflow (a project's module, also one installed editable), or a notebook's ``__main__``?"""
    if name == "__main__":
        return True
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return False  # a built-in or C module, a namespace package
    return _project_file(file)


@functools.lru_cache(maxsize=4096)
def _project_file(file: str) -> bool:
    path = os.path.realpath(file)
    if not path.endswith(".py"):
        return False  # an extension module (.so): compiled, nothing to fingerprint by source
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return not any(path.startswith(root + os.sep) for root in _library_roots())


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    """Where code that is not the user's lives: the standard library(ies), installed packages, nbflow itself."""
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the nbflow package
    return tuple(sorted(os.path.realpath(r) for r in roots if r))


_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "popitem",
        "sort",
    }
)


class _Mutates(NamedTuple):
    stored: frozenset[str]  # closure names the code assigns (``nonlocal``)
    none: bool  # the code calls no mutating method and sets no item: its closure's containers are settings


@functools.lru_cache(maxsize=4096)
def _mutates(code: types.CodeType) -> _Mutates:
    stored: set[str] = set()
    none = True
    for c in _codes(code):
        for i in dis.get_instructions(c):
            if i.opname in ("STORE_DEREF", "DELETE_DEREF"):
                stored.add(i.argval)
            elif i.opname in ("STORE_SUBSCR", "DELETE_SUBSCR"):
                none = False
        if _MUTATORS & set(c.co_names):
            none = False
    return _Mutates(frozenset(stored), none)


def _codes(code: types.CodeType) -> list[types.CodeType]:
    out = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out.extend(_codes(const))
    return out


def _immutable(value: Any) -> bool:
    kind = type(value)
    if kind in _SIMPLE:
        return True
    if kind in (tuple, frozenset):
        return all(_immutable(v) for v in value)
    return False


def globals_fingerprint(func: Callable[..., Any]) -> str:
    """A digest of the globals ``func`` reads that a notebook user may edit in another cell.

    Simple values (a prompt string, a model name, a dict of settings) and data (a global DataFrame,
    Series or numpy array, by the digest of its content: see docs/data_pipelines.md for the cost) count by value;
    functions of the same module (helpers defined in the notebook) and of the user's own modules
    (``project_module``: ``from helpers import clean``, ``import helpers; helpers.clean(...)``) by their code
    and their own globals, up to three levels deep; classes of the user's modules by their methods' code.
    Anything else (modules and functions of the standard library or installed packages, clients, a Counter)
    is left out, and so are names the code assigns with ``global`` (counters): editing those does not
    invalidate the cache.
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
            elif _is_data(value):  # a global DataFrame/array: by content (a stale result would be silent)
                try:
                    parts.append((name, digest(value)))
                except Unhashable:
                    continue
            elif isinstance(value, types.FunctionType) and (
                value.__module__ == fn.__module__ or project_module(value.__module__)
            ):
                helper(name, value, depth)
            elif isinstance(value, type) and project_module(value.__module__):
                for attr, method in sorted(vars(value).items()):  # a class of the project: its methods' code
                    found = _function(method.__func__ if isinstance(method, classmethod | staticmethod) else method)
                    if found is not None:
                        helper(f"{name}.{attr}", found, depth)
            elif isinstance(value, types.ModuleType) and project_module(value.__name__):
                # ``import helpers`` then ``helpers.clean(x)``: the names the code reads that the module defines
                # (a name read from anything else that the module also defines counts too: harmless)
                members = vars(value)
                for attr in sorted(names):
                    member = members.get(attr)
                    if isinstance(member, types.FunctionType) and member.__module__ == value.__name__:
                        helper(f"{name}.{attr}", member, depth)
                    elif member is not None and _is_simple(member):
                        parts.append((f"{name}.{attr}", member))
        closure = f.__closure__ or ()
        if closure:  # a factory's settings (a scorer's tolerance=, pattern): editing them is editing the node
            mutates = _mutates(f.__code__)
            for name, cell in zip(f.__code__.co_freevars, closure, strict=False):
                if name in mutates.stored:  # ``nonlocal n; n += 1``: a counter, not a setting
                    continue
                try:
                    value = cell.cell_contents
                except ValueError:  # not assigned yet
                    continue
                if isinstance(value, re.Pattern):
                    parts.append((f"<closure>{name}", (value.pattern, value.flags)))
                elif _is_simple(value) and (mutates.none or _immutable(value)):
                    # a list or dict the code appends to or sets items of is state (``calls.append(...)``)
                    if isinstance(value, set | frozenset):
                        parts.append((f"<closure>{name}", sorted(map(repr, value))))
                    else:
                        parts.append((f"<closure>{name}", value))
                elif _is_data(value):
                    try:
                        parts.append((f"<closure>{name}", digest(value)))
                    except Unhashable:
                        continue
                elif isinstance(value, types.FunctionType) and (
                    value.__module__ == fn.__module__ or project_module(value.__module__)
                ):
                    helper(f"<closure>{name}", value, depth)

    def helper(name: str, value: types.FunctionType, depth: int) -> None:
        if id(value) in seen or depth >= _DEPTH:
            return
        seen.add(id(value))
        try:
            parts.append((name, code_fingerprint(value)))
        except Unhashable:
            return
        visit(value, depth + 1)

    visit(fn, 0)
    parts = [p for p in parts if p[0] not in written]  # ``global n; n += 1``: a counter, not a setting
    try:
        return digest(parts) if parts else ""
    except Unhashable:  # cannot happen for simple values; never fail a run over a fingerprint
        return ""
