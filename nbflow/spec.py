"""What a decorator records about a node: a spec, nothing that runs."""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ._missing import MISSING
from .errors import FlowDefinitionError

__all__ = ["NodeSpec", "ParamSpec", "make_spec"]


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One parameter of a node function.

    ``source`` is the node or flow input that feeds it (the parameter's own name unless
    ``inputs=`` said otherwise); ``default`` is ``MISSING`` when the parameter is required.
    """

    name: str
    source: str
    default: Any = MISSING
    annotation: Any = inspect.Parameter.empty

    @property
    def required(self) -> bool:
        return self.default is MISSING


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node as declared: its name, function and parameters. Read-only."""

    name: str
    func: Callable[..., Any]
    params: tuple[ParamSpec, ...]
    is_async: bool
    thread: bool
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.func) or ""


def check_name(name: object, what: str = "node name") -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise FlowDefinitionError(
            f"{what} {name!r} is not a valid Python identifier; node and input names are "
            f"parameter names, so use letters, digits and underscores (e.g. 'retrieve_docs')"
        )
    return name


def make_spec(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    inputs: Mapping[str, str] | None = None,
    thread: bool | None = None,
    options: Mapping[str, Any] | None = None,
) -> NodeSpec:
    """Build the spec of ``func``; raise FlowDefinitionError naming the node and the fix."""
    if not callable(func):
        raise FlowDefinitionError(f"@flow.node needs a function, got {func!r} ({type(func).__name__})")
    node_name = check_name(name if name is not None else getattr(func, "__name__", None))
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise FlowDefinitionError(f"node {node_name!r}: cannot read the signature of {func!r}: {exc}") from exc
    inputs = dict(inputs or {})
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise FlowDefinitionError(
                f"node {node_name!r}: parameter '{star}{p.name}' is not supported; nbflow wires "
                f"nodes by parameter name, so declare each input as a named parameter"
            )
        if p.kind is p.POSITIONAL_ONLY:
            raise FlowDefinitionError(
                f"node {node_name!r}: parameter {p.name!r} is positional-only; remove the '/' so "
                f"nbflow can pass it by name"
            )
        source = inputs.pop(p.name, p.name)
        check_name(source, f"node {node_name!r}: inputs[{p.name!r}] source")
        default = MISSING if p.default is p.empty else p.default
        params.append(ParamSpec(p.name, source, default, p.annotation))
    if inputs:
        unknown = ", ".join(repr(k) for k in inputs)
        have = ", ".join(repr(p.name) for p in params) or "(none)"
        raise FlowDefinitionError(
            f"node {node_name!r}: inputs= names {unknown}, which {'is' if len(inputs) == 1 else 'are'} "
            f"not a parameter of {getattr(func, '__name__', func)!r}; its parameters are {have}"
        )
    is_async = inspect.iscoroutinefunction(func)
    if thread and is_async:
        raise FlowDefinitionError(f"node {node_name!r}: thread=True is for sync functions; this one is async")
    return NodeSpec(
        name=node_name,
        func=func,
        params=tuple(params),
        is_async=is_async,
        thread=(not is_async) if thread is None else bool(thread),
        options=MappingProxyType(dict(options or {})),
    )
