"""Resource instances: built lazily once per event loop, shared there, closed when the loop ends.

SDK clients (``openai.AsyncOpenAI``, ``httpx.AsyncClient``) bind their connection pools to the loop
they first ran on (docs/notebooks.md), so a resource instance belongs to one loop: the kernel's,
nbflow's loop thread (``flow.run`` in a cell), the loop of ``asyncio.run`` in a script, a Dask
worker's. Instances are keyed by (loop, resource spec, values of the flow inputs it depends on).

Closing, in reverse order of creation: when the loop shuts down (a keeper async generator
registered with the loop runs the teardown from ``loop.shutdown_asyncgens()``, which
``asyncio.run`` / ``anyio.run`` call), on ``flow.close()``, when the resource is redefined, and at
interpreter exit (``atexit``) for loops still holding instances (the kernel's, nbflow's thread).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nbflow._core.errors import NbflowWarning, ResourceError
from nbflow._core.missing import MISSING
from nbflow._dsl.resource import ResourceSpec
from nbflow._graph.graph import BoundResource
from nbflow._record.run import Run

__all__ = ["close_all", "close_specs", "live_count", "provide", "ready_kwargs", "resource_kwargs"]

_CLOSE_TIMEOUT = 30.0


class _Entry:
    __slots__ = ("closer", "future", "name", "value")

    def __init__(self, name: str, future: asyncio.Future[Any]) -> None:
        self.name = name
        self.future = future
        self.value: Any = MISSING
        self.closer: Callable[[], Any] | None = None


class _LoopResources:
    """The instances living on one loop, in creation order."""

    __slots__ = ("entries", "keeper", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.entries: dict[Any, _Entry] = {}
        self.keeper: Any = None


_LIVE: dict[asyncio.AbstractEventLoop, _LoopResources] = {}
_LOCK = threading.Lock()


def live_count() -> int:
    """How many resource instances are open, on every loop (for tests and diagnostics)."""
    return sum(1 for lr in list(_LIVE.values()) for e in list(lr.entries.values()) if e.value is not MISSING)


_generation = [0]
"""Bumped whenever instances are closed: a run's table made before then is stale (``ready_kwargs``)."""


def ready_kwargs(
    kwargs: dict[str, Any], used: tuple[tuple[str, BoundResource], ...], run: Run
) -> dict[str, Any] | None:
    """The engine's fast path: ``kwargs`` plus the resources, from the run's table (else None: not resolved yet).

    A run resolves each resource once (``resource_kwargs`` fills ``run._resources``, on the loop it
    runs on); every later node of the run pays a dict copy and one identity-keyed lookup per resource.
    """
    table = run._resources
    if table is None or table[0] != _generation[0]:
        return None
    resolved = table[1]
    call = kwargs.copy()
    for param, bound in used:
        value = resolved.get(bound, MISSING)
        if value is MISSING:
            return None
        call[param] = value
    return call


async def resource_kwargs(
    kwargs: dict[str, Any], used: tuple[tuple[str, BoundResource], ...], run: Run
) -> dict[str, Any]:
    """A copy of ``kwargs`` with each resource parameter filled in (the record keeps ``kwargs`` without them).

    Remembers each instance in the run's table (``run._resources``, transient: never pickled), which
    ``Flow._execute`` empties when the run (re)starts, since a resumed run may run on another loop.
    """
    call = dict(kwargs)
    gen = _generation[0]
    table = run._resources
    if table is None or table[0] != gen:
        table = run._resources = (gen, {})
    resolved = table[1]
    for param, bound in used:
        value = call[param] = await provide(bound, run.inputs)
        resolved[bound] = value
    return call


async def provide(bound: BoundResource, inputs: Mapping[str, Any]) -> Any:
    """This loop's instance of ``bound`` (built on first use); raises ResourceError if its factory fails."""
    loop = asyncio.get_running_loop()
    key: Any = bound.spec
    if bound.key_inputs:
        key = (bound.spec, *(_frozen(inputs.get(n, d)) for n, d in bound.key_inputs))
    lr = _LIVE.get(loop)
    if lr is not None:
        entry = lr.entries.get(key)
        if entry is not None and entry.value is not MISSING:
            return entry.value  # the fast path: two dict lookups
    return await _get_or_build(loop, key, bound, inputs)


async def _get_or_build(
    loop: asyncio.AbstractEventLoop, key: Any, bound: BoundResource, inputs: Mapping[str, Any]
) -> Any:
    while True:
        lr = await _loop_resources(loop)
        entry = lr.entries.get(key)
        if entry is None:
            return await _build(lr, key, bound, inputs)
        if entry.value is not MISSING:
            return entry.value
        try:
            return await asyncio.shield(entry.future)  # being built for another node: share it
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if entry.future.cancelled() and task is not None and not task.cancelling():
                continue  # the node building it was cancelled, not this one: build it here
            raise


def _frozen(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


async def _build(lr: _LoopResources, key: Any, bound: BoundResource, inputs: Mapping[str, Any]) -> Any:
    entry = lr.entries[key] = _Entry(bound.name, lr.loop.create_future())
    try:
        args: dict[str, Any] = {}
        for pname, dep in bound.resources:
            args[pname] = await provide(dep, inputs)
        for pname, default in bound.inputs:
            value = inputs.get(pname, default)
            if value is not MISSING:
                args[pname] = value
        value, closer = await _create(bound.spec, args)
        if type(value).__module__.startswith("openai"):  # its model calls go to the nodes' transcripts
            from nbflow._engine.transcript_hook import recorded, wants_recording

            if wants_recording(value):
                recorded(value)
    except asyncio.CancelledError:
        if lr.entries.get(key) is entry:
            del lr.entries[key]
        entry.future.cancel()
        raise
    except Exception as exc:
        if lr.entries.get(key) is entry:
            del lr.entries[key]  # the next attempt (a retry) builds it again
        if isinstance(exc, ResourceError):
            error: ResourceError = exc
        else:
            error = ResourceError(
                f"resource {bound.name!r} could not be created: {type(exc).__name__}: {exc} (the nodes that "
                f"need it fail; a node's retry policy tries again)",
                bound.name,
            )
            error.__cause__ = exc
        entry.future.set_exception(error)
        entry.future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
        raise error  # noqa: B904 - the cause is set above (the factory's own exception)
    entry.value = value
    entry.closer = closer
    entry.future.set_result(value)
    return value


async def _create(spec: ResourceSpec, args: dict[str, Any]) -> tuple[Any, Callable[[], Any] | None]:
    """Call the factory; returns the instance and what closes it."""
    func = spec.func
    if spec.kind == "async_generator":
        agen = func(**args)
        # Not registered with the loop's async-generator hooks: its teardown is ours to run, in
        # order, before the loop closes (shutdown_asyncgens would only throw GeneratorExit into it).
        hooks = sys.get_asyncgen_hooks()
        sys.set_asyncgen_hooks(firstiter=None, finalizer=None)
        try:
            first = agen.__anext__()
        finally:
            sys.set_asyncgen_hooks(*hooks)
        try:
            value = await first
        except StopAsyncIteration:
            raise ResourceError(
                f"resource {spec.name!r}: its async generator ended without yielding the resource; "
                f"write `yield client` once (code after the yield closes it)",
                spec.name,
            ) from None

        async def close_agen() -> None:
            try:
                await agen.__anext__()
            except StopAsyncIteration:
                return
            await agen.aclose()
            raise ResourceError(f"resource {spec.name!r}: its generator yielded more than once", spec.name)

        return value, close_agen
    if spec.kind == "generator":
        gen = func(**args)
        try:
            value = next(gen)
        except StopIteration:
            raise ResourceError(
                f"resource {spec.name!r}: its generator ended without yielding the resource; "
                f"write `yield client` once (code after the yield closes it)",
                spec.name,
            ) from None

        def close_gen() -> None:
            try:
                next(gen)
            except StopIteration:
                return
            gen.close()
            raise ResourceError(f"resource {spec.name!r}: its generator yielded more than once", spec.name)

        return value, close_gen
    value = func(**args)
    if inspect.isawaitable(value):
        value = await value
    return value, _closer_of(value)


def _closer_of(value: Any) -> Callable[[], Any] | None:
    """How to close a returned instance: ``aclose()``, ``close()``, ``__aexit__``, ``__exit__`` (first found)."""
    for attr in ("aclose", "close"):
        method = getattr(value, attr, None)
        if callable(method):
            return method
    aexit = getattr(value, "__aexit__", None)
    if callable(aexit):
        return lambda: aexit(None, None, None)
    exit_ = getattr(value, "__exit__", None)
    if callable(exit_):
        return lambda: exit_(None, None, None)
    return None


async def _loop_resources(loop: asyncio.AbstractEventLoop) -> _LoopResources:
    with _LOCK:
        lr = _LIVE.get(loop)
        if lr is None:
            lr = _LIVE[loop] = _LoopResources(loop)
            new = True
        else:
            new = False
    if new:
        # A keeper registered with the loop's async-generator hooks: asyncio.run / anyio.run call
        # loop.shutdown_asyncgens() before closing the loop, which runs its ``finally`` on the loop.
        lr.keeper = _keeper(lr)
        await lr.keeper.__anext__()
    return lr


async def _keeper(lr: _LoopResources) -> Any:
    try:
        yield
    finally:  # the loop is shutting down: close what lives on it, and forget the loop
        await _close_entries(lr.loop, None)
        with _LOCK:
            if _LIVE.get(lr.loop) is lr:
                del _LIVE[lr.loop]


async def _close_entries(loop: asyncio.AbstractEventLoop, specs: frozenset[ResourceSpec] | None) -> int:
    """Close the instances on ``loop`` (of ``specs`` only, if given), newest first; returns how many."""
    lr = _LIVE.get(loop)
    if lr is None:
        return 0
    closing = []
    _generation[0] += 1  # runs' tables may hold what closes now: they resolve again
    for key, entry in reversed(list(lr.entries.items())):
        spec = key[0] if isinstance(key, tuple) else key
        if specs is None or spec in specs:
            closing.append((key, entry))
            del lr.entries[key]
    closed = 0
    for _, entry in closing:
        if entry.value is MISSING:
            if not entry.future.done():
                entry.future.cancel()
            continue
        closed += 1
        if entry.closer is None:
            continue
        try:
            out = entry.closer()
            if inspect.isawaitable(out):
                await out
        except Exception as exc:
            warnings.warn(
                f"nbflow: closing resource {entry.name!r} raised {type(exc).__name__}: {exc}",
                NbflowWarning,
                stacklevel=2,
            )
    return closed


def close_specs(specs: Iterable[ResourceSpec] | None, timeout: float = _CLOSE_TIMEOUT) -> Any:
    """Close instances of ``specs`` (None: all) on every loop, each on its own loop.

    Instances on a loop running in another thread (nbflow's loop thread) are closed there and waited
    for; on a loop that is not running, by running it; on a closed loop, on a fresh one. Instances on
    the loop running in THIS thread (a notebook cell) cannot be waited for from sync code: their
    closing is scheduled as a task, which is returned (await it in async code).
    """
    wanted = None if specs is None else frozenset(specs)
    try:
        here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    pending = None
    for loop in list(_LIVE):
        if wanted is not None and not _has(loop, wanted):
            continue
        if loop is here:
            pending = loop.create_task(_close_entries(loop, wanted))
        elif loop.is_closed():
            _in_fresh_thread(lambda loop=loop: asyncio.run(_close_entries(loop, wanted)), timeout)  # type: ignore[misc]
        elif loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(_close_entries(loop, wanted), loop)
            try:
                fut.result(timeout)
            except concurrent.futures.TimeoutError:
                warnings.warn("nbflow: closing resources timed out", NbflowWarning, stacklevel=2)
        elif here is None:
            loop.run_until_complete(_close_entries(loop, wanted))
        else:
            _in_fresh_thread(lambda loop=loop: loop.run_until_complete(_close_entries(loop, wanted)), timeout)  # type: ignore[misc]
    return pending


def _has(loop: asyncio.AbstractEventLoop, wanted: frozenset[ResourceSpec]) -> bool:
    lr = _LIVE.get(loop)
    if lr is None:
        return False
    return any((k[0] if isinstance(k, tuple) else k) in wanted for k in list(lr.entries))


def _in_fresh_thread(fn: Callable[[], Any], timeout: float) -> None:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=target, name="nbflow-close-resources", daemon=True)
    t.start()
    t.join(timeout)
    if errors:
        warnings.warn(f"nbflow: closing resources raised {errors[0]!r}", NbflowWarning, stacklevel=3)


def close_all() -> None:
    """Close every instance on every loop (at interpreter exit)."""
    try:
        close_specs(None)
    except Exception as exc:
        print(f"nbflow: closing resources at exit failed: {exc!r}", file=sys.stderr)


atexit.register(close_all)
