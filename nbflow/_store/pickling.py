"""The one store pickler (checkpoints, node caches, batch stores): secrets redacted, exceptions kept as
StoredError, and files written before the package was split into layers still load (old class paths)."""

from __future__ import annotations

import io
import pickle
from typing import Any

from nbflow._core.missing import MISSING
from nbflow._core.secrets import REDACTED, Secret


class StoredError(Exception):
    """An exception read back from a store: its type name and message (the original is not kept)."""

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (StoredError, (self.type_name, str(self)))

    def __repr__(self) -> str:
        return f"StoredError({self.type_name}: {self})"


class StorePickler(pickle.Pickler):
    """Pickles values for the store: secrets redacted, exceptions as StoredError."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Secret):
            return (_redacted, ())
        if isinstance(obj, BaseException) and not isinstance(obj, StoredError):
            return (StoredError, (type(obj).__name__, str(obj)))
        return NotImplemented


def _redacted() -> Any:
    return REDACTED


def dumps(value: Any) -> bytes:
    buf = io.BytesIO()
    StorePickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buf.getvalue()


# Module paths before the layered layout (0.1.0) -> today's, for classes stores pickle.
_OLD_PATHS = {
    "nbflow._missing": "nbflow._core.missing",
    "nbflow.secret": "nbflow._core.secrets",
    "nbflow.errors": "nbflow._core.errors",
    "nbflow.engine.states": "nbflow._core.states",
    "nbflow.engine.events": "nbflow._core.events",
    "nbflow.engine.pause": "nbflow._core.question",
    "nbflow.run": "nbflow._record.run",
    "nbflow.checkpoint": "nbflow._store.pickling",
    "nbflow.control": "nbflow._dsl.control",
    "nbflow.policies": "nbflow._dsl.policies",
    "nbflow.limits": "nbflow._dsl.limits",
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(_OLD_PATHS.get(module, module), name)


def loads(data: bytes | None) -> Any:
    """A value written by ``dumps`` (or by nbflow 0.1.0, whose class paths are mapped to today's)."""
    return MISSING if data is None else _Unpickler(io.BytesIO(data)).load()
