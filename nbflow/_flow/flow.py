"""``Flow`` and ``@flow.node``: declare nodes in any order, in any cell; run them three ways."""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from nbflow._core import present
from nbflow._core.clock import SYSTEM_CLOCK, Clock
from nbflow._core.config import config
from nbflow._core.errors import (
    RUN_OPTIONS,
    FlowDefinitionError,
    GraphError,
    NbflowError,
    RunnerError,
    StoreError,
    UnknownNodeError,
)
from nbflow._core.missing import MISSING
from nbflow._core.registry import register_flow
from nbflow._core.secrets import learn_inputs
from nbflow._core.states import RunStatus
from nbflow._dsl import options as _options
from nbflow._dsl.control import Loop, Map, Router
from nbflow._dsl.limits import Limit
from nbflow._dsl.policies import OnError, Retry
from nbflow._dsl.resource import ResourceSpec, make_resource_spec
from nbflow._dsl.spec import NodeSpec, Source, make_spec, make_subflow_spec
from nbflow._flow import pickling
from nbflow._flow.renames import note_declared
from nbflow._graph.graph import Graph, InputInfo, Plan, compile_graph, recompile, validate_inputs
from nbflow._graph.policies import FlowPolicies, build_policies, update_policies
from nbflow._graph.validate import build_pending, pending
from nbflow._show.draw import mimebundle, text_graph, to_dot

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable

    from nbflow._batch import api as _batch
    from nbflow._batch import paused as _paused
    from nbflow._engine import capture as capture
    from nbflow._engine import logs as logs
    from nbflow._engine import scheduler as scheduler
    from nbflow._engine.executors import warm_pool as warm_pool
    from nbflow._engine.keep import attach_keep, check_keep
    from nbflow._engine.kernel import RunHandle, in_kernel, kernel_ticker, run_blocking
    from nbflow._flow import expiry
    from nbflow._flow.resume import claim, continue_run
    from nbflow._record.run import Run, Subscriber
    from nbflow._store.node_cache import NodeCache

__all__ = ["Flow"]

F = TypeVar("F", bound=Callable[..., Any])

# Batches, stores, caches on disk, saved outputs and the notebook view are imported where a flow first
# uses them, not by `nf.Flow`: defining a flow stays light (tests/test_import_cost.py pins it).
# So is the engine (asyncio, anyio, the scheduler, events, run records): `_load_engine` imports it at the
# first run (`run`/`arun`/`start`/a batch row/a resume) and binds its names as this module's globals, so
# later runs look them up like any import, with no per-call import.
_engine_loaded = False


def _load_engine() -> None:
    global _engine_loaded, asyncio, scheduler, attach_keep, check_keep, RunHandle, in_kernel, kernel_ticker
    global run_blocking, expiry, claim, continue_run, Run, capture, logs, warm_pool
    import asyncio

    from nbflow._engine import capture, logs, scheduler
    from nbflow._engine.executors import warm_pool
    from nbflow._engine.keep import attach_keep, check_keep
    from nbflow._engine.kernel import RunHandle, in_kernel, kernel_ticker, run_blocking
    from nbflow._flow import expiry
    from nbflow._flow.resume import claim, continue_run
    from nbflow._record.run import Run

    _engine_loaded = True


def _load_notebook() -> None:
    import nbflow._notebook  # noqa: F401  (installs the presenter records display with)


present.set_loader(_load_notebook)  # a script's run imports the notebook layer only when displayed


class _Elsewhere:
    """A method of Flow defined in another module, imported on first access, then set on the class."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __set_name__(self, owner: type, attr: str) -> None:
        self.owner, self.attr = owner, attr

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        fn = getattr(importlib.import_module(self.module), self.name)
        setattr(self.owner, self.attr, fn)  # later look-ups are plain methods
        return fn if obj is None else fn.__get__(obj, owner)


def _auto_show(run: Run, handle: RunHandle | None, show: Any) -> None:
    if not show and not in_kernel():  # a script's run shows nothing unless asked: not even an import
        return
    from nbflow._notebook import auto_show

    auto_show(run, handle, show)


def _load_run(store: Any, run_id: str) -> Run:
    from nbflow._store.checkpoint import load_run

    return load_run(store, run_id)


def _open_cache(value: object, flow: str) -> NodeCache | None:
    """``Flow(cache=...)``: None/False is off (the one place that says so), anything else is opened."""
    if value is None or value is False:
        return None
    from nbflow._store.node_cache import open_cache

    return open_cache(value, flow)


class Flow:
    """A named set of nodes wired by parameter names.

    ``validate`` turns pydantic checking of inputs and outputs against type hints on or off;
    ``concurrency`` caps how many nodes run at once (default: no cap). ``retry`` is the default
    retry policy of every node (``nf.Retry(...)`` or a number of attempts; a node's own ``retry=``
    wins); ``limits`` names shared limits (``{"llm": nf.Limit(max_concurrency=4)}``) that nodes
    take with ``uses=``; ``clock`` is what retry delays sleep on (``nf.FakeClock()`` in tests).
    See docs/resilience.md.

    ``cache=True`` caches every node's result in memory (``cache="cache.db"``: in a SQLite file
    you trust; ``@flow.node(cache=False)`` opts a node out): a node whose code and inputs did not
    change is not run again. See docs/caching.md.

    ``executor="process"`` runs every plain sync node (declared after, without ``executor=`` or
    ``thread=False``) in a worker process: CPU-bound work uses every core and an interrupt stops it.
    See docs/data_pipelines.md.
    """

    def __init__(
        self,
        name: str = "flow",
        *,
        validate: bool = True,
        concurrency: int | None = None,
        retry: Retry | int | None = None,
        limits: Mapping[str, Limit] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        store: Any = None,
        cache: bool | str | os.PathLike[str] | NodeCache | None = None,
        executor: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise FlowDefinitionError(f"a flow needs a non-empty name, got {name!r}")
        _check_concurrency(concurrency)
        _check_store(store, f"flow {name!r}")
        self.name = name
        self.validate = validate
        self.concurrency = concurrency
        self.store = store
        """Default checkpoint store (a SQLite path) for this flow's runs; ``store=`` per call overrides."""
        self._retry = _options.flow_retry(name, retry)
        self._limits = _options.flow_limits(name, limits)
        self._clock = _options.flow_clock(name, clock)
        self._cache = _open_cache(cache, name)
        self.executor = _options.check_executor(f"flow {name!r}", executor, False, None)
        """Where sync nodes declared without ``executor=`` run: None/'thread' (a worker thread) or 'process'."""
        self._node_cache: NodeCache | None = None  # for cache=True nodes while the flow's cache is off
        self._specs: dict[str, NodeSpec] = {}
        self._resources: dict[str, ResourceSpec] = {}
        self._graph: Graph | None = None
        self._graph_stamp: tuple[Any, ...] = ()
        # The nodes declared again (same name) since the graph was compiled, in order; None: another change.
        # With the last graph, what `graph` recompiles incrementally (a cell redefining a node of a big flow).
        self._redeclared: list[str] | None = None
        self._compiled: tuple[Graph, FlowPolicies, bool] | None = None  # (graph, its policies, validate)
        self._subflows: tuple[int, tuple[Flow, ...]] | None = None  # (version, the sub-flows): _stamp
        self._saving: dict[str, Any] = {}  # save= of each node, by node (made with the graph)
        self._version = 0
        self._policies: FlowPolicies | None = None
        register_flow(self)
        self.last_run: Run | None = None
        self.last_batch: Any = None  # the DataFrame of the latest batch (also a partial one after a stop)

    # --- flow-wide policies (changing one recompiles the flow) -----------------------------------
    @property
    def retry(self) -> Retry | None:
        """The default retry policy of nodes that set none (None: no retries)."""
        return self._retry

    @retry.setter
    def retry(self, value: Retry | int | None) -> None:
        self._retry = _options.flow_retry(self.name, value)
        self._graph = self._redeclared = None

    @property
    def limits(self) -> Mapping[str, Limit]:
        """The named shared limits nodes can take with ``uses=`` (read-only; set a new dict to change)."""
        return MappingProxyType(self._limits)

    @limits.setter
    def limits(self, value: Mapping[str, Limit] | None) -> None:
        self._limits = _options.flow_limits(self.name, value)
        self._graph = self._redeclared = None

    @property
    def clock(self) -> Clock:
        """The clock retry delays sleep on."""
        return self._clock

    @clock.setter
    def clock(self, value: Clock) -> None:
        self._clock = _options.flow_clock(self.name, value)
        self._graph = self._redeclared = None

    @property
    def cache(self) -> NodeCache | None:
        """Where node results are cached (None: off unless a node says ``cache=True``).

        Set ``True``, a SQLite path, an ``nf.NodeCache`` or ``False``; see docs/caching.md.
        """
        return self._cache

    @cache.setter
    def cache(self, value: bool | str | os.PathLike[str] | NodeCache | None) -> None:
        self._cache = _open_cache(value, self.name)
        self._graph = self._redeclared = None

    def clear_cache(self, *nodes: str) -> int:
        """Forget this flow's cached results (of ``nodes`` only, if given); returns how many.

        A cleared node runs again next time, and so does everything downstream of it.
        """
        for n in nodes:
            if n not in self._specs:
                raise UnknownNodeError(n, self._specs)
        return sum(c.clear(self.name, nodes) for c in (self._cache, self._node_cache) if c is not None)

    # --- declaring -----------------------------------------------------------------------------
    @overload
    def node(self, func: F, /) -> F: ...
    @overload
    def node(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        inputs: Mapping[str, Source] | None = None,
        thread: bool | None = None,
        branch: str | None = None,
        map: Map | None = None,
        loop: Loop | None = None,
        retry: Retry | int | bool | None = None,
        timeout: float | None = None,
        on_error: OnError = "fail",
        on_failure_of: str | None = None,
        uses: str | Iterable[str] | None = None,
        cache: bool | str | None = None,
        executor: str | Any = None,
        save: str | os.PathLike[str] | None = None,
        outputs: Iterable[str] | None = None,
    ) -> Callable[[F], F]: ...

    def node(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        inputs: Mapping[str, Source] | None = None,
        thread: bool | None = None,
        branch: str | None = None,
        map: Map | None = None,
        loop: Loop | None = None,
        router: Router | None = None,
        retry: Retry | int | bool | None = None,
        timeout: float | None = None,
        on_error: OnError = "fail",
        on_failure_of: str | None = None,
        uses: str | Iterable[str] | None = None,
        cache: bool | str | None = None,
        executor: str | Any = None,
        save: str | os.PathLike[str] | None = None,
        outputs: Iterable[str] | None = None,
    ) -> Any:
        """Declare ``func`` as a node and return it unchanged (still callable on its own).

        A parameter named after another node is fed by that node's output; any other parameter is
        a flow input. ``inputs={"param": "source"}`` feeds a parameter from another node or input
        (``nf.first_of(...)`` merges, ``nf.optional(...)`` tolerates a missing upstream). Sync
        functions run in a worker thread unless ``thread=False``. ``branch="router.name"`` runs the
        node only when that router takes that branch. Declaring a node whose name exists replaces
        it (re-running a notebook cell does exactly that).

        Resilience (docs/resilience.md): ``retry=nf.Retry(...)`` (or a number of attempts; False:
        none, even if the flow has a default); ``timeout=`` seconds per attempt; ``on_error=``
        ``"fail"``, ``"continue"`` or ``nf.Default(value)``; ``on_failure_of="node"`` makes this
        node that node's failure handler (the parameter named after it receives an
        ``nf.ErrorInfo``); ``uses="llm"`` (or a list) takes the flow's named limits per attempt.

        ``cache=False`` never caches this node (non-deterministic or side effects); ``cache=True``
        caches it even when the flow's cache is off (then in memory); ``cache="per-sample"`` marks it
        not deterministic: cached once per repeat of ``flow.batch(..., repeats=N)``. See docs/caching.md.

        ``executor=client`` (a ``distributed.Client``) runs each call of a sync function as a task on that
        Dask cluster (a worker lost mid-call is replaced and the task runs again; a cancel or ``timeout=``
        cancels it; docs/dask.md). ``executor="process"`` runs a sync function in a worker process (cloudpickle sends notebook
        functions): CPU-bound work uses every core, and an interrupt, cancel or timeout kills it.
        ``save="out/features.parquet"`` writes the output of every run to that file (docs/data_pipelines.md).
        See docs/data_pipelines.md.
        """

        if (  # `@flow.node` with nothing set (most nodes): add()'s path, without passing 16 defaults twice
            func is not None
            and name is None
            and inputs is None
            and thread is None
            and branch is None
            and map is None
            and loop is None
            and router is None
            and retry is None
            and timeout is None
            and type(on_error) is str
            and on_error == "fail"
            and on_failure_of is None
            and uses is None
            and cache is None
            and executor is None
            and save is None
            and outputs is None
        ):
            self._add_plain(func)
            return func
        register = self._register(
            name=name,
            inputs=inputs,
            thread=thread,
            branch=branch,
            map=map,
            loop=loop,
            router=router,
            retry=retry,
            timeout=timeout,
            on_error=on_error,
            on_failure_of=on_failure_of,
            uses=uses,
            cache=cache,
            executor=executor,
            save=save,
            outputs=outputs,
        )
        return register(func) if func is not None else register

    def _register(self, **options: Any) -> Callable[[F], F]:
        def register(f: F) -> F:
            self.add(f, **options)
            return f

        return register

    def router(
        self, func: Callable[..., Any] | None = None, /, *, branches: Iterable[str] | None = None, **kw: Any
    ) -> Any:
        """Declare a router: a node returning the name of the branch to take (or a list of names).

        Nodes declared with ``branch="<router>.<name>"`` run only when their branch is taken; the
        others are SKIPPED ("branch 'name' of 'router' not taken"), and so is everything that
        depends only on them. ``branches`` lists the valid names (default: the names used).
        """
        spec = Router(tuple(branches) if branches is not None else None)
        register = self._register(router=spec, **kw)
        return register(func) if func is not None else register

    def map(
        self, over: str, *, concurrency: int | None = None, errors: str = "terminate", **kw: Any
    ) -> Callable[[F], F]:
        """Declare a node that runs once per item of its parameter ``over`` (a list).

        Items run concurrently (up to ``concurrency``); the output is the list of results in input
        order. ``errors``: ``"terminate"``, ``"continue"`` (``nf.ItemFailed`` in the failed slots)
        or ``"drop"``. Each item's status, error and duration are in ``run.nodes[name].items``.
        """
        return self._register(map=Map(over, concurrency, errors), **kw)  # type: ignore[arg-type]

    def loop(
        self,
        feed: str,
        *,
        until: Callable[[Any], bool] | None = None,
        max_iterations: int = 10,
        on_max: str = "return",
        **kw: Any,
    ) -> Callable[[F], F]:
        """Declare a node run repeatedly, each output fed back into parameter ``feed``.

        Stops when ``until(output)`` is true or after ``max_iterations`` (then returns the last
        output, or fails with ``LoopLimitError`` when ``on_max="fail"``). Every iteration is in
        ``run.nodes[name].iterations``.
        """
        return self._register(loop=Loop(feed, until, max_iterations, on_max), **kw)  # type: ignore[arg-type]

    def add(
        self,
        func: Callable[..., Any] | Flow,
        *,
        name: str | None = None,
        inputs: Mapping[str, Source] | None = None,
        thread: bool | None = None,
        branch: str | None = None,
        map: Map | None = None,
        loop: Loop | None = None,
        router: Router | None = None,
        output: str | None = None,
        retry: Retry | int | bool | None = None,
        timeout: float | None = None,
        on_error: OnError = "fail",
        on_failure_of: str | None = None,
        uses: str | Iterable[str] | None = None,
        cache: bool | str | None = None,
        executor: str | Any = None,
        save: str | os.PathLike[str] | None = None,
        outputs: Iterable[str] | None = None,
    ) -> NodeSpec:
        """Declare a node without decorating (same rules as ``@flow.node``); returns its spec.

        ``func`` may be another Flow: it then runs as a sub-flow node whose parameters are its
        inputs (rewire them with ``inputs=``) and whose output is its node ``output`` (default: a
        dict of its leaf nodes' outputs).
        """
        if isinstance(func, Flow):
            if func is self:
                raise FlowDefinitionError(f"flow {self.name!r} cannot contain itself as a sub-flow")
            path = func._subflow_path_to(self)
            if path is not None:
                from nbflow._core.errors import CycleError

                err = CycleError([self.name, *path])
                err.args = (
                    f"sub-flows form a cycle: {' -> '.join(err.cycle)}; a flow cannot run inside a flow it "
                    f"contains. Remove one of these sub-flow nodes",
                )
                raise err
            spec = make_subflow_spec(func, name=name, inputs=inputs, branch=branch, map=map, loop=loop, output=output)
        else:
            if output is not None:
                raise FlowDefinitionError(f"node {name or func!r}: output= is for sub-flows only")
            spec = make_spec(
                func, name=name, inputs=inputs, thread=thread, router=router, branch=branch, map=map, loop=loop
            )
        options = _options.node_options(
            spec,
            retry=retry,
            timeout=timeout,
            on_error=on_error,
            on_failure_of=on_failure_of,
            uses=uses,
            limits=self._limits,
            cache=cache,
            executor=executor if executor is not None else _flow_executor(self.executor, spec, thread),
        )
        if save is not None:
            from nbflow._store.outputs import check_save

            options["save"] = check_save(f"node {spec.name!r}", {spec.name: save})[spec.name]
        if options:
            spec = _options.with_options(spec, options)
        self._put(spec, func, options, outputs)
        return spec

    def _add_plain(self, func: Callable[..., Any] | Flow) -> None:
        """``add(func)`` with every option at its default."""
        if isinstance(func, Flow) or (self.executor is not None and self.executor != "thread"):
            self.add(func)  # a sub-flow; a flow-wide executor= (each node's own option, see add)
            return
        spec = make_spec(func)
        self._put(spec, func, spec.options, None)

    def _put(
        self, spec: NodeSpec, func: Callable[..., Any] | Flow, options: Mapping[str, Any], outputs: Iterable[str] | None
    ) -> None:
        """Record the declared ``spec`` (replacing a node of its name) and what it asks for."""
        again = self._specs.pop(spec.name, None) is not None  # a redefinition moves to the end, like a cell re-run
        self._specs[spec.name] = spec
        if options and options.get("executor") == "process" and "dask_client" not in options:
            self._warm_workers()
        if not isinstance(func, Flow):
            note_declared(self, spec, func)  # a cell re-run with the function renamed: warn (renames.py)
        if outputs is not None:
            self._add_fields(spec, outputs)
        self._changed(spec.name if again and outputs is None else None)

    def _warm_workers(self) -> None:
        """A process node was defined: its worker starts now, in the background (its start and imports take
        seconds), so the first run finds it warm. The engine is imported there too: the cell is not held."""
        import threading

        funcs = [
            s.func
            for s in self._specs.values()
            if s.options.get("executor") == "process" and "dask_client" not in s.options
        ]
        threading.Thread(target=_warm_defined, args=(funcs,), name="nbflow-warm-workers", daemon=True).start()

    # --- resources (long-lived objects: SDK clients, pools) -------------------------------------
    @overload
    def resource(self, func: F, /) -> F: ...
    @overload
    def resource(self, func: None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...

    def resource(self, func: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
        """Declare a resource: a long-lived object (an SDK client, a pool) that nodes receive by parameter name.

        The factory may be a function, an ``async def``, or a (async) generator whose code after
        ``yield`` closes the resource. It is called lazily, once per event loop that runs a node
        needing it, and the instance is shared by every run and batch row on that loop; it is closed
        (``aclose()``/``close()``/``__aexit__``, or the generator's teardown) when that loop ends, on
        ``flow.close()``, when the resource is redefined, and at interpreter exit. Its parameters
        name other resources or flow inputs, never nodes. Resources are never validated, cached,
        stored, pickled or shown; Dask workers build their own. See docs/resources.md.
        """

        def register(f: F) -> F:
            spec = make_resource_spec(f, name)
            old = self._resources.pop(spec.name, None)
            self._resources[spec.name] = spec
            self._changed()
            if old is not None:  # re-running the cell: the old instances must not linger
                from nbflow._engine.resources import close_specs

                close_specs([old])
            return f

        return register(func) if func is not None else register

    @property
    def resources(self) -> Mapping[str, ResourceSpec]:
        """The declared resources, by name (read-only)."""
        return MappingProxyType(self._resources)

    def close(self) -> None:
        """Close every instance of this flow's resources, on every loop; the next run builds new ones.

        Called from a notebook cell, instances on the kernel's own loop close right after the cell
        (the loop is busy running it); ``await flow.aclose()`` waits for them.
        """
        from nbflow._engine.resources import close_specs

        close_specs(self._resources.values())

    async def aclose(self) -> None:
        """Close every instance of this flow's resources and wait, also those on the running loop."""
        from nbflow._engine.resources import close_specs

        pending = close_specs(self._resources.values())
        if pending is not None:
            await pending

    def _subflow_path_to(self, target: Flow, seen: set[int] | None = None) -> list[str] | None:
        """Flow names from this flow down to ``target`` through sub-flow nodes (None: not reachable)."""
        seen = set() if seen is None else seen
        if id(self) in seen:
            return None
        seen.add(id(self))
        for spec in self._specs.values():
            sub = spec.flow
            if sub is None:
                continue
            if sub is target:
                return [self.name, target.name]
            below = sub._subflow_path_to(target, seen)
            if below is not None:
                return [self.name, *below]
        return None

    def _add_fields(self, spec: NodeSpec, outputs: Iterable[str] | str) -> None:
        """``outputs=("X_train", "X_test")``: one node per named field of ``spec``'s output, wired by name.

        A field is a key of a returned dict, an attribute of a dataclass/object, or (a tuple or list)
        the item at the name's position. Each field node is a cheap inline pick.
        """
        names = [outputs] if isinstance(outputs, str) else list(outputs)
        if not names or len(set(names)) != len(names):
            raise FlowDefinitionError(
                f"node {spec.name!r}: outputs= takes distinct field names, e.g. outputs=('X_train', 'X_test'); got {names!r}"
            )
        for position, field in enumerate(names):
            clash = self._specs.get(field)
            if clash is not None and clash.options.get("field_of") != spec.name:
                raise FlowDefinitionError(
                    f"node {spec.name!r}: outputs= names {field!r}, which is already a node of flow {self.name!r}; "
                    f"rename the field or that node"
                )
            pick = make_spec(
                _field_picker(spec.name, field, position),
                name=field,
                inputs={"value": spec.name},
                thread=False,
            )
            pick = _options.with_options(pick, {"field_of": spec.name})
            self._specs.pop(field, None)
            self._specs[field] = pick

    def remove(self, name: str) -> None:
        """Remove the node ``name``."""
        if name not in self._specs:
            raise UnknownNodeError(name, self._specs)
        del self._specs[name]
        self._changed()

    def _changed(self, redeclared: str | None = None) -> None:
        """Something changed: the graph compiles again (incrementally if only ``redeclared`` nodes did)."""
        self._version += 1
        self._graph = None
        if redeclared is None or self._redeclared is None:
            self._redeclared = None
        else:
            self._redeclared.append(redeclared)

    def _stamp(self) -> tuple[Any, ...]:
        """Changes whenever this flow or any sub-flow in it changes (sub-flows are edited too)."""
        subs = self._subflows  # (per run: not a walk over every node)
        if subs is None or subs[0] != self._version:
            subs = self._subflows = (self._version, tuple(s.flow for s in self._specs.values() if s.flow is not None))
        return (self._version, *(f._stamp() for f in subs[1])) if subs[1] else (self._version,)

    @property
    def nodes(self) -> Mapping[str, NodeSpec]:
        """The declared nodes, by name, in definition order (read-only)."""
        return MappingProxyType(self._specs)

    @property
    def graph(self) -> Graph:
        """The validated graph (compiled once per change); raises CycleError etc."""
        stamp = self._stamp()
        if self._graph is None or self._graph_stamp != stamp:
            graph = self._recompile(stamp)
            if graph is None:
                graph = compile_graph(self.name, self._specs, validate=self.validate, resources=self._resources)
                optioned = [(n, s.options) for n, s in self._specs.items() if s.options]  # (most nodes: none)
                policies = build_policies(graph, self._retry, self._limits, self._clock)
                self._policies = self._with_cache(graph, policies, any(o.get("cache") for _, o in optioned))
                self._saving = {n: o["save"] for n, o in optioned if "save" in o}
            assert self._policies is not None
            self._graph = graph
            self._graph_stamp = stamp
            self._redeclared = []
            self._compiled = (graph, self._policies, self.validate)
        return self._graph

    def _recompile(self, stamp: tuple[Any, ...]) -> Graph | None:
        """The graph made again from the last one when only nodes were declared again (None: compile in full)."""
        redeclared, compiled = self._redeclared, self._compiled
        if not redeclared or compiled is None or len(stamp) > 1 or compiled[2] != self.validate:
            return None  # another change, never compiled, sub-flows (their own edits), validate= switched
        old, policies, _ = compiled
        if policies.cache is not None or any(self._specs[n].options.get("cache") for n in redeclared):
            return None  # node caching: its plan is made from the whole graph
        graph = recompile(old, self._specs, redeclared, self.validate)
        if graph is None:
            return None
        self._policies = update_policies(policies, graph, redeclared, self._retry, self._limits, self._clock)
        for n in redeclared:
            save = self._specs[n].options.get("save")
            if save is not None:
                self._saving = {**self._saving, n: save}
            elif n in self._saving:
                self._saving = {k: v for k, v in self._saving.items() if k != n}
        return graph

    def _with_cache(self, graph: Graph, policies: FlowPolicies, node_asks: bool) -> FlowPolicies:
        """``policies`` with the node cache's plan (``node_asks``: some node says ``cache=``)."""
        default = self._cache is not None
        if not default and not node_asks:
            return policies  # no caching: the policies (and the engine's fast path) are untouched
        backend = self._cache
        if backend is None:
            from nbflow._store.node_cache import NodeCache

            backend = self._node_cache = self._node_cache or NodeCache()
        from nbflow._engine.caching import plan_cache

        plan = plan_cache(graph, backend, default, self.validate)
        return policies if plan is None else dataclasses.replace(policies, cache=plan)

    def _resolved_policies(self) -> FlowPolicies:
        """Every node's resolved policy (retry, timeout, on_error, limits) and the failure handlers."""
        self.graph  # noqa: B018  (compiles, and resolves the policies with it)
        assert self._policies is not None
        return self._policies

    @property
    def inputs(self) -> Mapping[str, InputInfo]:
        """The flow's inputs: parameters that no node feeds."""
        return self.graph.inputs

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    # --- running -------------------------------------------------------------------------------
    def _prepare(
        self,
        inputs: Mapping[str, Any] | None,
        kw: Mapping[str, Any],
        targets: Iterable[str] | str | None,
        overrides: Mapping[str, Any] | None,
        on_event: Subscriber | None,
        store: Any = None,
        keep: Iterable[str] | str | None = None,
        save: Mapping[str, Any] | None = None,
        trace: Any = None,
    ) -> tuple[Graph, Plan, Run, dict[str, Any], dict[str, Any]]:
        if not _engine_loaded:
            _load_engine()
        merged = dict(inputs or {})
        merged.update(kw)
        overrides = dict(overrides or {})
        if isinstance(targets, str):
            targets = [targets]
        elif targets is not None:
            targets = list(targets)
            if not targets:
                raise FlowDefinitionError(
                    f"flow {self.name!r}: targets=[] selects no node, so nothing would run; name the nodes "
                    f"to compute, or leave targets= out to run them all"
                )
        if on_event is not None and not callable(on_event):
            raise FlowDefinitionError(
                f"flow {self.name!r}: on_event= is called with each event (a function), got {on_event!r}"
            )
        _check_store(store, f"flow {self.name!r}")
        graph = self.graph
        learn_inputs(merged)  # its secrets (and the environment's) are redacted at every sink from now on
        plan = graph.plan(merged, targets, overrides)
        validate_inputs(graph, plan, merged)
        kept = check_keep(graph, keep) if keep is not None else None
        saving = self._saving  # (made with the graph above)
        if save is not None:
            from nbflow._store.outputs import check_save

            saving = {**saving, **check_save(f"flow {self.name!r}", save, graph.nodes)}  # (not the graph's own)
        run = Run(self.name, os.urandom(6).hex(), merged, plan.nodes)  # as uuid4().hex[:12]
        run.graph = graph
        run._flow = self
        run.targets = tuple(targets) if targets is not None else None
        if on_event is not None:
            run.subscribe(on_event)
        logs.attach(run)  # only when nbflow's INFO records are wanted (docs/logging.md)
        if saving:  # before keep=: an output is written before it may be dropped
            from nbflow._store.outputs import attach_save

            attach_save(run, saving)
        if kept is not None:
            attach_keep(run, graph, kept)
        if trace is not None or config.trace is not None:  # off: not even an import (docs/tracing.md)
            from nbflow.otel import attach

            attach(run, trace, where=f"flow {self.name!r}: trace=")
        store = store if store is not None else self.store
        if store is not None:
            from nbflow._store.checkpoint import open_store

            open_store(store).track(run)
        self.last_run = run
        return graph, plan, run, merged, overrides

    async def _execute(
        self,
        graph: Graph,
        plan: Plan,
        run: Run,
        inputs: dict[str, Any],
        overrides: dict[str, Any],
        concurrency: int | None,
        timeout: float | None = None,
        tick: bool = True,
    ) -> Run:
        if not _engine_loaded:  # a batch row or a resume may come here first
            _load_engine()
        if pending():  # the type checks' pydantic adapters, before any node's timeout= starts
            build_pending()
        cap = concurrency if concurrency is not None else self.concurrency
        # The graph this run was planned on is still the flow's: its policies are current (a batch's
        # rows skip re-checking the flow and its sub-flows for changes, once per row).
        policies = self._policies if graph is self._graph and self._policies is not None else self._resolved_policies()
        run._resources = None  # resolved again on this loop (a resumed run may run on another one)
        # A batch wakes the loop itself (tick=False), once for all its rows.
        ticker = asyncio.get_running_loop().create_task(kernel_ticker()) if tick and in_kernel() else None
        capture.install()  # what nodes print, log and warn goes to their attempts too
        warm_pool(graph, len(plan.nodes))  # process nodes: their workers start now, their imports done
        try:
            await scheduler.execute(graph, plan, run, inputs, overrides, cap, policies, timeout)
        finally:
            run._resources = None  # a finished run keeps no resource alive
            if ticker is not None:
                ticker.cancel()
        if tick:
            logs.finished(run)  # a failed run's WARNING records (when no RunLogger wrote them live)
        if run.store is not None:
            try:
                run.store.raise_failure(run)  # a checkpoint write failed: the run is FAILED, StoreError raised
            except StoreError as exc:
                logs.STORE.warning("run %s of flow %r: %s", run.run_id, self.name, exc)
                raise
        if tick:  # not a batch row (the batch answers its paused rows itself: flow.answer)
            expiry.arm(run)  # nf.ask(timeout=): the paused run goes on by itself at the deadline
        return run

    def _lineage_of(self, run: Run) -> dict[str, Any]:
        """``run.lineage()``'s data (nbflow._engine.lineage): code and data versions, inputs with defaults."""
        from nbflow._engine.lineage import lineage_of

        return lineage_of(run)

    def _row_executor(self, graph: Graph) -> Callable[..., Awaitable[Run]]:
        """``_execute(..., tick=False)`` for a batch's rows, with what every row shares resolved once.

        Called as ``execute_row(plan, run, inputs)``, or with the stored outputs a resumed row is fed as a
        fourth argument (overrides: ``nbflow/_batch/reuse.py``).

        The batch checked its options and planned every row up front (``_begin``'s checks are per
        call, not per row), so per row only the run itself is left: the flow's policies and
        concurrency are those of ``graph`` when the batch starts, the rows' runs are fresh (no
        resources to reset before), and the batch wakes the loop itself.
        """
        if not _engine_loaded:  # a batch may be the flow's first run
            _load_engine()
        if pending():  # the type checks' pydantic adapters, before any row's node starts
            build_pending()
        capture.install()
        policies = self._policies if graph is self._graph and self._policies is not None else self._resolved_policies()
        cap = self.concurrency
        execute = scheduler.execute
        no_overrides: dict[str, Any] = {}

        if not any(g.resources for g in graph.nodes.values()):
            # Nothing for a row's run to let go of (a row's run has no store: the batch stores it), so
            # the row awaits ``execute`` itself: no coroutine of its own between the row and its nodes.
            def plain_row(
                plan: Plan, run: Run, inputs: dict[str, Any], overrides: dict[str, Any] = no_overrides
            ) -> Awaitable[Run]:
                return execute(graph, plan, run, inputs, overrides, cap, policies)

            return plain_row

        async def row(plan: Plan, run: Run, inputs: dict[str, Any], overrides: dict[str, Any] = no_overrides) -> Run:
            try:
                await execute(graph, plan, run, inputs, overrides, cap, policies)
            finally:
                run._resources = None  # a finished run keeps no resource alive
            return run

        return row

    async def _execute_child(
        self,
        parent: Run,
        path: str,
        inputs: dict[str, Any],
        previous: Run | None,
        forward: Subscriber | None,
        attach: Callable[[Run], None] | None = None,
    ) -> Run:
        """Run this flow as the sub-flow node ``path`` of ``parent``; ``previous`` is a paused sub-run to go on.

        The one way a sub-flow runs, first time or resumed: the same plan, policies (retry, timeout,
        limits, failure handlers) and cache as its own runs. ``attach(child)`` is called before any
        of its nodes starts, so the parent's record holds the sub-run while it runs, and keeps it
        (finished inner nodes included) when it is cancelled or times out.
        """
        if not _engine_loaded:
            _load_engine()
        graph = self.graph
        if previous is not None:
            child, inputs = previous, dict(previous.inputs)
            plan = graph.plan(inputs)
        else:
            plan = graph.plan(inputs)
            validate_inputs(graph, plan, inputs)
            child = Run(self.name, f"{parent.run_id}/{path}", inputs, plan.nodes)
            child.graph = graph
            child._root = parent._root
            child._path = f"{parent._path}{path}."
            if forward is not None:
                child.subscribe(forward)
        if attach is not None:
            attach(child)
        if pending():
            build_pending()
        child._resources = None  # resolved on this loop (a resumed sub-flow may have run on another one)
        try:
            await scheduler.execute(graph, plan, child, inputs, {}, self.concurrency, self._resolved_policies())
        finally:
            child._resources = None  # a finished sub-flow run keeps no resource alive
        return child

    async def arun(
        self,
        inputs: Mapping[str, Any] | None = None,
        /,
        *,
        targets: Iterable[str] | str | None = None,
        overrides: Mapping[str, Any] | None = None,
        concurrency: int | None = None,
        on_event: Subscriber | None = None,
        store: Any = None,
        timeout: float | None = None,
        show: bool | None = None,
        keep: Iterable[str] | str | None = None,
        save: Mapping[str, Any] | None = None,
        trace: Any = None,
        **kw: Any,
    ) -> Run:
        """Run the flow on the current event loop and return its Run record.

        Flow inputs are keyword arguments (or a dict as the first argument, for inputs whose names
        clash with the options). ``targets`` runs only what those nodes need; ``overrides`` injects
        node outputs without running them. Node failures are recorded, not raised: check
        ``run.status`` or call ``run.raise_for_status()``.

        ``timeout`` is the run's deadline in seconds: past it, the nodes still going are cancelled
        and the run is returned CANCELLED with ``run.reason`` saying so (finished outputs kept).
        Cancelling the caller still raises ``CancelledError``.

        In a notebook the live run view is displayed unless ``show=False`` (or ``nbflow.config.show =
        False``); elsewhere ``show=True`` prints a compact text progress to stderr.

        ``trace`` sends the run's spans to OpenTelemetry: ``"otel"`` (the global tracer provider), a
        TracerProvider, or False (off for this call); default ``nbflow.config.trace``. See docs/tracing.md.
        """
        graph, plan, run, merged, overrides = self._begin(
            "arun", inputs, kw, targets, overrides, concurrency, on_event, store, timeout, show, keep, save, trace
        )
        _auto_show(run, None, show)
        return await self._execute(graph, plan, run, merged, overrides, concurrency, timeout)

    def run(
        self,
        inputs: Mapping[str, Any] | None = None,
        /,
        *,
        targets: Iterable[str] | str | None = None,
        overrides: Mapping[str, Any] | None = None,
        concurrency: int | None = None,
        on_event: Subscriber | None = None,
        store: Any = None,
        timeout: float | None = None,
        show: bool | None = None,
        keep: Iterable[str] | str | None = None,
        save: Mapping[str, Any] | None = None,
        trace: Any = None,
        **kw: Any,
    ) -> Run:
        """Run the flow and block until it ends; works in a script and in a notebook cell.

        In a notebook the flow runs on a worker thread's loop (the kernel's loop is busy running the
        cell); interrupting the kernel cancels it and raises RunInterrupted, whose ``.run`` holds
        every finished output. ``timeout`` (the run's deadline), ``show`` (the live view) and ``trace``
        as in ``arun``.
        ``keep=[...]`` keeps only those nodes' outputs (the others are dropped once nothing needs them).
        ``save={"features": "out/features.parquet"}`` writes outputs to files (``run.saved``; ``nf.load``).
        With ``nf.config.raise_on_failure`` a run that did not succeed raises ``RunFailedError``.
        """
        graph, plan, run, merged, overrides = self._begin(
            "run", inputs, kw, targets, overrides, concurrency, on_event, store, timeout, show, keep, save, trace
        )
        _auto_show(run, None, show)
        done = run_blocking(lambda: self._execute(graph, plan, run, merged, overrides, concurrency, timeout), run)
        if config.raise_on_failure and done.status is not RunStatus.SUCCEEDED:
            done.raise_for_status()
        return done

    def start(
        self,
        inputs: Mapping[str, Any] | None = None,
        /,
        *,
        targets: Iterable[str] | str | None = None,
        overrides: Mapping[str, Any] | None = None,
        concurrency: int | None = None,
        on_event: Subscriber | None = None,
        store: Any = None,
        timeout: float | None = None,
        show: bool | None = None,
        keep: Iterable[str] | str | None = None,
        save: Mapping[str, Any] | None = None,
        trace: Any = None,
        **kw: Any,
    ) -> RunHandle:
        """Start the flow in the background of the running loop and return a RunHandle at once.

        Needs a running loop (a notebook cell or async code); in a plain script use ``run()``.
        ``timeout``, ``show`` (the live view, with a Cancel button) and ``trace`` as in ``arun``.
        """
        if not _engine_loaded:
            _load_engine()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RunnerError(
                f"flow {self.name!r}: start() runs the flow in the background of a running event loop "
                f"(a notebook cell or async code), and none is running here; use flow.run(...) to "
                f"block, or call start() from async code"
            ) from None
        graph, plan, run, merged, overrides = self._begin(
            "start", inputs, kw, targets, overrides, concurrency, on_event, store, timeout, show, keep, save, trace
        )
        handle = RunHandle(run, self._execute(graph, plan, run, merged, overrides, concurrency, timeout))
        _auto_show(run, handle, show)  # in a notebook: the live view, with a working Cancel button
        return handle

    def _begin(
        self,
        how: str,
        inputs: Mapping[str, Any] | None,
        kw: Mapping[str, Any],
        targets: Iterable[str] | str | None,
        overrides: Mapping[str, Any] | None,
        concurrency: int | None,
        on_event: Subscriber | None,
        store: Any,
        timeout: float | None,
        show: bool | None,
        keep: Iterable[str] | str | None,
        save: Mapping[str, Any] | None,
        trace: Any,
    ) -> tuple[Graph, Plan, Run, dict[str, Any], dict[str, Any]]:
        """What ``arun``, ``run`` and ``start`` share: check their options, then prepare the run."""
        _check_concurrency(concurrency)
        _options.check_timeout(timeout, f"flow {self.name!r}: {how}(timeout=...)")
        self._check_option_clash(
            inputs,
            how,
            targets=targets,
            overrides=overrides,
            concurrency=concurrency,
            on_event=on_event,
            store=store,
            timeout=timeout,
            show=show,
            keep=keep,
            save=save,
            trace=trace,
        )
        return self._prepare(inputs, kw, targets, overrides, on_event, store, keep, save, trace)

    def _check_option_clash(self, inputs: Mapping[str, Any] | None, how: str, **options: Any) -> None:
        """An option given (``store=``, ``timeout=``, ...) that is also the name of a flow input not in the dict.

        The keyword is the option, never the input: an HTTP node's own ``timeout`` parameter must not
        silently become the run's deadline, nor a ``store`` parameter the checkpoint file.
        """
        given = inputs or {}
        for option in RUN_OPTIONS:
            if options.get(option) is None or option not in self.inputs or option in given:
                continue
            graph = self.graph
            takers = ", ".join(
                f"parameter {d.param!r} of node {n!r}"
                for n in self.inputs[option].consumers
                for d in graph.nodes[n].deps
                if d.source == option and not d.is_node
            )
            raise FlowDefinitionError(
                f"flow {self.name!r}: {how}({option}=...) is {how}()'s own option, but this flow also has an "
                f"input named {option!r} (taken by {takers}); pass that input in the dict, "
                f"{how}({{{option!r}: ...}}), and add {option}=... only for the option itself"
            )

    # Batch evaluation (rows × grid -> DataFrame) lives in nbflow/_batch/api.py.
    if TYPE_CHECKING:
        batch = _batch.batch
        abatch = _batch.abatch
        answer = _paused.answer
        aanswer = _paused.aanswer
    else:
        batch = _Elsewhere("nbflow._batch.api", "batch")
        abatch = _Elsewhere("nbflow._batch.api", "abatch")
        answer = _Elsewhere("nbflow._batch.paused", "answer")
        aanswer = _Elsewhere("nbflow._batch.paused", "aanswer")

    def resume(self, run: Run | str, answer: Any = MISSING, *, store: Any = None, **kw: Any) -> Run:
        """Resume a paused or failed run of this flow (a Run, or a run id in ``store``); blocking.

        Same options as ``Run.resume`` (``question=``, ``version=``, ``force=``).
        """
        if isinstance(run, str):
            if store is None and self.store is None:
                raise RunnerError(f"flow {self.name!r}: resume by run id needs store= (the SQLite file)")
            run = _load_run(store if store is not None else self.store, run)
        if run.flow != self.name:
            raise RunnerError(f"run {run.run_id} belongs to flow {run.flow!r}, not {self.name!r}")
        run._flow = self
        return run.resume(answer, **kw)

    def cancel(self, run: Run | str, *, store: Any = None, reason: str | None = None, force: bool = False) -> Run:
        """Cancel a PAUSED run of this flow (a Run, or a run id in ``store``): see ``Run.cancel``."""
        if isinstance(run, str):
            if store is None and self.store is None:
                raise RunnerError(f"flow {self.name!r}: cancel by run id needs store= (the SQLite file)")
            run = _load_run(store if store is not None else self.store, run)
        if run.flow != self.name:
            raise RunnerError(f"run {run.run_id} belongs to flow {run.flow!r}, not {self.name!r}")
        run.cancel(reason, force=force)
        return run

    def _resume_run(self, run: Run, answer: Any, question: str | None, version: int | None) -> Run:
        if not _engine_loaded:
            _load_engine()
        claim(run, answer, question, version)
        return run_blocking(lambda: continue_run(run), run)

    async def _aresume_run(self, run: Run, answer: Any, question: str | None, version: int | None) -> Run:
        if not _engine_loaded:
            _load_engine()
        claim(run, answer, question, version)
        return await continue_run(run)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickling (Dask workers, copies) sends the definition only: see nbflow/_flow/pickling.py.
        return type(self)._from_definition, (pickling.definition_of(self),)

    @classmethod
    def _from_definition(cls, definition: dict[str, Any]) -> Flow:
        flow: Flow = pickling.rebuild(cls, definition)
        return flow

    def to_dot(self, run: Run | None = None, *, targets: Iterable[str] | str | None = None) -> Any:
        """The graph as a ``graphviz.Digraph`` (coloured by state when a run is given).

        ``targets=`` draws only the part a run with those targets would run: them and what feeds them.
        """
        if targets is None:
            return to_dot(self.graph, run)
        names = [targets] if isinstance(targets, str) else list(targets)
        needed = set(names)
        for n in names:
            needed.update(self.upstream(n))
        specs = {n: s for n, s in self._specs.items() if n in needed}
        return to_dot(compile_graph(self.name, specs, validate=False), run)

    # --- lineage -----------------------------------------------------------------------------------
    def upstream(self, name: str, *, direct: bool = False) -> list[str]:
        """The nodes whose outputs feed ``name`` (``direct=True``: only its immediate sources), in run order."""
        return self._lineage(name, "upstream", direct)

    def downstream(self, name: str, *, direct: bool = False) -> list[str]:
        """The nodes ``name``'s output feeds (``direct=True``: only its immediate readers), in run order."""
        return self._lineage(name, "downstream", direct)

    def _lineage(self, name: str, way: str, direct: bool) -> list[str]:
        graph = self.graph
        if name not in graph.nodes:
            raise UnknownNodeError(name, graph.nodes)
        found: set[str] = set()
        todo = list(getattr(graph.nodes[name], way))
        while todo:
            n = todo.pop()
            if n in found:
                continue
            found.add(n)
            if not direct:
                todo.extend(getattr(graph.nodes[n], way))
        return [n for n in graph.nodes if n in found]

    def __repr__(self) -> str:
        names = ", ".join(self._specs) or "no nodes"
        return f"<Flow {self.name!r}: {names}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        try:
            graph = self.graph
        except GraphError as exc:  # still show something useful while the flow is being written
            return {"text/plain": f"{self!r}\n  cannot draw: {exc}"}
        return mimebundle(graph, None, text=text_graph(graph))


def _check_concurrency(concurrency: object) -> None:
    if concurrency is not None and (
        not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1
    ):
        raise FlowDefinitionError(
            f"concurrency must be a positive int or None (no cap), got {concurrency!r}: it caps how many nodes "
            f"run at once"
        )


def _check_store(store: object, where: str) -> None:
    """A checkpoint store is a SQLite path or a CheckpointStore (None: no checkpoints)."""
    if store is None:
        return
    if isinstance(store, str | os.PathLike):
        if not os.fspath(store):
            raise FlowDefinitionError(f"{where}: store='' names no file; give a path (store='runs.db') or None")
        return
    from nbflow._store.checkpoint import CheckpointStore

    if not isinstance(store, CheckpointStore):
        raise FlowDefinitionError(
            f"{where}: store= is the SQLite file runs are checkpointed to (store='runs.db'), got {store!r} "
            f"({type(store).__name__})"
        )


def _warm_defined(funcs: list[Callable[..., Any]]) -> None:
    from nbflow._engine.executors import warm_defined

    try:
        warm_defined(funcs)
    except Exception:  # a worker that cannot start now: the first call starts one and says why
        pass


def _flow_executor(default: str | None, spec: NodeSpec, thread: bool | None) -> str | None:
    """The flow's ``executor=`` default for a node that names none: plain sync nodes only."""
    if default is None or default == "thread" or thread is False or spec.is_async or not spec.plain:
        return None
    return default


def _field_picker(node: str, field: str, position: int) -> Callable[[Any], Any]:
    def pick(value: Any) -> Any:
        if isinstance(value, Mapping):
            if field in value:
                return value[field]
        elif isinstance(value, tuple | list) and not hasattr(value, "_fields"):
            if position < len(value):
                return value[position]
        elif hasattr(value, field):
            return getattr(value, field)
        raise NodeOutputFieldError(node, field, value)

    pick.__name__ = pick.__qualname__ = field
    return pick


class NodeOutputFieldError(NbflowError, LookupError):
    """A node declared with ``outputs=`` returned a value without one of the named fields."""

    def __init__(self, node: str, field: str, value: Any) -> None:
        from nbflow._core.errors import short_repr

        super().__init__(
            f"node {node!r} declares outputs= field {field!r}, but returned {short_repr(value)} "
            f"({type(value).__name__}) without it; return a dict with that key, an object with that "
            f"attribute, or a tuple with a value at that position"
        )
        self.node = node
        self.field = field
