"""A node never changes another node's input: isolated inputs, and an optional mutation check.

Sibling nodes (and the cache, and the run record) receive the same upstream output. So each call
gets its own view of it:

- a pandas DataFrame/Series: a shallow copy, which copy-on-write makes cheap and safe (pandas >= 3
  always; pandas 2 when ``pd.options.mode.copy_on_write = True``; else a deep copy);
- a numpy array: a read-only view (writing to it raises numpy's own "assignment destination is
  read-only"; copy it in the node to change it);
- a dict, list or tuple holding those: a new container of isolated values (one level deep).

Other mutable values (lists of dicts, custom objects) cannot be isolated cheaply. With
``nf.config.check_mutation = True`` each node's inputs are fingerprinted before and after it runs
and a changed one fails the node with ``InputMutationError`` naming the node and the parameter (on
in nbflow's own tests).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from nbflow._core.config import config
from nbflow._core.errors import InputMutationError
from nbflow._engine.fingerprint import Unhashable, digest

__all__ = ["PLAIN_TYPES", "MutationCheck", "isolate", "isolate_inputs"]


def _frame_copier() -> Callable[[Any], Any]:
    import pandas as pd

    major = int(pd.__version__.split(".", 1)[0])
    cow = major >= 3 or bool(pd.options.mode.copy_on_write is True)
    return (lambda v: v.copy(deep=False)) if cow else (lambda v: v.copy(deep=True))


_copy_frame: Callable[[Any], Any] | None = None


def _isolate_one(value: Any) -> Any:
    global _copy_frame
    kind = type(value)
    module = kind.__module__
    if (module == "pandas" or module.startswith("pandas.")) and kind.__name__ in ("DataFrame", "Series"):
        if _copy_frame is None:
            _copy_frame = _frame_copier()
        return _copy_frame(value)
    if kind.__name__ == "ndarray" and module == "numpy" and value.flags.writeable:
        view = value.view()
        view.flags.writeable = False
        return view
    return value


def isolate(value: Any) -> Any:
    """``value`` as one node may receive it without changing it for the others (see the module doc)."""
    if "pandas" not in sys.modules and "numpy" not in sys.modules:
        return value  # nothing to isolate can exist
    kind = type(value)
    if kind is dict:
        out = {k: _isolate_one(v) for k, v in value.items()}
        return out if any(out[k] is not v for k, v in value.items()) else value
    if kind is list or kind is tuple:
        items = [_isolate_one(v) for v in value]
        return kind(items) if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return _isolate_one(value)


def isolate_inputs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``kwargs`` with every value isolated (the same dict when nothing needed it)."""
    if not kwargs or ("pandas" not in sys.modules and "numpy" not in sys.modules):
        return kwargs
    for v in kwargs.values():  # most inputs are plain values: keep the dict, build no copy
        if type(v) not in PLAIN_TYPES:
            return {k: isolate(v) for k, v in kwargs.items()}
    return kwargs


PLAIN_TYPES = frozenset({int, float, str, bool, bytes, type(None), complex})  # never a frame or an array


class MutationCheck:
    """Fingerprints of a node's inputs before it runs; ``verify`` raises if one changed."""

    __slots__ = ("before", "node")

    def __init__(self, node: str, kwargs: Mapping[str, Any]) -> None:
        self.node = node
        self.before: dict[str, str] = {}
        for k, v in kwargs.items():
            if _immutable(v):
                continue
            try:
                first = digest(v)
                if digest(v) == first:  # a value whose pickle is not stable cannot be checked
                    self.before[k] = first
            except Unhashable:
                continue

    @classmethod
    def start(cls, node: str, kwargs: Mapping[str, Any]) -> MutationCheck | None:
        return cls(node, kwargs) if config.check_mutation else None

    def verify(self, kwargs: Mapping[str, Any]) -> None:
        for k, before in self.before.items():
            try:
                after = digest(kwargs[k])
            except Unhashable:
                continue
            if after != before:
                raise InputMutationError(self.node, k, type(kwargs[k]).__name__)


def _immutable(value: Any) -> bool:
    return isinstance(value, str | bytes | int | float | complex | bool | type(None) | frozenset)
