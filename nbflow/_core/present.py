"""The rich-repr seam: records ask for their notebook display here; the notebook layer answers.

``Run._repr_mimebundle_`` and ``RunHandle._repr_mimebundle_`` live in low layers and must not import the
front ends. ``nbflow._notebook`` installs the presenter when it is imported (``import nbflow`` does it);
without one, records show their plain text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["bundle", "set_presenter"]

Presenter = Callable[[Any, Any, Any, Any], "dict[str, Any] | None"]
_presenter: Presenter | None = None


def set_presenter(presenter: Presenter | None) -> None:
    """Install ``presenter(run, handle, include, exclude) -> mime bundle | None`` (None: plain text)."""
    global _presenter
    _presenter = presenter


def bundle(run: Any, handle: Any = None, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
    """The mime bundle the installed presenter gives for ``run`` (shown by ``handle`` if any), or None."""
    return None if _presenter is None else _presenter(run, handle, include, exclude)
