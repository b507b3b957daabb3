"""``df.nbflow``: the accessor pandas gives every DataFrame, registered once nbflow has made or loaded a frame.

The top of ``nbflow._batch``: it opens rows through ``runs.FrameRuns`` and adds what sits above them (saving
the frame without its secrets, the explorer, running rows again). Whatever returns a batch frame to the user
registers it first (``register_accessor``): ``flow.batch``/``abatch``, ``flow.answer``, ``nf.load_batch``,
and ``import nbflow`` / any ``nf.*`` name once pandas is loaded.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from nbflow._batch.runs import FrameRuns

if TYPE_CHECKING:
    import os
    import pathlib

    import pandas as pd

__all__ = ["NbflowAccessor", "register_accessor"]


class NbflowAccessor(FrameRuns):
    """``df.nbflow``: the runs behind a batch frame (``nbflow._batch.runs``), and the frame as a whole."""

    def save(self, path: str | os.PathLike[str]) -> pathlib.Path:
        """Write this frame to ``path`` without its secrets: ``.parquet``, ``.csv`` or ``.jsonl``, atomically.

        The frame in memory keeps every real value, so ``df.to_parquet`` writes an ``HF_TOKEN`` column, or a key
        a node echoed into its error message, as they are; this writes secret-named columns masked and the
        text of every secret of the frame's inputs (an ``nf.Secret`` anywhere, a secret-named column, a
        secret-named key of a dict value) as ``[REDACTED]`` in every cell: outputs, error messages, questions.
        Read it back with ``pd.read_parquet``; with a store, its rows still open (``df.nbflow.run(i)``).
        Raises BatchError for another suffix or a file that cannot be written. Returns the path written."""
        from nbflow._batch.save import write_frame

        return write_frame(self._frame, path)

    def redacted(self) -> pd.DataFrame:
        """A copy of this frame with its secrets removed as ``save`` writes it (to share, or to write some other way)."""
        from nbflow._batch.save import redacted

        return redacted(self._frame)

    def rerun(self, flow: Any, /, **options: Any) -> pd.DataFrame:
        """Run this frame's rows again through ``flow`` (``flow.batch(frame, **options)``), e.g. the failures:
        ``df[df.status == "failed"].nbflow.rerun(flow)``.

        Each row runs with its own inputs and the *values* of its named variants (the grid columns stay
        the labels), with its index label; the columns the batch added (outputs, status, usage...) are
        dropped first. ``options`` are ``flow.batch``'s (``grid=`` again is allowed: it gives the variants'
        values). Returns the new frame of these rows; ``df.update(new)`` puts them back into ``df``."""
        return flow.batch(self._frame, **options)

    def lineage(self, i: Any, node: str | None = None) -> pd.DataFrame:
        """Which code and data produced row ``i``'s values (an index label, else a position): ``run.lineage(node)``
        of its run (docs/lineage.md), also when ``keep=`` did not keep that run: a stored row keeps each node's
        output data version and inputs (defaults included), its code versions and its experiment's environment.

        Raises BatchError for a row that never ran, or whose run is not in this process and which no store holds.
        """
        from nbflow._batch.runs import find_run
        from nbflow._core.errors import BatchError

        row = self._row(i)
        run_id = row["run_id"]
        if not isinstance(run_id, str):
            raise BatchError(f"row {i!r} has no run (status {row.get('status')!r}): it never started, so no lineage")
        run = find_run(self._frame, run_id)
        if run is not None and (run._lineage is not None or run._flow is not None):
            return run.lineage(node)
        store, batch_id = self._frame.attrs.get("store"), self._frame.attrs.get("batch_id")
        found = _stored_lineage(str(store), str(batch_id), run_id) if store and batch_id else None
        if found is None:
            raise BatchError(
                f"row {i!r} ({run_id}): no lineage, its run is not in this process and no store holds the row; run "
                f"the batch with store='runs.db' (each row keeps its lineage, whatever keep= says)"
            )
        from nbflow._record.lineage import frame

        return frame(found, node)

    def explore(self) -> Any:
        """The results explorer for this frame (see ``nf.explore``)."""
        from nbflow._batch.explore import explore

        return explore(self._frame)


def _stored_lineage(path: str, batch_id: str, run_id: str) -> dict[str, Any] | None:
    """A stored row's lineage as a run's (``nbflow._store.checkpoint.expanded``); None when the store has no such row."""
    from nbflow._core.errors import BatchError
    from nbflow._store.batch_store import BatchStore
    from nbflow._store.checkpoint import expanded

    with BatchStore(path, read_only=True) as store:
        found = store.stored_lineage(batch_id, run_id)
    if found is None:
        return None
    text, code, env = found
    if text is None:
        raise BatchError(
            f"store {path!r}, batch {batch_id!r}, run {run_id}: the row has no lineage stored and its run was not "
            f"kept (written by an nbflow before rows kept it); run the batch with keep='all' to "
            f"keep each row's run and its lineage"
        )
    data = expanded(path, run_id, text, code, env)
    if "error" in data:
        raise BatchError(f"store {path!r}, run {run_id}: the row's lineage was not recorded ({data['error']})")
    return data


_registered = False


def register_accessor() -> None:
    """Register ``DataFrame.nbflow`` (once; called when nbflow makes or loads a frame, or imports pandas)."""
    global _registered
    if _registered:
        return
    import pandas as pd

    _registered = True
    pd.api.extensions.register_dataframe_accessor("nbflow")(NbflowAccessor)


if "pandas" in sys.modules:  # imported before nbflow (the usual notebook): df.nbflow works at once
    register_accessor()
