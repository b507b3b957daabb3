"""Pickling a Flow sends its definition only: name, options, node specs and resource factories.

What a Flow holds besides its definition is bound to this process and is not sent: the compiled
graph and policies (rebuilt on first use), ``last_run`` / ``last_batch``, the registry entry used
to resume paused runs, and the checkpoint ``store``. Shared limits and caches travel as their
*configuration*: the receiving process gets fresh ones, so an ``nf.Limit`` bounds calls per
process, not across processes, and an in-memory cache starts empty there (a file cache opens the
same path). Node functions are pickled by the pickler in use: plain pickle sends module-level
functions by reference; cloudpickle (what nbflow uses for Dask) also sends functions defined in a
notebook, lambdas, closures and sub-flow nodes by value.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

from nbflow._core.registry import register_flow, registered
from nbflow._dsl.limits import Limit

__all__ = ["definition_of", "rebuild"]


def definition_of(flow: Any) -> dict[str, Any]:
    """What ``Flow.__reduce__`` sends: the definition, rebuilt on the other side by ``rebuild``."""
    limits = {name: _limit_config(limit) for name, limit in flow._limits.items()}
    cache = flow._cache
    cache_arg: Any = None if cache is None else (str(cache.path) if cache.path is not None else True)
    definition = {
        "name": flow.name,
        "validate": flow.validate,
        "concurrency": flow.concurrency,
        "retry": flow._retry,
        "limits": limits,
        "clock": flow._clock,
        "cache": cache_arg,
        # Node options are a read-only mappingproxy, which plain pickle refuses: send a dict.
        "specs": [dataclasses.replace(s, options=dict(s.options)) for s in flow._specs.values()],
        # Resources travel as their factories: the receiving process builds its own instances.
        "resources": list(flow._resources.values()),
    }
    return definition


def _limit_config(limit: Limit) -> dict[str, Any]:
    return {"max_concurrency": limit.max_concurrency, "rate": limit.rate, "burst": limit.burst, "clock": limit.clock}


def _fresh_limit(config: dict[str, Any]) -> Limit:
    rate = config["rate"]
    return Limit(
        config["max_concurrency"],
        per_second=rate,
        burst=config["burst"] if rate is not None else None,
        clock=config["clock"],
    )


def rebuild(cls: Any, definition: dict[str, Any]) -> Any:
    """A flow of class ``cls`` made from ``definition`` (what ``definition_of`` gave)."""
    name = definition["name"]
    # A copy unpickled in the process that holds the original must not take over its registry
    # entry (resuming a paused run by flow name finds the original).
    original = registered(name)
    flow = cls(
        name,
        validate=definition["validate"],
        concurrency=definition["concurrency"],
        retry=definition["retry"],
        limits={k: _fresh_limit(v) for k, v in definition["limits"].items()},
        clock=definition["clock"],
        cache=definition["cache"],
    )
    if original is not None:
        register_flow(original)
    flow._specs = {s.name: dataclasses.replace(s, options=MappingProxyType(s.options)) for s in definition["specs"]}
    flow._resources = {r.name: r for r in definition.get("resources", ())}
    flow._changed()
    return flow
