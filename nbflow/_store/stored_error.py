"""``StoredError``: an exception read back from a store (its type name and message).

Its own module so that both codecs (``pickling.py`` and ``plain.py``) import it without importing each
other; ``nbflow._store.pickling.StoredError`` stays a name for it (pickles written before name that path).
"""

from __future__ import annotations

from typing import Any

__all__ = ["StoredError", "stored_type"]


class StoredError(Exception):
    """An exception read back from a store: its type name and message (the original is not kept).

    ``type(err).__name__`` is the original type's name (``"ValueError"``), so ``record.error_type``,
    ``nf.ErrorInfo.type`` and ``nf.Failed`` show what the user's code raised; ``isinstance(err,
    nf.StoredError)`` tells a read-back error from a live one.
    """

    def __new__(cls, type_name: str = "Exception", message: str = "") -> StoredError:
        if cls is StoredError:
            cls = stored_type(type_name)
        return super().__new__(cls, message)

    def __init__(self, type_name: str = "Exception", message: str = "") -> None:
        self.type_name = type_name
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (StoredError, (self.type_name, str(self)))

    def __repr__(self) -> str:
        return f"StoredError({self.type_name}: {self})"


_STORED_TYPES: dict[str, type[StoredError]] = {}


def stored_type(name: str) -> type[StoredError]:
    """A subclass of StoredError named like the original exception type (one per name)."""
    if not name.isidentifier():
        return StoredError
    found = _STORED_TYPES.get(name)
    if found is None:
        found = _STORED_TYPES[name] = type(name, (StoredError,), {"__module__": "nbflow.stored", "__slots__": ()})
    return found
