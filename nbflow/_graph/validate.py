"""Type-hint validation with pydantic: adapters are built once per hint and cached.

Compiling a flow makes the validators but builds no adapter (pydantic's import alone is ~100 ms and
10 MiB, more than defining a flow should cost): the hints wait in ``_pending`` until the first run
builds them all at once (``build_pending``, before any node starts, so no node's ``timeout=`` pays
for it), or until a validator is first called, whichever comes first. The exact builtin hints (``int``,
``float``, ``str``, ``bool``, ``bytes``) are not pending: their values pass by a type check, and the
adapter is built (pydantic imported) only when a value of another type must be converted or refused.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from functools import lru_cache
from types import FunctionType
from typing import Any

from nbflow._core.errors import TypeValidationError

__all__ = ["Validator", "admits_none", "build_pending", "hints_of", "make_validator", "pending", "still_resolved"]

Validator = Callable[[Any], Any]

_NO_CHECK = {inspect.Parameter.empty, Any, object, None.__class__}
# Hints whose exact-type values pass pydantic unchanged (lax mode only converts other types).
_EXACT = frozenset({int, float, str, bool, bytes})
_FLOAT_INT = 2**53  # ints a float holds exactly; pydantic decides the others
# Hints of validators made since the last build: a set of hints, not of validators, so compiling
# and dropping graphs without running them keeps at most one entry per distinct hint.
_pending: set[Any] = set()


def pending() -> bool:
    """Whether some validator's adapter is still to build (a run calls ``build_pending`` first)."""
    return bool(_pending)


def build_pending() -> None:
    """Build the adapters of every validator made so far (imports pydantic if one needs it)."""
    while _pending:
        try:
            hint = _pending.pop()
        except KeyError:  # another thread's run took the last one
            return
        _adapter(hint)


def hints_of(func: Callable[..., Any], memo: dict[Any, Any] | None = None) -> dict[str, Any]:
    """The function's resolved type hints; unresolvable ones (forward refs) are left out.

    ``memo`` (one per compile: names may be rebound between compiles, as in a notebook) shares the
    resolution of each annotation between the plain functions of one module: many nodes made in a
    loop, or a cell of many ``def``s, resolve ``"int"`` or ``list[Doc]`` once, not once each (a
    string annotation costs a ``compile``; ``typing.get_type_hints`` a dozen calls per function).
    It maps ``(id(module namespace), annotation)`` to ``(namespace, resolved)``: a recompile checks
    with ``still_resolved`` that each resolves the same. What a plain class annotates is taken as is
    (``get_type_hints`` would give it back unchanged).
    """
    if memo is None or type(func) is not FunctionType:
        return _hints_of(func)
    attrs = func.__dict__  # (empty for most functions)
    if attrs and "__wrapped__" in attrs:
        return _hints_of(func)
    if _TYPE_PARAMS and getattr(func, "__type_params__", None):  # PEP 695 names: only get_type_hints resolves them
        return _hints_of(func)
    annotations = func.__annotations__
    hints: dict[str, Any] = {}
    namespace = func.__globals__
    for name, value in annotations.items():
        if type(value) is type:
            hints[name] = value
            continue
        try:
            key = (id(namespace), value)
            seen = memo.get(key)
        except TypeError:  # an unhashable annotation: resolved on its own
            key, seen = None, None
        if seen is not None:
            found = seen[1]
        else:
            found = _resolve(value, namespace)
            if key is not None:
                memo[key] = (namespace, found)
        if found is _UNRESOLVED:  # as get_type_hints failing: keep what is not a string
            return {n: a for n, a in annotations.items() if not isinstance(a, str)}
        hints[name] = found
    return hints


_UNRESOLVED: Any = object()
_TYPE_PARAMS: bool = hasattr(FunctionType, "__type_params__")  # Python 3.12+
_STUB = (lambda: None).__code__


def _resolve(annotation: Any, namespace: dict[str, Any]) -> Any:
    """One annotation as ``typing.get_type_hints`` resolves it for a function of module ``namespace``."""
    stub = FunctionType(_STUB, namespace)
    stub.__annotations__ = {"hint": annotation}
    try:
        return typing.get_type_hints(stub)["hint"]
    except Exception:
        return _UNRESOLVED


def still_resolved(memo: dict[Any, Any]) -> bool:
    """Whether every annotation of ``memo`` resolves as it did (a notebook may rebind a hint's name)."""
    for (_, annotation), (namespace, found) in memo.items():
        try:
            if _resolve(annotation, namespace) != found:
                return False
        except Exception:
            return False
    return True


def _hints_of(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except Exception:
        # A hint naming a class defined later in the notebook: validate what can be resolved.
        hints = {}
        for name, ann in getattr(func, "__annotations__", {}).items():
            if not isinstance(ann, str):
                hints[name] = ann
        return hints


def _unchecked(value: Any) -> Any:
    return value


def hint_text(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


@lru_cache(maxsize=1024)
def _adapter(hint: Any) -> Any:
    from pydantic import ConfigDict, TypeAdapter

    try:
        return TypeAdapter(hint, config=ConfigDict(arbitrary_types_allowed=True))
    except Exception:
        try:
            return TypeAdapter(hint)  # BaseModel / dataclass hints refuse a config
        except Exception:
            return None


def make_validator(hint: Any, node: str, parameter: str) -> Validator | None:
    """A function that returns the validated value or raises TypeValidationError; None: nothing to check."""
    if hint in _NO_CHECK or hint is None:
        return None
    try:
        hash(hint)
    except TypeError:  # unhashable hint: never checked (the adapters are cached by hint)
        return None
    exact = hint if hint in _EXACT else None
    if exact is None:
        _pending.add(hint)
    # An exact builtin hint builds its adapter only when a value of another type comes (a str given for
    # an int): a run whose values all have their hinted types never imports pydantic (~100 ms, ~14 MB).
    # What a check reads comes in as default arguments, not closure variables: a compile makes one
    # validator per node, and five cells (GC-tracked objects, each walked by a collection) made it twice as
    # dear to build; a call reads them as fast. Call it with the value only. ``state`` is also the function's
    # ``__dict__``: its ``exact`` and ``hint`` are what the engine and batches read, ``validate`` the
    # adapter's core validator once bound (at the first value that is not of the exact type).
    state: dict[str, Any] = {"exact": exact, "hint": hint, "validate": None}

    def check(
        value: Any, _exact: Any = exact, _node: str = node, _parameter: str = parameter, _state: dict[str, Any] = state
    ) -> Any:
        if type(value) is _exact:  # a value of exactly the hinted builtin type: pydantic returns it as is
            return value
        if _exact is float and type(value) is int and -_FLOAT_INT < value < _FLOAT_INT:
            return float(value)  # what pydantic's lax mode gives, without importing it
        validate = _state["validate"]
        if validate is None:
            adapter = _adapter(_state["hint"])  # built by build_pending at the run's start, or now
            # The core validator directly: TypeAdapter.validate_python adds a wrapper layer per call.
            # A hint pydantic cannot make an adapter for is not checked, as if it had none.
            validate = _state["validate"] = (
                _unchecked if adapter is None else getattr(adapter, "validator", adapter).validate_python
            )
        try:
            return validate(value)
        except Exception as exc:
            errors = getattr(exc, "errors", None)
            detail = ""
            if callable(errors):
                try:
                    first = errors()[0]
                    loc = ".".join(str(x) for x in first.get("loc", ()))
                    detail = f"{loc + ': ' if loc else ''}{first.get('msg', '')}"
                except Exception:
                    detail = ""
            raise TypeValidationError(_node, _parameter, hint_text(_state["hint"]), value, detail) from None

    check.__dict__ = state  # check.exact: the engine skips the call for such a value; check.hint: what a
    return check  # batch reads (an empty cell is None if the hint admits None)


def admits_none(hint: Any) -> bool:
    """Whether ``hint`` accepts ``None`` (``X | None``, ``Optional[X]``, ``None``)."""
    return hint is None or hint is type(None) or type(None) in typing.get_args(hint)
