"""Every batch row keeps its run: the runs a batch kept, and ``df.nbflow`` to open them.

``flow.batch(..., keep="failed" | "all" | "none")`` keeps the full run record (every node's output, error,
traceback, attempts, timings, skip reasons, map items) of the rows it says; paused rows are always kept
(they are resumed from it). In memory a batch keeps at most ``keep_limit`` runs (10,000 by default); with
``store=`` the kept runs are written to the store in the same transaction as their row, so
``nf.load_run(store, run_id)`` and ``df.nbflow.run(i)`` work after a kernel restart, and only the failed and
paused ones (and a run the store could not take whole) stay in memory too: a succeeded row's run is read
back from the store, as after a restart (its secret inputs redacted).

The frame finds its runs without holding them in a column: ``frame.attrs["nbflow_runs"]`` is the
batch's ``RunArchive``, a ``str`` subclass so that ``to_parquet`` (which writes attrs as JSON) keeps
working: it writes the archive's id. pandas copies attrs with ``deepcopy`` on every operation; an
archive copies as itself, so filtering a frame costs nothing. Every archive is also registered by its
id and by the prefix of its run ids (concatenated frames lose their attrs but keep ``run_id``; a frame
read back from parquet in the same process finds its archive by id), and a frame made with a store
names it in ``attrs["store"]``.
"""

from __future__ import annotations

import collections
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import BatchError

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from nbflow._graph.graph import Graph
    from nbflow._record.run import Run

__all__ = ["KEEP_CHOICES", "KEEP_LIMIT", "FrameRuns", "RunArchive", "archive_of", "find_run"]

KEEP_CHOICES = ("failed", "all", "none")
KEEP_LIMIT = 10_000

# Archives by run-id prefix ("<prefix>-<row>"): weak, plus strong references to the most recent batches
# so that a frame whose attrs were dropped (pd.concat of two batches) still finds its runs, held until the frame
# the batch returned is garbage (``RunArchive.held_by``): then a frame that still names the archive in its
# attrs (a filtered copy) keeps it, and nothing else does.
_ARCHIVES: weakref.WeakValueDictionary[str, RunArchive] = weakref.WeakValueDictionary()
_RECENT: collections.deque[RunArchive] = collections.deque(maxlen=8)


class RunArchive(str):
    """The run records one batch kept, by run id; bounded by ``limit`` in memory. Its text is its id."""

    def __new__(cls, policy: str, limit: int, store: str | None, findable: bool = True) -> RunArchive:
        return super().__new__(cls, f"nbflow-runs-{uuid.uuid4().hex[:12]}")

    def __init__(self, policy: str, limit: int, store: str | None, findable: bool = True) -> None:
        self.findable = findable  # False on a Dask worker: its runs travel back to the client's archive
        self.policy = policy
        self.limit = limit
        self.store = store
        self.runs: dict[str, Run] = {}
        self.graph: Graph | None = None  # the batch's flow graph: a run read back from the store draws with it
        self.dropped = 0  # rows the policy wanted kept but the in-memory bound refused
        self._frame_token = 0  # which frame built from this batch is the latest (``held_by``)
        self.variants: dict[str, dict[str, Any]] = {}  # the grid's named variants, real values (a re-fed frame's)

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
            return
        if run.run_id not in self.runs and len(self.runs) >= self.limit:
            self.dropped += 1
            return
        run._subscribers = []  # the batch's subscribers (progress, store) are done with it
        self.runs[run.run_id] = run

    def register(self, prefix: str) -> None:
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
        return f"<RunArchive keep={self.policy!r}: {len(self.runs)} runs in memory{where}>"

    def __reduce__(self) -> Any:
        # A pickled frame (to_pickle, Dask) carries the archive's id, not its runs: they stay in this
        # process (found by id) and in the store.
        return (str, (str(self),))

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


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
        run = a.runs.get(run_id)
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
    if run_id in archive.runs or (archive.store and archive.wants(status)):
        return None
    if not archive.wants(status):
        return f"not kept (keep={archive.policy!r}); run the batch with keep='all' or store='runs.db'"
    return f"not kept in memory (at most {archive.limit} runs); run the batch with store='runs.db'"


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
