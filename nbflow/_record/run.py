"""What a run produced: the Run record, one NodeRecord per node, and the event stream."""

from __future__ import annotations

import asyncio
import copyreg
import functools
import threading
import time
import warnings
import weakref
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from nbflow._core import present
from nbflow._core.errors import (
    NbflowError,
    NbflowWarning,
    NodeOutputError,
    RedactedError,
    ResumeConflictError,
    RunFailedError,
    UnknownNodeError,
)
from nbflow._core.events import Event, NodeEvent, RunFinished, RunPaused
from nbflow._core.missing import MISSING
from nbflow._core.question import Question
from nbflow._core.records import record
from nbflow._core.registry import flow_of
from nbflow._core.secrets import Redactor
from nbflow._core.states import NODE_TRANSITIONS, NodeStatus, RunStatus, check_node_transition, check_run_transition

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._graph.graph import Graph

__all__ = ["DROPPED", "LEAN", "Attempt", "ItemRecord", "Iteration", "NodeColumns", "NodeRecord", "Run"]

Subscriber = Callable[[Event], object]
_PENDING = NodeStatus.PENDING
Watcher = Callable[[Event | None], object]


@record()
class Attempt:
    """One try at running a node. ``delay``: seconds waited after it before the next try (None: last)."""

    number: int
    started_at: float
    finished_at: float | None = None
    error: BaseException | None = None
    delay: float | None = None
    usage: Any = None
    """What ``nf.usage(...)`` recorded during this try (an ``nbflow._core.usage.Usage``), or None."""
    calls: list[Any] | None = None
    """The model calls made during this try (``nbflow._core.calls.Call``: its transcript), or None."""
    stream: list[str] | None = None
    """What the node streamed during this try (``nf.stream``, an async generator node), or None."""
    output: str | None = None
    """What the node printed, logged and warned during this try (secrets redacted), or None."""
    queued: float | None = None
    """Seconds a process node's try waited for a free worker before it ran (left out of ``duration``)."""

    def __setstate__(self, state: Any) -> None:
        # An attempt stored by an older nbflow has fewer fields: the ones added since keep their default.
        self.calls = self.stream = self.usage = self.error = self.delay = self.finished_at = None
        self.output = self.queued = None
        for name, value in zip(_ATTEMPT_FIELDS, state, strict=False):
            setattr(self, name, value)

    def __getstate__(self) -> list[Any]:
        return [getattr(self, name) for name in _ATTEMPT_FIELDS]

    @property
    def duration(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


_ATTEMPT_FIELDS = (
    "number",
    "started_at",
    "finished_at",
    "error",
    "delay",
    "usage",
    "calls",
    "stream",
    "output",
    "queued",
)


class ItemRecord:
    """One item of a map node: its status, output or error, and times (``run`` for a sub-flow)."""

    __slots__ = ("error", "finished_at", "index", "output", "run", "started_at", "status", "traceback")

    def __init__(self, index: int) -> None:
        self.index = index
        self.status = NodeStatus.PENDING
        self.output: Any = MISSING
        self.error: BaseException | None = None
        self.traceback: str | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.run: Run | None = None

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    def __repr__(self) -> str:
        what = f" error={type(self.error).__name__}" if self.error is not None else ""
        return f"<ItemRecord {self.index} {self.status.name}{what}>"


@record()
class Iteration:
    """One pass of a loop node."""

    index: int
    started_at: float
    finished_at: float | None = None
    output: Any = MISSING
    error: BaseException | None = None
    run: Run | None = None

    @property
    def duration(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


class _Dropped:
    """An output dropped by ``flow.run(..., keep=...)`` once nothing of the run needed it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dropped>"

    def __reduce__(self) -> str:
        return "DROPPED"


DROPPED = _Dropped()


_LOCK_MAKING = threading.Lock()  # see Run._resume_lock

LEAN: Any = object()
"""In ``NodeColumns.attempts``: the node ran on the engine's lean path, which builds no ``Attempt``;
its one attempt is made from the columns when first read (``NodeRecord.attempts``)."""

_INDEXES: dict[int, tuple[tuple[str, ...], dict[str, int]]] = {}  # id(names) -> (names, index): plans reuse theirs


class NodeColumns:
    """The fields of a run's node records: one list per field, indexed like ``names``.

    The engine's lean path writes these lists directly: a list store is a fraction of the cost of
    building a record object and setting its attributes, which dominated a trivial node's cost.
    ``NodeRecord`` objects are views onto one index, made when looked up (``Run.nodes``); the
    fields rarely set (error, skip reason, sub-run, ...) share one dict per node (``cold``), made
    when the first is set. The columns hold their records weakly, so a record read twice while it
    is alive is the same object, and no reference cycle keeps a finished run's columns alive.
    """

    __slots__ = (
        "attempts",
        "cold",
        "finished",
        "index",
        "inputs",
        "names",
        "output",
        "recs",
        "started",
        "status",
    )

    def __init__(self, names: tuple[str, ...]) -> None:
        n = len(names)
        found = _INDEXES.get(id(names))
        if found is not None and found[0] is names:
            index = found[1]
        else:
            index = {name: i for i, name in enumerate(names)}
            # A plan's tuple is reused by each of its runs (a batch: one per row); kept alive with it.
            if len(_INDEXES) >= 256:
                _INDEXES.clear()
            _INDEXES[id(names)] = (names, index)
        self.names = names
        self.index = index  # shared between runs of one plan: never changed in place (see add)
        self.status: list[NodeStatus] = [_PENDING] * n
        self.output: list[Any] = [MISSING] * n
        self.inputs: list[Mapping[str, Any] | None] = [None] * n
        self.started: list[float | None] = [None] * n
        self.finished: list[float | None] = [None] * n
        self.attempts: list[Any] = [None] * n  # None: none yet; LEAN: one, made when read; else the list
        self.cold: list[dict[str, Any] | None] = [None] * n
        self.recs: list[weakref.ref[NodeRecord] | None] = [None] * n

    def rec(self, i: int) -> NodeRecord:
        """The record of node ``i`` (a view, made when none is alive)."""
        ref = self.recs[i]
        if ref is not None:
            r = ref()
            if r is not None:
                return r
        r = NodeRecord.__new__(NodeRecord)
        r._c = self
        r._i = i
        self.recs[i] = weakref.ref(r)
        return r

    def add(self, name: str) -> int:
        """Append a node (copying the shared names and index); returns its index."""
        i = len(self.names)
        self.names = (*self.names, name)
        self.index = {**self.index, name: i}
        columns: tuple[tuple[list[Any], Any], ...] = (
            (self.status, _PENDING),
            (self.output, MISSING),
            (self.inputs, None),
            (self.started, None),
            (self.finished, None),
            (self.attempts, None),
            (self.cold, None),
            (self.recs, None),
        )
        for col, value in columns:
            col.append(value)
        return i

    def put(self, i: int, rec: NodeRecord) -> None:
        """Make ``rec`` the record of node ``i``: copy its fields here and point it here.

        A record that was node ``i``'s until now keeps what it held (it gets columns of its own).
        """
        ref = self.recs[i]
        was = None if ref is None else ref()
        if was is not None and was is not rec:
            NodeColumns((self.names[i],)).put(0, was)
        c, j = rec._c, rec._i
        self.status[i] = c.status[j]
        self.output[i] = c.output[j]
        self.inputs[i] = c.inputs[j]
        self.started[i] = c.started[j]
        self.finished[i] = c.finished[j]
        self.attempts[i] = c.attempts[j]
        cold = c.cold[j]
        self.cold[i] = None if cold is None else dict(cold)
        rec._c = self
        rec._i = i
        self.recs[i] = weakref.ref(rec)

    def take(self, other: NodeColumns) -> None:
        """Become ``other`` (its lists, its records pointed here): a run's columns keep their identity."""
        for slot in NodeColumns.__slots__:
            setattr(self, slot, getattr(other, slot))
        for ref in self.recs:
            r = None if ref is None else ref()
            if r is not None:
                r._c = self


def _cold(field: str, default: Any, doc: str) -> property:
    """A record field kept in its node's ``cold`` dict (most nodes never set it)."""

    def get(self: NodeRecord) -> Any:
        cold = self._c.cold[self._i]
        return default if cold is None else cold.get(field, default)

    def put(self: NodeRecord, value: Any) -> None:
        c, i = self._c, self._i
        cold = c.cold[i]
        if cold is None:
            cold = c.cold[i] = {}
        cold[field] = value

    return property(get, put, doc=doc)


class NodeRecord:
    """What happened to one node in one run.

    ``output`` is ``nbflow.MISSING`` unless the node succeeded; ``error`` and ``traceback`` are set
    when it failed; ``skip_reason`` says why it was skipped or cancelled. Times are epoch seconds.
    ``attempts`` lists every try; ``recovered`` is True when the node failed and
    ``on_error=nf.Default(...)`` supplied its output (it is then SUCCEEDED and keeps ``error``).
    ``cached`` is True when the output came from the node cache (SUCCEEDED, no attempts, duration 0);
    ``cache_key`` is the key a cached node was looked up under (docs/caching.md), or, for an output a
    batch reused from a stored row (``Run.reused``), where it came from (``run:<id>``).

    A record is a view: its fields live in its run's ``NodeColumns`` (``_c``, at index ``_i``), where
    the engine writes them; a record made on its own (``NodeRecord(name)``) has columns of its own.
    """

    __slots__ = ("__weakref__", "_c", "_i")

    _FIELDS = (
        "name",
        "status",
        "output",
        "error",
        "traceback",
        "attempts",
        "started_at",
        "finished_at",
        "skip_reason",
        "inputs",
        "overridden",
        "items",
        "iterations",
        "capped",
        "subrun",
        "recovered",
        "cached",
        "cache_key",
        "_cache_id",
    )

    def __init__(self, name: str) -> None:
        c = self._c = NodeColumns((name,))
        self._i = 0
        c.recs[0] = weakref.ref(self)

    @property
    def name(self) -> str:
        return self._c.names[self._i]

    # The fields every node sets, one list each in the columns (written out: these are read a lot).
    @property
    def status(self) -> NodeStatus:
        """The node's ``NodeStatus``."""
        return self._c.status[self._i]

    @status.setter
    def status(self, value: NodeStatus) -> None:
        self._c.status[self._i] = value

    @property
    def output(self) -> Any:
        """What the node returned (``nbflow.MISSING`` unless it succeeded)."""
        return self._c.output[self._i]

    @output.setter
    def output(self, value: Any) -> None:
        self._c.output[self._i] = value

    @property
    def started_at(self) -> float | None:
        """When it started (epoch seconds), or None."""
        return self._c.started[self._i]

    @started_at.setter
    def started_at(self, value: float | None) -> None:
        self._c.started[self._i] = value

    @property
    def finished_at(self) -> float | None:
        """When it finished (epoch seconds), or None."""
        return self._c.finished[self._i]

    @finished_at.setter
    def finished_at(self, value: float | None) -> None:
        self._c.finished[self._i] = value

    @property
    def inputs(self) -> Mapping[str, Any]:
        """What the node was called with (resources and dropped inputs left out)."""
        value = self._c.inputs[self._i]
        return {} if value is None else value

    @inputs.setter
    def inputs(self, value: Mapping[str, Any]) -> None:
        self._c.inputs[self._i] = value

    @property
    def attempts(self) -> list[Attempt]:
        """Every try at running the node, in order."""
        c, i = self._c, self._i
        found = c.attempts[i]
        if found is None:
            found = c.attempts[i] = []
        elif found is LEAN:  # the lean path's one attempt, made now from the columns
            found = c.attempts[i] = [Attempt(1, c.started[i], c.finished[i])]  # type: ignore[arg-type]
        return found

    @attempts.setter
    def attempts(self, value: list[Attempt]) -> None:
        self._c.attempts[self._i] = value

    @property
    def printed(self) -> str | None:
        """What the node printed, logged and warned (every attempt, each headed when it had several), or None.

        Secrets redacted; ``attempt.output`` holds one attempt's."""
        found = self._c.attempts[self._i]
        if not found or found is LEAN:
            return None
        shown = [a for a in found if a.output]
        if not shown:
            return None
        if len(found) == 1:
            return shown[0].output
        return "".join(f"--- attempt {a.number} ---\n{a.output}" for a in shown)

    error = _cold("error", None, "What the node raised (or what ``on_error`` recovered from), or None.")
    traceback = _cold("traceback", None, "The node's traceback as text (nbflow's own frames left out), or None.")
    skip_reason = _cold("skip_reason", None, "Why it was skipped or cancelled, or None.")
    overridden = _cold("overridden", False, "Its output was given to the run (``overrides=``).")
    items = _cold("items", None, "A map node: one ``ItemRecord`` per item.")
    iterations = _cold("iterations", None, "A loop node: one ``Iteration`` per pass.")
    capped = _cold("capped", False, "A loop that stopped at ``max_iterations``.")
    subrun = _cold("subrun", None, "A sub-flow node: its own run record.")
    recovered = _cold("recovered", False, "It failed and ``on_error=nf.Default(...)`` supplied its output.")
    cached = _cold("cached", False, "The output came from the node cache; the node did not run.")
    cache_key = _cold("cache_key", None, "The key the cache looked this node up under.")
    _cache_id = _cold("_cache_id", None, "What identifies this output in downstream cache keys.")

    # Pickled as a plain record (the format of every stored checkpoint): its fields by name.
    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        fields = {f: getattr(self, f) for f in self._FIELDS}
        return (copyreg.__newobj__, (NodeRecord,), (None, fields))  # type: ignore[attr-defined]

    def __setstate__(self, state: Any) -> None:
        fields = dict(state[1] if isinstance(state, tuple) else state)
        self.__init__(fields.pop("name"))  # type: ignore[misc]
        for key, value in fields.items():
            setattr(self, key, value)

    def _to(self, new: NodeStatus) -> None:
        status = self._c.status
        old = status[self._i]
        if new not in NODE_TRANSITIONS[old]:  # inlined check: this is on the hot path
            check_node_transition(self.name, old, new)
        status[self._i] = new

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else type(self.error).__name__

    @property
    def error_message(self) -> str | None:
        if self.error is None:
            return None
        notes = getattr(self.error, "__notes__", None)  # e.g. the @flow.resource hint for loop errors
        return str(self.error) if not notes else "\n".join([str(self.error), *map(str, notes)])

    def __repr__(self) -> str:
        extra = ""
        if self.status is NodeStatus.SUCCEEDED:
            extra = f" output={_short(self.output)}"
            if self.recovered and self.error is not None:
                extra += f" recovered from {self.error_type}: {_short_text(str(self.error))}"
        elif self.error is not None:
            extra = f" error={self.error_type}: {_short_text(str(self.error))}"
        elif self.skip_reason:
            extra = f" reason={self.skip_reason!r}"
        dur = f" {self.duration * 1000:.1f}ms" if self.duration is not None else ""
        if len(self.attempts) > 1:
            dur += f" attempts={len(self.attempts)}"
        if self.cached:
            dur += " cached"
        return f"<NodeRecord {self.name!r} {self.status.name}{dur}{extra}>"


class Run:
    """The record of one run of a flow. Live while it runs; complete once ``status.finished``."""

    # Fields most runs leave at their default: class attributes until set (a batch makes a run per row).
    started_at: float | None = None
    finished_at: float | None = None
    graph: Graph | None = None
    reason: str | None = None  # why nbflow itself cancelled the run (e.g. its deadline)
    _armed = False  # a watcher waits for a notice (see _watch)
    pause_version = 0
    """Goes up each time the run pauses; ``resume(version=...)`` must match it."""
    targets: tuple[str, ...] | None = None
    kept: frozenset[str] | None = None
    """``keep=``: the nodes whose outputs this run keeps (None: all)."""
    reused: Mapping[str, str] | None = None
    """Nodes whose output a batch fed from a stored row instead of running them (node -> where from, e.g.
    ``run:<id>``): their records are SUCCEEDED and ``cached``, with that origin as ``cache_key``."""
    _root_ref: Run | None = None  # see _root
    _path = ""
    _flow: Any = None
    store: Any = None
    """The checkpoint store this run is written to, if any."""
    _resources: Any = None  # this execution's resource instances (_engine/resources.py), never pickled
    _lineage: dict[str, Any] | None = None  # the stored lineage (a loaded run), or computed once finished
    # The engine's lean path set it: a parameter's type check handed a node another object than its source gave,
    # so that node's recorded inputs differ from its sources' values (a packed batch row keeps them; runs.py).
    _recast = False
    _lock: threading.Lock | None = None  # see _resume_lock

    def __init__(self, flow: str, run_id: str, inputs: Mapping[str, Any], nodes: Iterator[str] | Any) -> None:
        self.flow = flow
        self.run_id = run_id
        self.inputs = dict(inputs)
        self.status = RunStatus.PENDING
        self._c = NodeColumns(nodes if type(nodes) is tuple else tuple(nodes))
        self._subscribers: list[Subscriber] = []
        self._watchers: list[Watcher] = []  # see _watch
        # Human in the loop (kept on the top-level run; sub-flow runs point at it through _root).
        self.pending: dict[str, Question] = {}
        """Open questions of paused nodes, by key (``node#n``)."""
        self.answers: dict[str, Any] = {}
        """Answers given so far, by question key."""
        self._ask_counts: dict[tuple[str, int], int] = {}
        self.saved: dict[str, Any] = {}
        """``save=``: the files this run wrote, {node: path} (``nf.load(path)`` reads one back)."""
        self._pause_requested = False  # (an instance attribute: the engine reads it once per node)

    # Runs are pickled into checkpoints (sub-flow runs): leave out what belongs to this process.
    _TRANSIENT = (
        "_subscribers",
        "_watchers",
        "_armed",
        "_lock",
        "_flow",
        "graph",
        "store",
        "_root_ref",
        "_resources",
    )

    @property
    def _resume_lock(self) -> threading.Lock:
        """Held while a resume, a cancel or a take-over changes the run (exactly one of racing ones wins).

        Made when first needed: a batch makes a run per row and almost none is ever resumed (a lock made
        and freed per row was ~0.3 µs of its CPU)."""
        lock = self._lock
        if lock is None:
            with _LOCK_MAKING:  # (two threads asking at once get the same lock)
                lock = self._lock
                if lock is None:
                    lock = self._lock = threading.Lock()
        return lock

    @property
    def _root(self) -> Run:
        """The top-level run (this one, unless it is a sub-flow's run).

        Stored as None for a top-level run: a reference to itself would make every Run a reference
        cycle, freed only by the cyclic GC (measured: +50% time and memory over a 10,000-row batch).
        """
        return self if self._root_ref is None else self._root_ref

    @_root.setter
    def _root(self, value: Run) -> None:
        self._root_ref = None if value is self else value

    @functools.cached_property
    def _nodes(self) -> Nodes:
        """``nodes``, made on first read (a batch row's run is mostly never read by name). The columns keep
        their identity (see ``_set_records``), so this view stays valid."""
        return Nodes(self._c)

    @property
    def nodes(self) -> Nodes:
        """Every node's record, by name, in topological order (a mapping; records are made on first read)."""
        return self._nodes

    @nodes.setter
    def nodes(self, records: Mapping[str, NodeRecord]) -> None:
        self._set_records(records)

    def _set_records(self, records: Mapping[str, NodeRecord]) -> None:
        """The columns hold ``records`` (in their order) from now on; each record is pointed at them."""
        records = dict(records.items())  # (read before the columns change: it may be this run's own mapping)
        c = NodeColumns(tuple(records))
        for i, rec in enumerate(records.values()):
            c.put(i, rec)
        self._c.take(c)

    def _align(self, names: tuple[str, ...]) -> NodeColumns:
        """Order the columns as ``names`` (a plan's nodes) first, then any other node; returns them.

        The engine indexes a run's columns by the plan's order; a run made for its plan already is
        (the common case: nothing to do), a resumed one may not be.
        """
        c = self._c
        if c.names is names or c.names[: len(names)] == names:
            return c
        nodes = self._nodes
        order = {n: nodes[n] if n in nodes else NodeRecord(n) for n in names}
        order.update((n, nodes[n]) for n in c.names if n not in order)
        self._set_records(order)
        return c

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in self._TRANSIENT and k not in ("_c", "_nodes")}
        state["nodes"] = dict(self._nodes.items())  # plain records: the format of every stored checkpoint
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        records = state.pop("nodes", {})
        self.__dict__.update(state)
        self._c = NodeColumns(())
        self._nodes = Nodes(self._c)
        self._set_records(records)
        self._subscribers = []
        self._watchers = []
        self._armed = False
        self._lock = None
        self._flow = self.graph = self.store = self._resources = None
        self._root = self

    # --- state, used by the engine -------------------------------------------------------------
    def _to(self, new: RunStatus) -> None:
        check_run_transition(self.run_id, self.status, new)
        self.status = new

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` for every later event of this run; returns an unsubscribe function."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _emit(self, event: Event) -> None:
        for callback in tuple(self._subscribers):
            try:
                callback(event)
            except Exception as exc:  # a broken subscriber must never break the run
                self._subscribers.remove(callback)
                warnings.warn(
                    f"run {self.run_id}: event subscriber {callback!r} raised {type(exc).__name__}: {exc}; "
                    f"it was unsubscribed",
                    NbflowWarning,
                    stacklevel=2,
                )
        if self._watchers:
            if not isinstance(event, NodeEvent):
                self._tell(event)
            elif self._armed:
                self._notice()

    # --- watchers: what the run view listens with ---------------------------------------------
    def _watch(self, callback: Watcher) -> Callable[[], None]:
        """Call ``callback(None)`` when node states change, coalesced, and ``callback(event)`` for the
        run's own events (RunStarted, RunPaused, RunFinished); returns a function that stops it.

        Made for the live view, which redraws from the records and so needs no event objects: where
        no subscriber listens, the engine builds none for a watcher. A notice comes at the first
        node change after the run was armed (``_arm``: watching arms it), then none until a watcher
        arms it again, which the view does each time it draws: one call per redraw, not per event.
        Every watcher is told at each notice.
        """
        self._watchers.append(callback)
        self._armed = True

        def unwatch() -> None:
            if callback in self._watchers:
                self._watchers.remove(callback)
            if not self._watchers:
                self._armed = False

        return unwatch

    def _arm(self) -> None:
        """The next node change notices the watchers (called by a watcher when it reads the records)."""
        if self._watchers:
            self._armed = True

    def _notice(self) -> None:
        """A node's state changed while armed: disarm, then tell every watcher (``callback(None)``)."""
        self._armed = False
        self._tell(None)

    def _tell(self, event: Event | None) -> None:
        for callback in tuple(self._watchers):
            try:
                callback(event)
            except Exception as exc:  # as for subscribers: a broken watcher must never break the run
                self._watchers.remove(callback)
                warnings.warn(
                    f"run {self.run_id}: run watcher {callback!r} raised {type(exc).__name__}: {exc}; it was removed",
                    NbflowWarning,
                    stacklevel=3,
                )

    def events(self) -> AsyncIterator[Event]:
        """Iterate over this run's events from now on, until it finishes (``async for ev in run.events()``)."""
        return _EventStream(self)

    # --- reading ---------------------------------------------------------------------------------
    @property
    def duration(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.finished_at if self.finished_at is not None else time.time()
        return end - self.started_at

    @property
    def outputs(self) -> dict[str, Any]:
        """Outputs of the nodes that succeeded, by node name (in topological order)."""
        c = self._c
        done = NodeStatus.SUCCEEDED
        return {n: out for n, st, out in zip(c.names, c.status, c.output, strict=True) if st is done}

    @property
    def errors(self) -> dict[str, BaseException]:
        c = self._c  # (an error is kept in the node's cold fields: a node without them has none)
        return {
            n: cold["error"]
            for n, cold in zip(c.names, c.cold, strict=True)
            if cold is not None and cold.get("error") is not None
        }

    def _summary(self, outputs: list[str]) -> tuple[list[Any], NodeRecord | None, int]:
        """For a batch row, straight from the columns (no record made but a failed one's): the outputs
        of ``outputs`` (None unless succeeded), the first node with an error, and the most attempts."""
        c = self._c
        index, status, output = c.index, c.status, c.output
        done = NodeStatus.SUCCEEDED
        values = []
        for name in outputs:
            i = index.get(name)
            values.append(output[i] if i is not None and status[i] is done else None)
        failed = None
        cold_fields = c.cold
        if cold_fields.count(None) != len(cold_fields):  # (counted in C: most rows have no rare field)
            for i, cold in enumerate(cold_fields):
                if cold is not None and cold.get("error") is not None:
                    failed = c.rec(i)
                    break
        tried = c.attempts
        if tried.count(LEAN) == len(tried):  # every node ran once, lean (most rows)
            return values, failed, 1 if tried else 0
        most = 0
        for found in tried:
            n = 0 if found is None else 1 if found is LEAN else len(found)
            if n > most:
                most = n
        return values, failed, most

    def _plain_nodes(self) -> Iterator[tuple[str, NodeStatus, Any, float | None, float | None, bool, Any] | NodeRecord]:
        """Each node, for a store writing the whole run: ``(name, status, output, started_at, finished_at,
        ran, inputs)`` straight from the columns when its record is plain (no rare field set, and at most the
        lean path's one attempt, ``LEAN``: ``ran``; see ``NodeRecord.attempts``), else its ``NodeRecord``."""
        c = self._c
        cold, tried = c.cold, c.attempts
        for i, name in enumerate(c.names):
            found = tried[i]
            if cold[i] is None and (found is LEAN or found is None):
                yield name, c.status[i], c.output[i], c.started[i], c.finished[i], found is LEAN, c.inputs[i] or {}
            else:
                yield c.rec(i)

    def counts(self) -> dict[str, int]:
        """How many nodes are in each state."""
        by_status = Counter(self._c.status)  # `.value` once per state, not per node
        return {status.value: n for status, n in by_status.items()}

    def record(self, path: str) -> NodeRecord:
        """The record of ``path``: a node name, or ``"subflow.node"`` for a node inside a sub-flow."""
        head, _, rest = path.partition(".")
        try:
            rec = self.nodes[head]
        except KeyError:
            targets = getattr(self, "targets", None)
            if targets is not None and head in self._declared_nodes():
                raise NodeOutputError(
                    f"node {head!r} is not in this run: it ran only what targets={list(targets)!r} need; "
                    f"run without targets= (or add {head!r} to them) to get its output"
                ) from None
            raise UnknownNodeError(head, self.nodes) from None
        if not rest:
            return rec
        if rec.subrun is None:
            raise NodeOutputError(f"node {head!r} is not a sub-flow that ran, so {path!r} has no record")
        return rec.subrun.record(rest)

    def _declared_nodes(self) -> set[str]:
        """The flow's nodes when this run was made (a run of some ``targets`` holds only part of them)."""
        graph = getattr(self, "graph", None)
        return set(getattr(graph, "nodes", ()) or ())

    def walk(self, prefix: str = "") -> Iterator[tuple[str, NodeRecord]]:
        """Every node record with its path, sub-flow nodes after their sub-flow node."""
        for name, rec in self.nodes.items():
            yield prefix + name, rec
            if rec.subrun is not None:
                yield from rec.subrun.walk(f"{prefix}{name}.")

    def _column_walk(self, prefix: str = "") -> Iterator[tuple[str, NodeColumns]]:
        """``walk`` without making a record: this run's columns with the prefix of their nodes' paths, then
        each sub-flow run's (for a reader of every node, e.g. the live view's last redraw)."""
        c = self._c
        yield prefix, c
        cold = c.cold
        if cold.count(None) != len(cold):  # (counted in C: only a node with a rare field can hold a sub-run)
            for name, extra in zip(c.names, cold, strict=False):  # (a node being added has its name first)
                sub = None if extra is None else extra.get("subrun")
                if sub is not None:
                    yield from sub._column_walk(f"{prefix}{name}.")

    def __getitem__(self, node: str) -> Any:
        """The output of ``node`` (or ``"subflow.node"``); NodeOutputError if it produced none."""
        rec = self.record(node)
        if rec.status is not NodeStatus.SUCCEEDED:
            why = ""
            if rec.error is not None:
                why = f": {type(rec.error).__name__}: {rec.error}"
            elif rec.skip_reason:
                why = f" ({rec.skip_reason})"
            raise NodeOutputError(
                f"node {node!r} has no output: it is {rec.status.name}{why}; see run.nodes[{node!r}] for its record"
            )
        if rec.output is DROPPED:
            kept = sorted(getattr(self, "kept", ()) or ())
            why = f"it is not in keep={kept!r}" if kept else "keep= named other nodes"  # (a run read back: not known)
            raise NodeOutputError(
                f"node {node!r} ran, but its output was dropped: {why}; add it to keep= "
                f"(or run without keep=) to read it"
            )
        return rec.output

    def __contains__(self, node: object) -> bool:
        try:
            return isinstance(node, str) and self.record(node).status is NodeStatus.SUCCEEDED
        except NbflowError:
            return False

    def lineage(self, node: str | None = None) -> pd.DataFrame:
        """Which code and data produced ``node``'s output (default: every node of the run), as a DataFrame.

        One row per parameter of the node and of every node upstream of it: where the value came from
        (``source``: an upstream node, a flow input, or ``kind == "default"``: the parameter's default),
        its data version (the cache's content digest) and the node's code version (the cache's
        fingerprint) and output version. ``.attrs["environment"]``: nbflow, Python and package versions,
        the git commit. A run loaded from a store answers from what its checkpoint kept. See docs/lineage.md.
        """
        from nbflow._record.lineage import frame

        data = self._lineage
        if data is None:
            flow = self._flow
            if flow is None or self.graph is None:
                raise NbflowError(
                    f"run {self.run_id}: no lineage (a run loaded from a store written before nbflow kept it); "
                    f"run the flow again to record it"
                )
            data = flow._lineage_of(self)
            if self.status.finished:
                self._lineage = data
        return frame(data, node)

    def raise_for_status(self) -> Run:
        """Return the run if it succeeded; else raise RunFailedError (first node error as the cause)."""
        if self.status is RunStatus.SUCCEEDED:
            return self
        failed = [r for r in self.nodes.values() if r.status is NodeStatus.FAILED]
        red = Redactor.for_inputs(self._root.inputs)  # the message is shown in the cell: no secret in it
        if failed:
            listed = "; ".join(f"{r.name!r}: {r.error_type}: {_short_text(red(str(r.error)))}" for r in failed)
            msg = f"run {self.run_id} of flow {self.flow!r} is {self.status.name}; failed nodes: {listed}"
            raise RunFailedError(msg, self) from _shown_cause(failed[0].error, red)
        why = f" ({red(self.reason)})" if self.reason else ""
        raise RunFailedError(f"run {self.run_id} of flow {self.flow!r} is {self.status.name}{why}", self)

    # --- pause and resume ------------------------------------------------------------------------
    def pause(self) -> None:
        """Ask a running run to pause: nodes in flight finish, no new node starts, then it is PAUSED."""
        if self.status is not RunStatus.RUNNING:
            raise ResumeConflictError(f"run {self.run_id} is {self.status.name}; only a RUNNING run can be paused")
        self._pause_requested = True

    async def aresume(
        self, answer: Any = MISSING, *, question: str | None = None, version: int | None = None, force: bool = False
    ) -> Run:
        """Answer a pending question (if any) and continue the paused run on this loop.

        A FAILED run is resumed without an answer: its failed nodes and everything downstream of them
        run again, every other succeeded node is kept (docs/human_in_the_loop.md).

        With several open questions, name the one answered with ``question=`` (a key of
        ``run.pending``). ``version`` (``run.pause_version``) guards against resuming a pause that
        was already resumed. Raises ResumeConflictError (nothing changed) if the run is not paused or
        the question was already answered, AnswerError if the answer does not fit.

        A stored run that another process holds RUNNING is taken over once that process is gone (on this
        host: its pid; on another host: its heartbeat older than a minute). ``force=True`` takes it over
        now, whoever holds it: only when you know that process is gone (two processes running one run
        would both write it).
        """
        if force:
            self._take_over()
        return await flow_of(self)._aresume_run(self, answer, question, version)

    def resume(
        self, answer: Any = MISSING, *, question: str | None = None, version: int | None = None, force: bool = False
    ) -> Run:
        """Like ``aresume`` but blocking (works in a script and in a notebook cell)."""
        if force:
            self._take_over()
        return flow_of(self)._resume_run(self, answer, question, version)

    def _take_over(self) -> None:
        """``force=True``: a stored run loaded RUNNING counts as interrupted, whoever holds it."""
        with self._resume_lock:
            if self.status is RunStatus.RUNNING and self.store is not None:
                self.store.take_over(self)

    def cancel(self, reason: str | None = None, *, force: bool = False) -> None:
        """Cancel a PAUSED run (e.g. nobody will answer): it becomes CANCELLED, its open questions close,
        its paused and pending nodes are CANCELLED, finished outputs are kept. In a store, the change is
        claimed like a resume (exactly one of a racing cancel and resume wins). A running run is
        stopped with ``handle.cancel()`` instead; ``force=True`` cancels a stored run another process holds
        RUNNING (see ``aresume``)."""
        from nbflow._core.events import NodeCancelled

        if force:
            self._take_over()
        if self._root is not self:
            raise ResumeConflictError(f"run {self.run_id} is part of a larger run; cancel {self._root.run_id} instead")
        why = reason or "cancelled while paused"
        with self._resume_lock:
            if self.status is not RunStatus.PAUSED:
                raise ResumeConflictError(
                    f"run {self.run_id} is {self.status.name}; only a PAUSED run can be cancelled this way "
                    f"(stop a running one with handle.cancel())"
                )
            if self.store is not None:
                self.store.claim(self, None, MISSING, cancel=True)  # raises if another process got there first
            now = time.time()
            self.pending.clear()
            self.reason = why
            for rec in self.nodes.values():
                if not rec.status.finished:
                    rec._to(NodeStatus.CANCELLED)
                    rec.skip_reason = why
                    self._emit(NodeCancelled(run_id=self.run_id, time=now, node=rec.name, reason=why))
            self.finished_at = now
            self._to(RunStatus.CANCELLED)
            self._emit(
                RunFinished(
                    run_id=self.run_id,
                    time=now,
                    status=RunStatus.CANCELLED,
                    duration=self.duration or 0.0,
                    reason=why,
                )
            )

    def to_frame(self) -> pd.DataFrame:
        """One row per node: status, output, error, attempts, times, skip reason."""
        import pandas as pd

        rows = []
        for path, r in self.walk():
            rows.append(
                {
                    "node": path,
                    "status": r.status.value,
                    "output": r.output if r.status is NodeStatus.SUCCEEDED else None,
                    "error_type": r.error_type,
                    "error_message": r.error_message,
                    "attempts": len(r.attempts),
                    "recovered": r.recovered,
                    "cached": r.cached,
                    "started_at": pd.to_datetime(r.started_at, unit="s") if r.started_at else pd.NaT,
                    "duration_s": r.duration,
                    "reason": r.skip_reason,
                }
            )
        return pd.DataFrame(rows).set_index("node")

    def calls(self, node: str | None = None) -> pd.DataFrame:
        """The model calls made by ``node`` (a path: ``"sub.node"`` in a sub-flow), or by every node: its
        transcript as a DataFrame, one row per call in order (columns: ``nbflow._core.calls.CALL_COLUMNS``:
        node, attempt, call, api, model, messages, tools, params, content, tool_calls, finish_reason, tokens,
        cost, latency_s, retry, status_code, error, streamed, response_id, started_at). Calls come from an
        ``nf.recorded`` client (or any ``openai`` client a ``@flow.resource`` returns) and ``nf.record_call``
        (docs/transcripts.md). Raises UnknownNodeError for a node this run does not have."""
        import pandas as pd

        from nbflow._core.calls import CALL_COLUMNS, call_rows

        found = [(node, self.record(node))] if node is not None else list(self.walk())
        rows = [row for path, rec in found for row in call_rows(path, rec.attempts)]
        frame = pd.DataFrame(rows, columns=list(CALL_COLUMNS))
        return frame.astype({"input_tokens": "Int64", "output_tokens": "Int64", "status_code": "Int64"})

    def __repr__(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items())
        dur = f" in {self.duration:.3f}s" if self.duration is not None else ""
        why = f" reason={self.reason!r}" if self.reason else ""
        return f"<Run {self.run_id} flow={self.flow!r} {self.status.name}{dur} ({counts}){why}>"

    def summary(self) -> str:
        """A readable multi-line text: one line per node (the text a cell shows without the live view: secrets'
        texts redacted)."""
        lines = [repr(self)]
        for r in self.nodes.values():
            lines.append("  " + repr(r)[len("<NodeRecord ") : -1])
        return Redactor.for_inputs(self._root.inputs)("\n".join(lines))

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.summary())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        shown = present.bundle(self, None, include, exclude)  # installed by the notebook layer
        return shown if shown is not None else {"text/plain": self.summary()}


class Nodes(Mapping[str, NodeRecord]):
    """``run.nodes``: the run's node records by name, in its order (a record is made on first read).

    Reads like the dict it replaces (``[name]``, ``get``, ``in``, ``len``, iteration, ``keys``,
    ``values``, ``items``); ``[name] = record`` and ``setdefault`` put a record in (a new name is
    appended); ``run.nodes = {...}`` replaces them all.
    """

    __slots__ = ("_c",)

    def __init__(self, columns: NodeColumns) -> None:
        self._c = columns

    def __getitem__(self, name: str) -> NodeRecord:
        c = self._c
        return c.rec(c.index[name])

    def get(self, name: str, default: Any = None) -> Any:
        c = self._c
        i = c.index.get(name)
        return default if i is None else c.rec(i)

    def __contains__(self, name: object) -> bool:
        return name in self._c.index

    def __iter__(self) -> Iterator[str]:
        return iter(self._c.names)

    def __len__(self) -> int:
        return len(self._c.names)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._c.names)

    def keys(self) -> Any:
        return self._c.index.keys()

    def values(self) -> list[NodeRecord]:  # type: ignore[override]
        c = self._c
        return [c.rec(i) for i in range(len(c.names))]

    def items(self) -> list[tuple[str, NodeRecord]]:  # type: ignore[override]
        return list(zip(self._c.names, self.values(), strict=True))

    def __setitem__(self, name: str, rec: NodeRecord) -> None:
        c = self._c
        i = c.index.get(name)
        c.put(c.add(name) if i is None else i, rec)

    def setdefault(self, name: str, default: NodeRecord) -> NodeRecord:
        found = self.get(name)
        if found is None:
            self[name] = found = default
        return found

    def copy(self) -> dict[str, NodeRecord]:
        return dict(self.items())

    def __repr__(self) -> str:
        return repr(self.copy())


class _EventStream:
    """An async iterator over a run's events; safe when the run executes in another thread."""

    def __init__(self, run: Run) -> None:
        self._queue: deque[Event] = deque()
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._thread = threading.get_ident()
        self._closed = run.status.finished
        self._unsubscribe = run.subscribe(self._push)

    def _push(self, event: Event) -> None:
        self._queue.append(event)
        if threading.get_ident() == self._thread:
            self._wake.set()
        else:
            self._loop.call_soon_threadsafe(self._wake.set)

    def __aiter__(self) -> _EventStream:
        return self

    async def __anext__(self) -> Event:
        while not self._queue:
            if self._closed:
                self._unsubscribe()
                raise StopAsyncIteration
            self._wake.clear()
            await self._wake.wait()
        event = self._queue.popleft()
        if isinstance(event, RunFinished | RunPaused):
            self._closed = True
        return event


def _short_text(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any) -> str:
    return _short_text(repr(value), 60)


def _shown_cause(error: BaseException | None, red: Redactor) -> BaseException | None:
    """``error``, or a ``RedactedError`` standing for it when its message quotes a secret (the notebook prints a
    chained cause's message under the traceback)."""
    if error is None:
        return None
    try:
        text = str(error)
    except Exception:  # a broken __str__: the traceback shows it as it would
        return error
    shown = red(text)
    if shown == text:
        return error
    return RedactedError(f"{type(error).__name__}: {shown}").with_traceback(error.__traceback__)
