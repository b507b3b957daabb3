"""Every batch row keeps its run: the runs a batch kept, and ``df.nbflow`` to open them.

``flow.batch(..., keep="failed" | "all" | "none")`` keeps the full run record (every node's output, error,
traceback, attempts, timings, skip reasons, map items) of the rows it says; paused rows are always kept
(they are resumed from it). In memory a batch keeps at most ``keep_limit`` runs (10,000 by default); with
``store=`` the kept runs are written to the store in the same transaction as their row, so
``nf.load_run(store, run_id)`` and ``df.nbflow.run(i)`` work after a kernel restart, and only the failed and
paused ones (and a run the store could not take whole) stay in memory too: a succeeded row's run is read
back from the store, as after a restart (its secret inputs redacted).

Without ``store=`` and without ``keep=`` every row opens: failed and paused rows keep their full record
(``keep="failed"``), and each succeeded row's run is kept **packed**: no object per row, but a few slots in
columns shared by the runs of one plan (``_Shape``): its inputs' values and its outputs by reference (an output
the frame shows is the frame's own object) in one list, its times in one ``array("d")``, and its position in
an ``array("q")`` indexed by the row number its run id ends with; its nodes' recorded inputs are rebuilt from
the outputs when opened (kept only where they differ), so a row costs ~100 bytes beside what its nodes
returned, and packing it is a few appends (no object the garbage collector must follow). The packed runs
share a memory budget (``nbflow.config.keep_memory``, 64 MiB): a row past it is not kept, and ``unopenable``
says so before anyone clicks it. A run the packed form cannot hold whole (an attempt with usage or calls, a
skipped node, a retry) is kept as it is, at its estimated cost, within the same budget.

The frame finds its runs without holding them in a column: ``frame.attrs["nbflow_runs"]`` is the
batch's ``RunArchive``, a ``str`` subclass so that ``to_parquet`` (which writes attrs as JSON) keeps
working: it writes the archive's id. pandas copies attrs with ``deepcopy`` on every operation; an
archive copies as itself, so filtering a frame costs nothing. Every archive is also registered by its
id and by the prefix of its run ids (concatenated frames lose their attrs but keep ``run_id``; a frame
read back from parquet in the same process finds its archive by id), and a frame made with a store
names it in ``attrs["store"]``.
"""

from __future__ import annotations

import array
import collections
import itertools
import operator
import uuid
import weakref
from sys import getsizeof
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import BatchError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pandas as pd

    from nbflow._graph.graph import Graph
    from nbflow._record.run import Run

__all__ = ["KEEP_CHOICES", "KEEP_LIMIT", "FrameRuns", "RunArchive", "archive_of", "find_run"]

KEEP_CHOICES = ("failed", "all", "none")
KEEP_LIMIT = 10_000
_SLOT = 8  # bytes a packed run adds to its row's slot array (``RunArchive._slots``)
_SHAPE_BITS = 16  # a packed run's slot: its position in its shape's columns << 16 | the shape's number
_RUN_BYTES = (1_024, 700)  # a whole run kept as it is: estimated bytes, fixed and per node (measured: ~3 KiB for 3)
# What a finished batch row's run may hold of its own when it is plain: the attributes ``Run.__init__`` sets and
# the few a plain run sets or reads (every other one is a class default a plain run leaves as it is: ``_lean``).
_PLAIN_RUN = frozenset(
    {
        "_ask_counts",
        "_c",
        "_flow",
        "_lock",
        "_nodes",
        "_pause_requested",
        "_recast",
        "_subscribers",
        "_watchers",
        "answers",
        "finished_at",
        "flow",
        "graph",
        "inputs",
        "pending",
        "run_id",
        "saved",
        "started_at",
        "status",
    }
)

# Archives by run-id prefix ("<prefix>-<row>"): weak, plus strong references to the most recent batches
# so that a frame whose attrs were dropped (pd.concat of two batches) still finds its runs, held until the frame
# the batch returned is garbage (``RunArchive.held_by``): then a frame that still names the archive in its
# attrs (a filtered copy) keeps it, and nothing else does.
_ARCHIVES: weakref.WeakValueDictionary[str, RunArchive] = weakref.WeakValueDictionary()
_RECENT: collections.deque[RunArchive] = collections.deque(maxlen=8)


class RunArchive(str):
    """The run records one batch kept, by run id; bounded by ``limit`` in memory. Its text is its id."""

    def __new__(
        cls, policy: str, limit: int, store: str | None, findable: bool = True, budget: int | None = None
    ) -> RunArchive:
        return super().__new__(cls, f"nbflow-runs-{uuid.uuid4().hex[:12]}")

    def __init__(
        self, policy: str, limit: int, store: str | None, findable: bool = True, budget: int | None = None
    ) -> None:
        self.findable = findable  # False on a Dask worker: its runs travel back to the client's archive
        self.policy = policy
        self.limit = limit
        self.store = store
        self.runs: dict[str, Run] = {}
        self.graph: Graph | None = None  # the batch's flow graph: a run read back from the store draws with it
        self.dropped = 0  # rows the policy wanted kept but the in-memory bound refused
        self._frame_token = 0  # which frame built from this batch is the latest (``held_by``)
        self.variants: dict[str, dict[str, Any]] = {}  # the grid's named variants, real values (a re-fed frame's)
        # keep= left to its default without a store: succeeded rows' runs packed, within ``budget`` bytes
        self.budget = budget
        # run-id prefix -> per row number: -1, or where its packed run is (position << _SHAPE_BITS | shape)
        self._slots: dict[str, array.array[int]] = {}
        self._last: array.array[int] | None = None  # the slots of the prefix registered last
        self.packed = 0  # succeeded rows kept packed
        self.used = 0  # bytes the succeeded rows' kept runs are estimated to take
        self.over = 0  # succeeded rows not kept: the budget was spent
        self.outputs: frozenset[str] = frozenset()  # the frame's output columns: their values are the frame's
        self.flow: Any = None  # the batch's Flow: an unpacked run displays and resumes through it
        self._shapes: dict[tuple[Any, ...], int] = {}  # (flow, node names, input names) -> its _Shape's number
        self._shape_list: list[_Shape] = []
        self._shape_last: _Shape | None = None  # the shape found last (a batch's rows share one or a few)

    def wants(self, status: str) -> bool:
        """Does the policy keep a row that ended with ``status``? Paused rows always: they resume from it."""
        return status == "paused" or self.policy == "all" or (self.policy == "failed" and status != "succeeded")

    def offer(self, run: Run, status: str, *, stored: bool = False) -> None:
        """Keep ``run`` in memory if the policy wants it and the bound allows. ``stored``: its whole record is in
        the batch's store, so a succeeded run is not held here: ``find_run`` reads it back from the store
        (as after a kernel restart: secret inputs redacted), and only failed, paused and whatever the store
        could not take whole stay in memory."""
        if not self.wants(status) or (stored and status == "succeeded"):
            self.runs.pop(run.run_id, None)  # a resumed row that now succeeded under keep="failed"
            if self.budget is not None and status == "succeeded" and not stored:
                self.keep_succeeded(run)
            return
        if run.run_id not in self.runs and len(self.runs) >= self.limit:
            self.dropped += 1
            return
        run._subscribers = []  # the batch's subscribers (progress, store) are done with it
        self.runs[run.run_id] = run

    def keep_succeeded(self, run: Run, row: int | None = None) -> None:
        """Keep a succeeded row's run packed (or whole, if the packed form cannot hold it) within the budget.
        ``row``: its row number, when its run id is ``<the prefix registered last>-<row>`` (the batch's rows)."""
        budget = self.budget
        assert budget is not None
        if self.used >= budget:  # full (or 0): nothing more is packed
            self.over += 1
            return
        c = run._c
        last = self._last
        where = (last, row) if row is not None and last is not None else self._where(run.run_id)
        shape = None if where is None else self._shape_of(run)
        if shape is None or where is None:
            self._keep_whole(run)
            return
        # (C loops: a value a frame column shows is the frame's own; an input counts a flat 32 bytes, a
        # str one being the frame's own cell and a number about that; a container its items too)
        cost = shape.bytes
        inputs = run.inputs.values()
        if not _CONTAINERS.isdisjoint(map(type, inputs)):
            cost += sum(map(_size, inputs))
        counted = shape.counted(c.output) if shape.counted is not None else ()
        if counted:
            cost += sum(map(getsizeof, counted))
            if not _CONTAINERS.isdisjoint(map(type, counted)):
                cost += sum(map(_size, counted)) - sum(map(getsizeof, counted))
        if self.used + cost > budget:
            self.over += 1
            return
        packed = shape.pack(run)
        if packed is None:  # a time not set: kept whole
            self._keep_whole(run)
            return
        slots, row = where
        if row >= len(slots):  # (grown by doubling: a batch's rows finish in about their order)
            slots.extend(itertools.repeat(-1, max(row + 1, 2 * len(slots)) - len(slots)))
        self.used += cost + packed[1]
        if self.flow is None:
            self.flow = run._flow
        if slots[row] < 0:
            self.packed += 1
        slots[row] = packed[0] << _SHAPE_BITS | shape.number

    def _keep_whole(self, run: Run) -> None:
        """Keep a succeeded run the packed form cannot hold as it is, at its estimated cost, within the budget."""
        assert self.budget is not None
        c = run._c
        cost = _RUN_BYTES[0] + _RUN_BYTES[1] * len(c.names) + sum(map(_size, c.output))
        if self.used + cost > self.budget or len(self.runs) >= self.limit:
            self.over += 1
            return
        self.used += cost
        if self.flow is None:
            self.flow = run._flow
        run._subscribers = []
        self.runs[run.run_id] = run

    def _where(self, run_id: str) -> tuple[array.array[int], int] | None:
        """The slot array of ``run_id``'s prefix and its row number; None for a run id that is not
        ``<registered prefix>-<row>``."""
        prefix, _, row = run_id.rpartition("-")
        slots = self._slots.get(prefix)
        if slots is None or not row.isdigit():
            return None
        return slots, int(row)

    def _shape_of(self, run: Run) -> _Shape | None:
        """The ``_Shape`` whose columns can hold ``run`` packed; None when it holds more than a packed run can
        (usage, calls, retries, a skipped node, a question, ...)."""
        c = run._c
        names = c.names
        n = len(names)
        lean, done, run_done, fields, defaults = _LEAN or _lean()
        if (
            run.status is not run_done
            or c.status.count(done) != n
            or c.attempts.count(lean) != n
            or c.cold.count(None) != n
            or None in c.inputs
            or fields(run) != defaults  # (not ``run.__dict__``: reading it makes the dict, ~0.5 µs a run)
            or run.pending
            or run.answers
            or run.saved
        ):
            return None
        keys = tuple(run.inputs)
        last = self._shape_last
        if last is not None:  # (a batch's rows share a shape: compared item by item, the names by identity)
            flow, last_names, last_keys = last.key
            if last_names is names and last_keys == keys and flow == run.flow:
                return last
        key = (run.flow, names, keys)
        number = self._shapes.get(key)
        if number is None:
            number = len(self._shape_list)
            if number >= 1 << _SHAPE_BITS:
                return None
            self._shapes[key] = number
            self._shape_list.append(_Shape(key, self.graph, self.outputs, number))
        last = self._shape_last = self._shape_list[number]
        return last

    def _unpack(self, run_id: str, slot: int) -> Run:
        """The run ``_Shape.pack`` packed, as it was (its nodes' recorded inputs rebuilt from their sources)."""
        from nbflow._core.states import NodeStatus, RunStatus
        from nbflow._record.run import Run

        shape = self._shape_list[slot & ((1 << _SHAPE_BITS) - 1)]
        p = slot >> _SHAPE_BITS
        flow, names, keys = shape.key
        n, k = len(names), len(keys)
        width, span = k + n, 2 + 2 * n
        values = shape.values[p * width : (p + 1) * width]
        t = shape.times[p * span : (p + 1) * span]
        recorded = shape.recorded.get(p)
        inputs = dict(zip(keys, values[:k], strict=True))
        run = Run(flow, run_id, inputs, names)
        run.started_at, run.finished_at = t[0], t[1]
        c = run._c
        c.status[:] = [NodeStatus.SUCCEEDED] * n
        output = c.output
        output[:] = values[k:]
        c.started[:] = t[2 : 2 + n]
        c.finished[:] = t[2 + n :]
        c.attempts[:] = [_lean()[0]] * n
        for i, deps in enumerate(shape.deps):
            have = None if recorded is None else recorded[i]
            if have is None and deps is not None:
                have = {p: output[j] if j >= 0 else inputs[src] for p, j, src in deps if j >= 0 or src in inputs}
            c.inputs[i] = have
        run.status = RunStatus.SUCCEEDED
        run.graph = self.graph
        run._flow = self.flow
        return run

    def get(self, run_id: str) -> Run | None:
        """The run kept in memory under ``run_id`` (whole or packed), or None."""
        run = self.runs.get(run_id)
        if run is not None:
            return run
        slot = self._slot(run_id)
        return None if slot < 0 else self._unpack(run_id, slot)

    def _slot(self, run_id: str) -> int:
        """Where ``run_id``'s packed run is (``_unpack``), or -1."""
        where = self._where(run_id)
        if where is None or where[1] >= len(where[0]):
            return -1
        return where[0][where[1]]

    def holds(self, run_id: str) -> bool:
        return run_id in self.runs or self._slot(run_id) >= 0

    def register(self, prefix: str) -> None:
        if self.budget is not None:
            self._last = self._slots.setdefault(prefix, array.array("q"))
        if not self.findable:
            return
        _ARCHIVES[prefix] = self
        _ARCHIVES[str(self)] = self
        _RECENT.append(self)

    def held_by(self, frame: pd.DataFrame) -> None:
        """``frame`` is the batch's latest frame: once it is garbage (and no earlier frame is the latest), the
        archive leaves the recent list, so the runs of a deleted frame are released with it."""
        self._frame_token += 1
        weakref.finalize(frame, _release, self, self._frame_token)

    def __deepcopy__(self, memo: dict[int, Any]) -> RunArchive:
        return self  # frame.attrs is deep-copied by pandas on every operation: share, never copy runs

    def __copy__(self) -> RunArchive:
        return self

    def __repr__(self) -> str:
        where = f", store={self.store!r}" if self.store else ""
        packed = f", {self.packed} packed" if self.budget is not None else ""
        return f"<RunArchive keep={self.policy!r}: {len(self.runs)} runs in memory{packed}{where}>"

    def __reduce__(self) -> Any:
        # A pickled frame (to_pickle, Dask) carries the archive's id, not its runs: they stay in this
        # process (found by id) and in the store.
        return (str, (str(self),))

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


class _Shape:
    """The packed runs of one plan: ``key`` (flow, node names, input names), their columns, their fixed size,
    which outputs no frame column holds (``counted``), and how each node's recorded inputs are rebuilt:
    ``(param, source node's index or -1, input name)`` per parameter, as the engine gathers them (None: never
    rebuilt: a merge, or a node the graph does not know).

    The columns: ``values`` holds each packed run's input values then its outputs (``width`` slots a run),
    ``times`` its start and end then its nodes' starts and ends (``span`` floats a run), ``recorded`` the few
    recorded inputs that differ from what the sources gave, by position. No object per run: packing is a few
    appends, and the garbage collector follows one list per plan, not one tuple per row.

    A packed run is a lean-path run (every attempt ``LEAN``), whose nodes were called with exactly what their
    sources gave, except where a parameter's type check handed back another object: the engine says so
    (``Run._recast``), and only then are the nodes with checks (and always the unknown ones) ``verify``-ed,
    their recorded inputs kept where they differ. (Verifying every row was a Python loop per checked node.)
    ``tests/batch/test_every_row_opens.py`` opens packed runs against whole ones of the same rows."""

    __slots__ = (
        "bytes",
        "counted",
        "deps",
        "key",
        "number",
        "recorded",
        "span",
        "times",
        "unknown",
        "values",
        "verify",
        "width",
    )

    def __init__(
        self,
        key: tuple[str, tuple[str, ...], tuple[str, ...]],
        graph: Graph | None,
        outputs: frozenset[str],
        number: int = 0,
    ) -> None:
        _, names, keys = key
        n = len(names)
        self.key = key
        self.number = number
        self.width, self.span = len(keys) + n, 2 + 2 * n
        self.values: list[Any] = []
        self.times = array.array("d")
        self.recorded: dict[int, tuple[Mapping[str, Any] | None, ...]] = {}
        # its slots in the columns, and its row's slot (outputs and input values: counted apart)
        self.bytes = 8 * self.width + 8 * self.span + _SLOT
        self.bytes += 32 * len(keys)  # the inputs' values, a flat estimate (see keep_succeeded)
        counted = [i for i, name in enumerate(names) if name not in outputs]  # outputs no frame column holds
        # (a getter of those outputs, as a tuple; None: none)
        self.counted = None if not counted else operator.itemgetter(*counted) if len(counted) > 1 else _one(counted[0])
        index = {name: i for i, name in enumerate(names)}
        known = graph.nodes if graph is not None else {}
        deps: list[tuple[tuple[str, int, str], ...] | None] = []
        verify = []
        for i, name in enumerate(names):
            g = known.get(name)
            if g is None or any(d.alternatives or (d.is_node and d.source not in index) for d in g.deps):
                deps.append(None)
                verify.append(i)
                continue
            deps.append(tuple((d.param, index[d.source] if d.is_node else -1, d.source) for d in g.deps))
            if g.checks:
                verify.append(i)
        self.deps = tuple(deps)
        self.verify = tuple(verify)
        self.unknown = None in deps  # a node whose recorded inputs are never rebuilt: every run keeps them

    def pack(self, run: Run) -> tuple[int, int] | None:
        """Append ``run`` (of this shape, plain: ``RunArchive._shape_of``) to the columns: its position and the bytes
        its kept recorded inputs take; None (nothing appended) when a time is not set."""
        c = run._c
        times = self.times
        end = len(times)
        try:
            times.extend((run.started_at, run.finished_at, *c.started, *c.finished))  # type: ignore[arg-type]
        except TypeError:  # a time not set
            del times[end:]
            return None
        output = c.output
        inputs = run.inputs
        values = self.values
        position = len(values) // self.width
        values.extend(inputs.values())
        values.extend(output)
        if not run._recast and not self.unknown:  # (most rows: what each node got is what its sources gave)
            return position, 0
        recorded: list[Mapping[str, Any] | None] | None = None
        for i in self.verify:  # nodes whose recorded inputs may not be what the sources gave (see above)
            have: Any = c.inputs[i]  # (never None here: checked by _shape_of)
            deps = self.deps[i]
            same = deps is not None
            if deps is not None:
                k = 0
                for param, j, src in deps:
                    value = output[j] if j >= 0 else inputs.get(src, _ABSENT)
                    if value is not _ABSENT:
                        k += 1
                        if have.get(param, _ABSENT) is not value:
                            same = False
                            break
                same = same and k == len(have)
            if not same:
                if recorded is None:
                    recorded = [None] * len(output)
                recorded[i] = have
        if recorded is None:
            return position, 0
        self.recorded[position] = tuple(recorded)
        return position, _SLOT * 6 + sum(map(_size, recorded))


_ABSENT = object()
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})


def _one(i: int) -> Callable[[list[Any]], tuple[Any]]:
    return lambda values: (values[i],)


_LEAN: tuple[Any, Any, Any, Callable[[Run], tuple[Any, ...]], tuple[Any, ...]] | None = None


def _lean() -> tuple[Any, Any, Any, Callable[[Run], tuple[Any, ...]], tuple[Any, ...]]:
    """(``LEAN``, ``NodeStatus.SUCCEEDED``, ``RunStatus.SUCCEEDED``, a getter of a run's other fields, their
    defaults), imported on first use (this module is imported with pandas, before any run).

    The other fields: every data attribute ``Run`` declares with a class default (``reason``, ``reused``,
    ``store``, ``targets``, ...) apart from ``_PLAIN_RUN``; a plain run leaves each at its default, and a run
    whose field differs is kept whole. Every other attribute a run has is set by ``Run.__init__`` (all in
    ``_PLAIN_RUN``), so this is the check of ``run.__dict__`` against ``_PLAIN_RUN`` without making the dict."""
    global _LEAN
    if _LEAN is None:
        from nbflow._core.states import NodeStatus, RunStatus
        from nbflow._record.run import LEAN, Run

        names = tuple(
            name
            for name, value in vars(Run).items()
            if not name.startswith("__")
            and not name.lstrip("_").isupper()  # (a constant: _TRANSIENT)
            and name not in _PLAIN_RUN
            and not callable(value)
            and not hasattr(value, "__get__")  # (a property, a cached_property: not a field)
        )
        defaults = tuple(getattr(Run, name) for name in names)
        _LEAN = (LEAN, NodeStatus.SUCCEEDED, RunStatus.SUCCEEDED, operator.attrgetter(*names), defaults)
    return _LEAN


def _size(value: Any) -> int:
    """Estimated bytes of ``value``: its own size, and a container's items' own sizes (from up to 64 of them)."""
    size = getsizeof(value, 64)
    kind = type(value)
    if kind in (list, tuple, set, frozenset, dict) and value:
        sample = list(itertools.islice(value.items() if kind is dict else value, 64))
        flat = itertools.chain.from_iterable(sample) if kind is dict else sample
        size += sum(getsizeof(x, 64) for x in flat) * len(value) // len(sample)
    return size


def _release(archive: RunArchive, token: int) -> None:
    if archive._frame_token == token:  # (a partial frame built before the final one is not the latest)
        try:
            _RECENT.remove(archive)
        except ValueError:
            pass  # pushed out by newer batches already


def archive_of(attrs: Mapping[Any, Any]) -> RunArchive | None:
    """The archive of a batch frame (its ``attrs``) if it lives in this process."""
    archive = attrs.get("nbflow_runs")
    if isinstance(archive, str) and not isinstance(archive, RunArchive):
        archive = _ARCHIVES.get(archive)  # the id, read back from a file (to_parquet keeps attrs as JSON)
    return archive if isinstance(archive, RunArchive) else None


def find_run(frame: pd.DataFrame, run_id: str) -> Run | None:
    """The run of a row by its id: in the frame's archive, any live archive, or the frame's store."""
    archive = archive_of(frame.attrs)
    candidates = [archive] if archive is not None else []
    prefix = run_id.rsplit("-", 1)[0]
    found = _ARCHIVES.get(prefix)
    if found is not None:
        candidates.append(found)
    for a in candidates:
        run = a.get(run_id)
        if run is not None:
            return run
    for a in candidates:
        run = _from_store(a.store, run_id) if a.store else None
        if run is not None:
            if run.graph is None and a.graph is not None and run.flow == a.graph.name:
                run.graph = a.graph  # displayed as the run in memory would be (its graph drawn)
            return run
    store = frame.attrs.get("store")
    return _from_store(store, run_id) if store else None


def unopenable(frame: pd.DataFrame, run_id: Any, status: str) -> str | None:
    """Why a row's run cannot be opened (``df.nbflow.run``, the explorer), known without loading it; None when
    it can (held in memory, or written to the batch's store by its keep policy)."""
    if not isinstance(run_id, str):
        return "this row never started: it has no run"
    archive = frame.attrs.get("nbflow_runs")
    if isinstance(archive, str) and not isinstance(archive, RunArchive):
        archive = _ARCHIVES.get(archive)
    archive = archive if isinstance(archive, RunArchive) else _ARCHIVES.get(run_id.rsplit("-", 1)[0])
    if archive is None:
        return (
            None
            if frame.attrs.get("store")
            else "its run is not in this process (a new kernel, or a frame from a file)"
        )
    if archive.holds(run_id) or (archive.store and archive.wants(status)):
        return None
    if archive.budget is not None and status == "succeeded":
        return (
            f"not kept: the batch's succeeded rows filled their memory budget (nbflow.config.keep_memory = "
            f"{_mib(archive.budget)}); run the batch with store='runs.db' to open every row, or raise "
            f"nbflow.config.keep_memory"
        )
    if not archive.wants(status):
        return f"not kept (keep={archive.policy!r}); run the batch with keep='all' or store='runs.db'"
    return f"not kept in memory (at most {archive.limit} runs); run the batch with store='runs.db'"


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


def _from_store(store: str, run_id: str) -> Run | None:
    from nbflow._core.errors import StoreError
    from nbflow._store.checkpoint import load_run

    try:
        return load_run(store, run_id)
    except StoreError:
        return None


class FrameRuns:
    """The runs behind a batch frame: what ``df.nbflow`` opens (its rows' runs, calls, tracebacks).

    ``df.nbflow`` itself is ``nbflow._batch.accessor.NbflowAccessor``, this plus what sits above the runs
    (saving the frame, the explorer, running rows again)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame

    def _row(self, i: Any) -> pd.Series:
        frame = self._frame
        if "run_id" not in frame.columns:
            raise BatchError(
                "this frame has no 'run_id' column, so it is not (or no longer) a batch result; keep the "
                "'run_id' column when you select columns to open rows' runs"
            )
        if i in frame.index:
            row = frame.loc[i]
            if not hasattr(row, "get") or getattr(row, "ndim", 1) != 1:
                raise BatchError(f"index label {i!r} names several rows; use a position: df.nbflow.run(position)")
            return row
        if isinstance(i, int) and -len(frame) <= i < len(frame):
            return frame.iloc[i]
        raise BatchError(f"no row {i!r} in this frame (neither an index label nor a position of its {len(frame)} rows)")

    def run(self, i: Any) -> Run:
        """The run of row ``i`` (an index label, else a position); it displays as the run view."""
        return self._run_of(self._row(i), i)

    def _run_of(self, row: pd.Series, i: Any) -> Run:
        run_id = row["run_id"]
        if not isinstance(run_id, str):
            raise BatchError(f"row {i!r} has no run (status {row.get('status')!r}): it never started")
        run = find_run(self._frame, run_id)
        if run is None and row.get("status") == "succeeded":
            archive = archive_of(self._frame.attrs)
            if archive is not None and archive.budget is not None:  # keep= left out, no store: the budget ran out
                raise BatchError(
                    f"the run of row {i!r} ({run_id}, status 'succeeded') was "
                    f"{unopenable(self._frame, run_id, 'succeeded')}"
                )
        if run is None:
            archive = self._frame.attrs.get("nbflow_runs")
            policy = archive.policy if isinstance(archive, RunArchive) else None
            why = (
                f"the batch kept runs with keep={policy!r}"
                + (" (failed and paused rows only)" if policy == "failed" else "")
                + (
                    f" and at most {archive.limit} in memory"
                    if isinstance(archive, RunArchive) and archive.dropped
                    else ""
                )
                if policy
                else "its runs are not in this process (a new kernel, or a frame read from a file)"
            )
            raise BatchError(
                f"the run of row {i!r} ({run_id}, status {row.get('status')!r}) was not kept: {why}; run the batch "
                f"with keep='all', or with store='runs.db' to keep every run on disk"
            )
        return run

    def openable(self) -> pd.Series:
        """True for each row whose run ``run(i)`` opens (kept in memory, packed, or in the batch's store), known
        without opening it; False for a row that never started or whose run was not kept (``run(i)`` says why)."""
        import pandas as pd

        frame = self._frame
        if "run_id" not in frame.columns:
            self._row(None)  # the clear error
        statuses = frame["status"].tolist() if "status" in frame.columns else [""] * len(frame)
        can = [unopenable(frame, r, str(s)) is None for r, s in zip(frame["run_id"].tolist(), statuses, strict=True)]
        return pd.Series(can, index=frame.index, name="openable", dtype=bool)

    def runs(self, mask: Any = None) -> list[Run]:
        """The runs of the rows ``mask`` selects (a boolean Series/array, labels, or all rows)."""
        frame = self._frame if mask is None else self._frame.loc[mask]
        if "run_id" not in frame.columns:
            self._row(None)  # the clear error
        return [self._run_of(frame.iloc[p], frame.index[p]) for p in range(len(frame))]

    def calls(self, i: Any = None, node: str | None = None) -> pd.DataFrame:
        """The model calls of row ``i`` (an index label, else a position), or of every row whose run was kept
        (``i=None``: a ``row`` column says which), as ``run.calls(node)`` gives them: the transcript
        (docs/transcripts.md). The rows' runs must be kept (``keep='all'``, or a ``store=``)."""
        import pandas as pd

        if i is not None:
            return self.run(i).calls(node)
        frames = []
        for label, run in zip(self._frame.index, self.runs(), strict=True):
            part = run.calls(node)
            part.insert(0, "row", label)
            frames.append(part)
        if not frames:
            return self.run(0).calls(node) if len(self._frame) else pd.DataFrame()
        return pd.concat(frames, ignore_index=True)

    def traceback(self, i: Any) -> str | None:
        """The traceback of row ``i``'s failed node (None when the row did not fail)."""
        row = self._row(i)
        if row.get("status") != "failed":
            return None
        run = self.run(i)
        node = row.get("error_node")
        rec = run.nodes.get(node) if isinstance(node, str) else None
        if rec is None:
            rec = next((r for _, r in run.walk() if r.traceback), None)
        return rec.traceback if rec is not None else None
