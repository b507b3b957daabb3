"""What a decorator records about a node: a spec, nothing that runs."""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable, Mapping
from dataclasses import field
from types import FunctionType, MappingProxyType
from typing import Any

from nbflow._core.errors import FlowDefinitionError, UnknownNodeError
from nbflow._core.missing import MISSING
from nbflow._core.records import record
from nbflow._dsl.control import FirstOf, Loop, Map, OptionalSource, Router

__all__ = ["NodeSpec", "ParamSpec", "make_spec", "node_spec", "param_spec"]


@record(frozen=True)
class ParamSpec:
    """One parameter of a node function.

    ``source`` is the node or flow input that feeds it (the parameter's own name unless
    ``inputs=`` said otherwise); ``default`` is ``MISSING`` when the parameter is required.
    """

    name: str
    source: str
    default: Any = MISSING
    annotation: Any = inspect.Parameter.empty
    alternatives: tuple[str, ...] = ()
    """For a merge (``nf.first_of``): every candidate source, in order (``source`` is the first)."""
    optional: bool = False
    """``nf.optional``: the parameter gets ``nf.MISSING`` when its source produced no output."""

    @property
    def required(self) -> bool:
        return self.default is MISSING


@record(frozen=True)
class NodeSpec:
    """A node as declared: its name, function and parameters. Read-only."""

    name: str
    func: Callable[..., Any]
    params: tuple[ParamSpec, ...]
    is_async: bool
    thread: bool
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    router: Router | None = None
    branch: tuple[str, str] | None = None
    """``(router, branch)``: the node runs only when that router takes that branch."""
    map: Map | None = None
    loop: Loop | None = None
    flow: Any = None
    """A sub-flow run as this node (``func`` is then the sub-flow's runner)."""
    output: str | None = None
    """For a sub-flow: which of its nodes is the output (None: a dict of its leaf outputs)."""
    auto_thread: bool = False
    """A sync node declared without ``thread=``: the engine learns whether it may run inline."""

    @property
    def plain(self) -> bool:
        """No control flow: the engine's fast path."""
        return self.router is None and self.map is None and self.loop is None and self.flow is None

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.func) or ""


# Every node declared makes a NodeSpec and a ParamSpec per parameter. A frozen dataclass's __init__ sets
# each field with a Python-level ``object.__setattr__`` call, which made these two most of what declaring
# a node cost (NodeSpec ~1.7 µs, ParamSpec ~0.85 µs): declarations build them here instead, setting each
# slot through its descriptor (a C call), ~2.5x faster. They are the same frozen dataclasses (equal to,
# and as read-only as, ones made by their __init__); a field added to a class is added here too
# (tests/dsl/test_spec_build.py compares both ways of building).
_new = object.__new__


def _setter(cls: type, field: str) -> Callable[[Any, Any], None]:
    return cls.__dict__[field].__set__  # the slot's member descriptor


_p_name, _p_source, _p_default = _setter(ParamSpec, "name"), _setter(ParamSpec, "source"), _setter(ParamSpec, "default")
_p_annotation, _p_alternatives = _setter(ParamSpec, "annotation"), _setter(ParamSpec, "alternatives")
_p_optional = _setter(ParamSpec, "optional")
_n_name, _n_func, _n_params = _setter(NodeSpec, "name"), _setter(NodeSpec, "func"), _setter(NodeSpec, "params")
_n_is_async, _n_thread, _n_options = (
    _setter(NodeSpec, "is_async"),
    _setter(NodeSpec, "thread"),
    _setter(NodeSpec, "options"),
)
_n_router, _n_branch, _n_map = _setter(NodeSpec, "router"), _setter(NodeSpec, "branch"), _setter(NodeSpec, "map")
_n_loop, _n_flow, _n_output = _setter(NodeSpec, "loop"), _setter(NodeSpec, "flow"), _setter(NodeSpec, "output")
_n_auto_thread = _setter(NodeSpec, "auto_thread")


def param_spec(
    name: str, source: str, default: Any, annotation: Any, alternatives: tuple[str, ...] = (), optional: bool = False
) -> ParamSpec:
    """``ParamSpec(name, source, default, annotation, alternatives, optional)``, built faster (see above)."""
    p = _new(ParamSpec)
    _p_name(p, name)
    _p_source(p, source)
    _p_default(p, default)
    _p_annotation(p, annotation)
    _p_alternatives(p, alternatives)
    _p_optional(p, optional)
    return p


def node_spec(
    name: str,
    func: Callable[..., Any],
    params: tuple[ParamSpec, ...],
    is_async: bool,
    thread: bool,
    options: Mapping[str, Any],
    router: Router | None = None,
    branch: tuple[str, str] | None = None,
    map: Map | None = None,
    loop: Loop | None = None,
    flow: Any = None,
    output: str | None = None,
    auto_thread: bool = False,
) -> NodeSpec:
    """``NodeSpec(...)`` with every field given in order, built faster (see above)."""
    s = _new(NodeSpec)
    _n_name(s, name)
    _n_func(s, func)
    _n_params(s, params)
    _n_is_async(s, is_async)
    _n_thread(s, thread)
    _n_options(s, options)
    _n_router(s, router)
    _n_branch(s, branch)
    _n_map(s, map)
    _n_loop(s, loop)
    _n_flow(s, flow)
    _n_output(s, output)
    _n_auto_thread(s, auto_thread)
    return s


def check_name(name: object, what: str = "node name") -> str:
    if isinstance(name, str) and name.startswith("<"):
        raise FlowDefinitionError(f"{what} {name!r}: a lambda has no usable name; pass name='...'")
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise FlowDefinitionError(
            f"{what} {name!r} is not a valid Python identifier; node and input names are "
            f"parameter names, so use letters, digits and underscores (e.g. 'retrieve_docs')"
        )
    return name


Source = str | FirstOf | OptionalSource


def make_spec(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    inputs: Mapping[str, Source] | None = None,
    thread: bool | None = None,
    options: Mapping[str, Any] | None = None,
    router: Router | None = None,
    branch: str | None = None,
    map: Map | None = None,
    loop: Loop | None = None,
) -> NodeSpec:
    """Build the spec of ``func``; raise FlowDefinitionError naming the node and the fix."""
    plain = type(func) is FunctionType  # its kind read from its code's flags: what inspect says, cheaper
    if not plain and not callable(func):
        raise FlowDefinitionError(f"@flow.node needs a function, got {func!r} ({type(func).__name__})")
    node_name = check_name(name if name is not None else getattr(func, "__name__", None))
    flags = func.__code__.co_flags if plain else 0
    if flags & _CO_GENERATOR if plain else inspect.isgeneratorfunction(func):
        raise FlowDefinitionError(
            f"node {node_name!r} is a generator function (def with yield): its output would be a generator object, "
            f"not the values it yields; return a list (return list(...)), use @flow.map over the items, or make it "
            f"`async def` to stream its output (each yielded text shows live; the output is their concatenation)"
        )
    own = _from_code(func, node_name)  # each parameter fed by its own name
    if own is None:
        own = tuple([param_spec(n, n, default, hint) for n, default, hint in _from_signature(func, node_name)])
    # A streaming node: what it yields shows live (nbflow/_core/calls.py).
    if flags & _CO_ASYNC_GENERATOR if plain else inspect.isasyncgenfunction(func):
        from nbflow._core.calls import streaming_node

        func = streaming_node(func)
    # An object whose __call__ is async is an async node too (a coroutine would otherwise be its output).
    if type(func) is FunctionType and "_is_coroutine_marker" not in func.__dict__:
        is_async = bool(func.__code__.co_flags & _CO_COROUTINE)
    else:
        is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
    if thread and is_async:
        raise FlowDefinitionError(f"node {node_name!r}: thread=True is for sync functions; this one is async")
    params = own
    if inputs:  # (without: most nodes, nothing to rewire or check)
        params = wire_params(node_name, _declared(own), inputs, getattr(func, "__name__", func))
    guard = None
    if router is not None or branch is not None or map is not None or loop is not None:
        router, guard, map, loop = control_fields(node_name, _declared(own), router, branch, map, loop)
    return node_spec(
        node_name,
        func,
        params,
        is_async,
        (not is_async) if thread is None else bool(thread),
        MappingProxyType(dict(options)) if options else _NO_OPTIONS,
        router,
        guard,
        map,
        loop,
        auto_thread=thread is None and not is_async,
    )


_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})
_CO_COROUTINE = inspect.CO_COROUTINE
_CO_GENERATOR = inspect.CO_GENERATOR
_CO_ASYNC_GENERATOR = inspect.CO_ASYNC_GENERATOR
_CO_VARARGS = inspect.CO_VARARGS
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS


def _declared(params: tuple[ParamSpec, ...]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.default, p.annotation) for p in params]


def _from_code(func: Any, node_name: str) -> tuple[ParamSpec, ...] | None:
    """The parameters of a plain function, read from its code object, each fed by its own name.

    What ``inspect.signature`` would give, at a fraction of its cost (building a flow of many nodes
    was mostly signature objects). None when ``func`` is not a plain function (a partial, a
    callable object, a wrapper with ``__wrapped__``/``__signature__``): the caller falls back.
    """
    if type(func) is not FunctionType:
        return None
    attrs = func.__dict__  # (empty for most functions)
    if attrs and ("__wrapped__" in attrs or "__signature__" in attrs):
        return None
    code = func.__code__
    if code.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS) or code.co_posonlyargcount:
        _from_signature(func, node_name)  # the full path words the errors (it raises for these)
        return None
    n_pos = code.co_argcount
    names = code.co_varnames[: n_pos + code.co_kwonlyargcount]
    defaults = func.__defaults__ or ()
    kwdefaults = func.__kwdefaults__ or {}
    annotations = func.__annotations__
    first_default = n_pos - len(defaults)
    empty = inspect.Parameter.empty
    params = []
    for i, pname in enumerate(names):
        if i < n_pos:
            default = defaults[i - first_default] if i >= first_default else MISSING
        else:
            default = kwdefaults.get(pname, MISSING)
        params.append(param_spec(pname, pname, default, annotations.get(pname, empty)))
    return tuple(params)


def _from_signature(func: Any, node_name: str) -> list[tuple[str, Any, Any]]:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise FlowDefinitionError(f"node {node_name!r}: cannot read the signature of {func!r}: {exc}") from exc
    declared = []
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
        default = MISSING if p.default is p.empty else p.default
        declared.append((p.name, default, p.annotation))
    return declared


def wire_params(
    node: str, declared: list[tuple[str, Any, Any]], inputs: Mapping[str, Source] | None, what: object
) -> tuple[ParamSpec, ...]:
    """ParamSpecs for ``declared`` (name, default, annotation), rewired by ``inputs=``."""
    inputs = dict(inputs or {})
    params = []
    for pname, default, annotation in declared:
        source = inputs.pop(pname, pname)
        if isinstance(source, FirstOf):
            for s in source.sources:
                check_name(s, f"node {node!r}: inputs[{pname!r}] first_of source")
            params.append(param_spec(pname, source.sources[0], default, annotation, alternatives=source.sources))
        elif isinstance(source, OptionalSource):
            check_name(source.source, f"node {node!r}: inputs[{pname!r}] optional source")
            params.append(param_spec(pname, source.source, default, annotation, optional=True))
        else:
            if source is not pname:  # a parameter's own name is an identifier already
                check_name(source, f"node {node!r}: inputs[{pname!r}] source")
            params.append(param_spec(pname, source, default, annotation))
    if inputs:
        unknown = ", ".join(repr(k) for k in inputs)
        have = ", ".join(repr(p.name) for p in params) or "(none)"
        raise FlowDefinitionError(
            f"node {node!r}: inputs= names {unknown}, which {'is' if len(inputs) == 1 else 'are'} "
            f"not a parameter of {what!r}; its parameters are {have}"
        )
    return tuple(params)


def control_fields(
    node: str,
    declared: list[tuple[str, Any, Any]],
    router: Router | None,
    branch: str | None,
    map: Map | None,
    loop: Loop | None,
) -> tuple[Router | None, tuple[str, str] | None, Map | None, Loop | None]:
    """The control-flow fields of a node's spec, checked: ``(router, branch, map, loop)``."""
    names = [d[0] for d in declared]
    if map is not None and loop is not None:
        raise FlowDefinitionError(
            f"node {node!r}: a node cannot be both a map and a loop; map over a sub-flow that contains the loop"
        )
    if map is not None and map.over not in names:
        raise FlowDefinitionError(
            f"node {node!r}: map over={map.over!r} is not one of its parameters ({', '.join(names) or 'none'})"
        )
    if loop is not None and loop.feed not in names:
        raise FlowDefinitionError(
            f"node {node!r}: loop feed={loop.feed!r} is not one of its parameters ({', '.join(names) or 'none'})"
        )
    guard = None
    if branch is not None:
        router_name, dot, branch_name = branch.partition(".") if isinstance(branch, str) else ("", "", "")
        if not dot or not router_name or not branch_name:
            raise FlowDefinitionError(
                f"node {node!r}: branch={branch!r} should be 'router.branch', e.g. branch='route.billing'"
            )
        guard = (check_name(router_name, f"node {node!r}: branch router"), branch_name)
    return router, guard, map, loop


def make_subflow_spec(
    flow: Any,
    *,
    name: str | None,
    inputs: Mapping[str, Source] | None,
    branch: str | None,
    map: Map | None,
    loop: Loop | None,
    output: str | None,
) -> NodeSpec:
    """A node that runs ``flow`` as a sub-flow; its parameters are resolved when the parent compiles."""
    node_name = check_name(name if name is not None else flow.name, "sub-flow node name")
    if output is not None and output not in flow.nodes:
        raise UnknownNodeError(output, flow.nodes, role=f"sub-flow {flow.name!r} output")

    async def run_subflow(**kwargs: Any) -> Any:  # placeholder: the engine runs sub-flows itself
        raise RuntimeError("sub-flow nodes are run by the engine")

    router_, guard, map, loop = control_fields(node_name, _subflow_declared(flow, map, loop), None, branch, map, loop)
    return NodeSpec(
        name=node_name,
        func=run_subflow,
        params=(),
        is_async=True,
        thread=False,
        options=MappingProxyType({"inputs": dict(inputs or {})}),
        router=router_,
        branch=guard,
        map=map,
        loop=loop,
        flow=flow,
        output=output,
    )


def _subflow_declared(flow: Any, map: Map | None, loop: Loop | None) -> list[tuple[str, Any, Any]]:
    """The sub-flow's inputs as (name, default, annotation), for checking map/loop parameters."""
    try:
        names = list(flow.graph.inputs)
    except Exception:  # an unfinished sub-flow: the parent's compile reports its problem
        names = [x for x in (map.over if map else None, loop.feed if loop else None) if x]
    return [(n, MISSING, None) for n in names]
