"""Checking the resilience options of ``Flow(...)`` and ``@flow.node(...)`` where they are written.

Each check raises FlowDefinitionError naming the flow or node and the fix, so a typo fails in the
cell that declares it, not in the middle of a run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal

from nbflow._core.clock import Clock
from nbflow._core.errors import FlowDefinitionError, _suggest
from nbflow._dsl.limits import Limit
from nbflow._dsl.policies import Default, Retry
from nbflow._dsl.spec import NodeSpec, check_name

__all__ = ["check_timeout", "flow_clock", "flow_limits", "flow_retry", "node_options", "with_options"]

_STRATEGIES = ("fail", "continue")


EXECUTORS = ("thread", "process")


def check_executor(where: str, executor: object, is_async: bool, thread: bool | None) -> str | None:
    """The checked ``executor=`` of a node (None: the default, a thread for sync functions)."""
    if executor is None:
        return None
    if executor not in EXECUTORS:
        raise FlowDefinitionError(
            f"{where}: executor={executor!r}; give 'thread' (the default for sync functions) or 'process' "
            f"(a worker process: CPU-bound work runs on every core and an interrupt stops it)"
        )
    if executor == "process":
        if is_async:
            raise FlowDefinitionError(
                f"{where}: executor='process' is for sync functions; this one is async (it already runs "
                f"on the loop and stops when cancelled)"
            )
        if thread is False:
            raise FlowDefinitionError(
                f"{where}: thread=False runs the function inline; drop it to use executor='process'"
            )
        try:
            import cloudpickle  # noqa: F401
        except ImportError:
            raise FlowDefinitionError(
                f"{where}: executor='process' needs cloudpickle to send notebook functions to the worker; "
                f"pip install 'nbflow[process]'"
            ) from None
    return str(executor)


def is_dask_client(value: object) -> bool:
    """A ``distributed.Client`` (``executor=client``: the node's calls run on that Dask cluster)."""
    cls = type(value)
    return cls.__name__ == "Client" and cls.__module__.startswith("distributed")


def check_timeout(timeout: object, where: str) -> None:
    if timeout is None:
        return
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not math.isfinite(timeout) or timeout <= 0:
        raise FlowDefinitionError(f"{where}: timeout is in seconds, a positive number (or None), got {timeout!r}")


def _retry(value: object, where: str, allow_false: bool) -> Retry | Literal[False] | None:
    if value is None or isinstance(value, Retry):
        return value
    if value is False and allow_false:
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        return Retry(attempts=value)
    off = ", False (no retries)" if allow_false else ""
    raise FlowDefinitionError(
        f"{where}: retry={value!r}; give nf.Retry(attempts=..., backoff=...), a number of attempts{off} or None"
    )


def flow_retry(flow: str, value: object) -> Retry | None:
    out = _retry(value, f"flow {flow!r}", allow_false=False)
    assert out is not False
    return out


def flow_limits(flow: str, limits: Mapping[str, Limit] | None) -> dict[str, Limit]:
    if limits is None:
        return {}
    if not isinstance(limits, Mapping):
        raise FlowDefinitionError(
            f"flow {flow!r}: limits={limits!r}; give a dict of names to nf.Limit(...), e.g. "
            f'{{"llm": nf.Limit(max_concurrency=4)}}'
        )
    for key, limit in limits.items():
        if not isinstance(key, str) or not key:
            raise FlowDefinitionError(f"flow {flow!r}: limit names are non-empty strings, got {key!r}")
        if not isinstance(limit, Limit):
            raise FlowDefinitionError(f"flow {flow!r}: limits[{key!r}] is {limit!r}; give an nf.Limit(...)")
    return dict(limits)


def flow_clock(flow: str, clock: object) -> Clock:
    if not isinstance(clock, Clock):
        raise FlowDefinitionError(
            f"flow {flow!r}: clock={clock!r} is not a clock; give an object with monotonic() and "
            f"async sleep(seconds), e.g. nf.FakeClock() in tests"
        )
    return clock


def node_options(
    spec: NodeSpec,
    *,
    retry: object,
    timeout: object,
    on_error: object,
    on_failure_of: object,
    uses: object,
    limits: Mapping[str, Limit],
    cache: object = None,
    executor: object = None,
) -> dict[str, Any]:
    """The node's resilience options, checked; only the ones that differ from the defaults."""
    if (
        retry is None
        and timeout is None
        and on_failure_of is None
        and uses is None
        and cache is None
        and executor is None
        and type(on_error) is str
        and on_error == "fail"
    ):
        return {}  # every option at its default (most nodes): nothing to check
    where = f"node {spec.name!r}"
    options: dict[str, Any] = {}
    r = _retry(retry, where, allow_false=True)
    if r is not None:
        options["retry"] = r
    check_timeout(timeout, where)
    if timeout is not None:
        if not spec.is_async and not spec.thread:
            raise FlowDefinitionError(
                f"{where}: timeout= cannot interrupt a sync function running inline (thread=False); "
                f"let it run in a worker thread (drop thread=False) or make it async"
            )
        options["timeout"] = float(timeout)  # type: ignore[arg-type]
    if isinstance(on_error, str) and on_error in _STRATEGIES:
        if on_error != "fail":
            options["on_error"] = on_error
    elif isinstance(on_error, Default):
        options["on_error"] = on_error
    else:
        hint = _suggest(on_error, _STRATEGIES) if isinstance(on_error, str) else ""
        raise FlowDefinitionError(
            f"{where}: on_error={on_error!r}{hint}; give 'fail' (the default), 'continue', or nf.Default(value)"
        )
    if on_failure_of is not None:
        if not isinstance(on_failure_of, str):
            raise FlowDefinitionError(f"{where}: on_failure_of= takes the name of a node, got {on_failure_of!r}")
        options["on_failure_of"] = check_name(on_failure_of, f"{where}: on_failure_of")
    if uses is not None:
        names = (uses,) if isinstance(uses, str) else tuple(uses) if isinstance(uses, Iterable) else None
        if not names or not all(isinstance(u, str) for u in names):
            raise FlowDefinitionError(f"{where}: uses= takes a limit name or a list of them, got {uses!r}")
        for u in names:
            if u not in limits:
                raise FlowDefinitionError(
                    f"{where}: uses={u!r} names no limit of this flow{_suggest(u, limits)}; declare it with "
                    f"nf.Flow(..., limits={{{u!r}: nf.Limit(...)}}); known limits: "
                    f"{', '.join(sorted(limits)) or '(none)'}"
                )
        options["uses"] = tuple(dict.fromkeys(names))
    if cache is not None:
        if not isinstance(cache, bool) and cache != "per-sample":
            hint = _suggest(cache, ("per-sample",)) if isinstance(cache, str) else ""
            raise FlowDefinitionError(
                f"{where}: cache={cache!r}{hint}; give True (cache this node), False (never), 'per-sample' (not "
                f"deterministic: one entry per batch repeat, see repeats=) or None (the flow's default)"
            )
        if cache and spec.flow is not None:
            raise FlowDefinitionError(
                f"{where}: a sub-flow node is not cached as a whole; give the sub-flow itself a cache "
                f"(nf.Flow(..., cache=True)) and its nodes are cached inside it"
            )
        options["cache"] = cache
    if executor is not None:
        client = executor if is_dask_client(executor) else None
        if (executor == "process" or client is not None) and not spec.plain:
            raise FlowDefinitionError(
                f"{where}: executor={'client' if client is not None else repr('process')} is for plain sync "
                f"nodes, not routers, maps, loops or sub-flows; move the work into a plain node (or a sub-flow's node)"
            )
        if client is not None:  # a Dask cluster: the call is a task there (nbflow/_engine/executors.py)
            if spec.is_async:
                raise FlowDefinitionError(
                    f"{where}: executor=client (a Dask cluster) is for sync functions; this one is async"
                )
            options["dask_client"] = client
            executor = "process"  # out of the lean path and of threads, as a process node
        options["executor"] = check_executor(where, executor, spec.is_async, spec.thread)
    return options


def with_options(spec: NodeSpec, options: Mapping[str, Any]) -> NodeSpec:
    return dataclasses.replace(spec, options=MappingProxyType({**spec.options, **options}))
