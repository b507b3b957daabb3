"""What ``@flow.resource`` records: a factory for a long-lived object, wired by parameter name.

A resource is not a node: it has no record, no output, no validation. Nodes (and other resources)
receive it by naming a parameter after it. ``nbflow._engine.resources`` builds one instance per
event loop from this spec and closes it when that loop ends.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal

from nbflow._core.errors import FlowDefinitionError
from nbflow._core.missing import MISSING
from nbflow._core.records import record
from nbflow._dsl.spec import check_name

__all__ = ["ResourceKind", "ResourceSpec", "make_resource_spec"]

ResourceKind = Literal["sync", "async", "generator", "async_generator"]


@record(frozen=True, eq=False)
class ResourceSpec:
    """A resource as declared. Compared by identity: a redefinition is a new spec (and new instances)."""

    name: str
    func: Callable[..., Any]
    kind: ResourceKind
    params: tuple[tuple[str, Any], ...]
    """``(parameter name, default or MISSING)``: other resources or flow inputs, by name."""

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.func) or ""


def make_resource_spec(func: Callable[..., Any], name: str | None = None) -> ResourceSpec:
    """Build the spec of a resource factory; raise FlowDefinitionError naming the resource and the fix."""
    if not callable(func):
        raise FlowDefinitionError(f"@flow.resource needs a function, got {func!r} ({type(func).__name__})")
    res_name = check_name(name if name is not None else getattr(func, "__name__", None), "resource name")
    if inspect.isasyncgenfunction(func):
        kind: ResourceKind = "async_generator"
    elif inspect.isgeneratorfunction(func):
        kind = "generator"
    elif inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__):
        kind = "async"
    else:
        kind = "sync"
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise FlowDefinitionError(f"resource {res_name!r}: cannot read the signature of {func!r}: {exc}") from exc
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise FlowDefinitionError(
                f"resource {res_name!r}: parameter {p.name!r} must be a plain named parameter; a resource "
                f"receives other resources and flow inputs by parameter name"
            )
        params.append((p.name, MISSING if p.default is p.empty else p.default))
    return ResourceSpec(res_name, func, kind, tuple(params))
