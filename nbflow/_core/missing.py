"""The explicit "no value" marker: never a ``None`` that could be a real value."""

from __future__ import annotations

from typing import Final

__all__ = ["MISSING", "Missing"]


class Missing:
    """Marks a value that does not exist (a node that produced no output, a parameter with no default).

    There is one instance, ``nbflow.MISSING``; test with ``value is nf.MISSING``. It is falsy.
    """

    __slots__ = ()
    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "nbflow.MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final = Missing()
