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

    def explore(self) -> Any:
        """The results explorer for this frame (see ``nf.explore``)."""
        from nbflow._batch.explore import explore

        return explore(self._frame)


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
