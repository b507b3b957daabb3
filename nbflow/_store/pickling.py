"""The one store pickler (checkpoints, node caches, batch stores): secrets redacted, exceptions kept as
StoredError, and files written before the package was split into layers still load (old class paths)."""

from __future__ import annotations

import io
import pickle
from typing import Any

from nbflow._core.missing import MISSING
from nbflow._core.secrets import REDACTED, Redactor, Secret


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


class _RedactingPickler(StorePickler):
    """The store pickler, and every string holding a known secret's text is written redacted.

    A ``str`` never reaches ``reducer_override``, but it does reach ``persistent_id``: a string with a
    secret is written as a persistent id holding its redacted text, which ``loads`` turns back into a
    string. Wherever it sits (an output, an object's attribute, a sub-flow's record), the text is gone.
    """

    def __init__(self, file: Any, protocol: int, redactor: Redactor) -> None:
        super().__init__(file, protocol=protocol)
        self._redactor = redactor

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is str and self._redactor.found_in(obj):
            return (_REDACTED_TEXT_ID, self._redactor(obj))
        return None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, BaseException) and not isinstance(obj, StoredError):
            return (StoredError, (type(obj).__name__, self._redactor(str(obj))))
        return super().reducer_override(obj)


_REDACTED_TEXT_ID = "nbflow-redacted-text"


def _redacted() -> Any:
    return REDACTED


def dumps(value: Any, redactor: Redactor | None = None) -> bytes:
    """Pickle ``value`` for a store; with a ``redactor``, the text of its secrets never reaches the bytes."""
    buf = io.BytesIO()
    if redactor:
        _RedactingPickler(buf, pickle.HIGHEST_PROTOCOL, redactor).dump(value)
    else:
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

    def persistent_load(self, pid: Any) -> Any:
        if type(pid) is tuple and len(pid) == 2 and pid[0] == _REDACTED_TEXT_ID:
            return pid[1]
        raise pickle.UnpicklingError(f"unknown persistent id in a store value: {pid!r}")


def loads(data: bytes | None) -> Any:
    """A value written by ``dumps`` (or by nbflow 0.1.0, whose class paths are mapped to today's)."""
    return MISSING if data is None else _Unpickler(io.BytesIO(data)).load()
