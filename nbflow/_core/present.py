"""The rich-repr seam: records ask for their notebook display here; the notebook layer answers.

``Run._repr_mimebundle_`` and ``RunHandle._repr_mimebundle_`` live in low layers and must not import the
front ends. ``nbflow._notebook`` installs the presenter when it is imported; a higher layer names how to
import it (``set_loader``), which the first display does (a script's runs that are never displayed never
import it). Without a presenter, records show their plain text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["bundle", "set_loader", "set_presenter"]

Presenter = Callable[[Any, Any, Any, Any], "dict[str, Any] | None"]
_presenter: Presenter | None = None
_loader: Callable[[], object] | None = None


def set_loader(loader: Callable[[], object]) -> None:
    """What installs the presenter (imports the notebook layer), called by the first display that needs it."""
    global _loader
    _loader = loader


def set_presenter(presenter: Presenter | None) -> None:
    """Install ``presenter(run, handle, include, exclude) -> mime bundle | None`` (None: plain text)."""
    global _presenter
    _presenter = presenter


def bundle(run: Any, handle: Any = None, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
    """The mime bundle the installed presenter gives for ``run`` (shown by ``handle`` if any), or None."""
    global _loader
    if _presenter is None and _loader is not None:
        load, _loader = _loader, None
        load()
    return None if _presenter is None else _presenter(run, handle, include, exclude)
