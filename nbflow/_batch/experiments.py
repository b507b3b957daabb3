"""Every batch with a store is an experiment: ``nf.experiments(db)`` lists them, ``nf.load_batch`` reloads one.

An experiment is a batch row of the store (``batches.meta``): its name (``experiment=``, default the
batch id), notes, the flow and its fingerprint, grid keys, variant names and values, outputs,
repeats, when it started and ended, row counts per status, the per-variant summary
(``nf.summarize``), why it stopped early, the cool-downs it took, which changed nodes made a
resume re-run rows, and the flow's picture as plain data (``graph``: ``nbflow._show.draw.graph_shape``). It is written when the batch begins and updated when it ends (also when it is
interrupted: the finished rows and counts are kept).
"""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING, Any

from nbflow._batch.summary import summarize
from nbflow._core.errors import BatchError, StoreError
from nbflow._core.secrets import REDACTED_TEXT, Secret, is_secret_name
from nbflow._store.batch_store import BatchStore

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._batch.rows import State

__all__ = ["experiment_meta", "experiments", "load_batch", "record_experiment", "refresh_experiment"]


def experiment_meta(state: State) -> dict[str, Any]:
    """What is known about the experiment when it begins."""
    opts, cases = state.opts, state.cases
    meta: dict[str, Any] = {
        "experiment": opts.experiment or state.batch_id,
        "grid": list(cases.grid_keys),
        "variants": {k: {name: _shown(k, v) for name, v in vs.items()} for k, vs in cases.variants.items()},
        # every value as it is (not a repr, not a redaction marker): a frame loaded back can feed them again
        "variants_exact": all(_shown(k, v) is v for k, vs in cases.variants.items() for v in vs.values()),
        "outputs": list(cases.outputs),
        "repeats": cases.repeats,
        "fingerprint": state.fingerprint,
        "started_at": time.time(),
    }
    if opts.notes is not None:
        meta["notes"] = opts.notes
    meta["environment"] = _environment(state)  # (at the start too: a kept run's lineage reads it, docs/lineage.md)
    try:  # the flow's picture as data: `nbflow view` / `nbflow report` draw it without the flow's code
        from nbflow._show.draw import graph_shape

        meta["graph"] = graph_shape(state.flow.graph)
    except Exception:  # a picture must never stop a batch (the viewer then lists the nodes)
        pass
    return meta


def record_experiment(state: State, store: BatchStore) -> None:
    """Update the experiment at the end of the batch: counts, summary, stop reason, cool-downs, columns."""
    assert state.batch_id is not None
    frame = state.frame if state.frame is not None else state.build()
    meta: dict[str, Any] = {
        "finished_at": time.time(),
        "fingerprint": state.fingerprint,
        "counts": dict(frame.attrs.get("counts", {})),
        "stopped": state.stopped,
        "rerun": dict(state.rerun),
        "cooldowns": list(getattr(state, "cooldowns", [])),
    }
    meta["environment"] = _environment(state)
    meta.update(_summary(frame))
    store.update_meta(state.batch_id, meta, columns=[str(c) for c in frame.columns])


def _summary(frame: pd.DataFrame) -> dict[str, Any]:
    """The experiment's per-variant summary (``summary``), or why it could not be made (``summary_error``)."""
    try:
        summary = summarize(frame, digits=None)  # exact: nf.experiments sums these
        return {  # keyed by the grid's values: a secret one is written as the marker
            "summary": [
                {str(k): _shown(str(k), v) for k, v in rec.items()} for rec in summary.reset_index().to_dict("records")
            ]
        }
    except Exception as exc:  # a summary must never lose the batch
        return {"summary_error": f"{type(exc).__name__}: {exc}"}


_HELD = ("succeeded", "failed", "paused")  # statuses of rows the store always holds


def refresh_experiment(store: BatchStore, batch_id: str) -> None:
    """After paused rows were answered (``flow.answer``, in any process): the experiment's counts and summary
    again, from the rows the store now holds. A batch still running (no end recorded) is left to its own end."""
    info = store.batch_info(batch_id)
    if info is None or not info["meta"].get("counts"):
        return
    held = {k: v for k, v in store.status_counts(batch_id).items() if v}
    old = info["meta"]["counts"]
    counts = {**{k: v for k, v in old.items() if k not in _HELD and k not in held}, **held}
    meta: dict[str, Any] = {"counts": counts}
    try:
        frame = load_batch(store, batch_id)
        if len(frame) == info["n_rows"]:  # (rows never finished are not stored: the end's summary counts them)
            meta.update(_summary(frame))
    except Exception as exc:  # the answers are written: a summary must never undo them
        meta["summary_error"] = f"{type(exc).__name__}: {exc}"
    store.update_meta(batch_id, meta)


def _environment(state: State) -> dict[str, Any]:
    """Which nbflow, Python, packages and git commit run the batch (the rows' code versions: "fingerprint"); what
    every stored row's lineage names as its environment (``nbflow._record.lineage.expand``)."""
    try:
        from nbflow._engine.lineage import environment

        return environment(state.flow.graph)
    except Exception as exc:  # never lose the batch over it
        return {"error": f"{type(exc).__name__}: {exc}"}


def _shown(name: str, value: Any) -> Any:
    """``_plain(value)``, or the redaction marker for a secret (by its name, ``nf.Secret``)."""
    return REDACTED_TEXT if isinstance(value, Secret) or is_secret_name(name) else _plain(value)


def _plain(value: Any) -> Any:
    """A JSON-friendly stand-in (numbers, strings; anything else by its repr)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return _plain(value.item())
    except ImportError:  # pragma: no cover - pandas brings numpy
        pass
    return repr(value)


def _open(db: str | os.PathLike[str] | BatchStore) -> tuple[BatchStore, bool]:
    if isinstance(db, BatchStore):
        return db, False
    if not os.path.exists(os.fspath(db)):
        raise StoreError(f"no store at {os.fspath(db)!r}; give the path a batch was run with (store=...)")
    return BatchStore(db), True


def experiments(db: str | os.PathLike[str] | BatchStore) -> pd.DataFrame:
    """Every batch (experiment) in the store ``db``, oldest first, as a DataFrame.

    Columns: ``experiment``, ``flow``, ``started``, ``finished`` (pandas timestamps, UTC), ``rows``,
    ``succeeded``, ``failed``, ``not_finished``, ``grid``, ``variants`` (names), ``notes``,
    ``fingerprint``, ``stopped``, ``cost`` (total, when the nodes reported usage) and ``batch_id``.
    """
    import pandas as pd

    store, own = _open(db)
    try:
        records = []
        for b in store.batches():
            info = store.batch_info(b["batch_id"]) or {}
            meta = info.get("meta", {})
            counts = meta.get("counts", {})
            ok, bad = counts.get("succeeded", 0), counts.get("failed", 0)
            if not counts:  # still running, or interrupted before the end was recorded: count what the store holds
                held = store.status_counts(b["batch_id"])
                ok, bad = held.get("succeeded", 0), held.get("failed", 0)
            cost = sum(float(s.get("cost_total") or 0.0) for s in meta.get("summary", []) if "cost_total" in s)
            has_cost = any("cost_total" in s for s in meta.get("summary", []))
            records.append(
                {
                    "experiment": meta.get("experiment", b["batch_id"]),
                    "flow": b["flow"],
                    "started": pd.Timestamp(b["created_at"], unit="s", tz="UTC"),
                    "finished": pd.Timestamp(meta["finished_at"], unit="s", tz="UTC")
                    if meta.get("finished_at")
                    else pd.NaT,
                    "rows": b["n_rows"],
                    "succeeded": int(ok),
                    "failed": int(bad),
                    "not_finished": int(b["n_rows"] - ok - bad),
                    "grid": meta.get("grid", []),
                    "variants": {k: list(v) for k, v in meta.get("variants", {}).items()},
                    "notes": meta.get("notes"),
                    "fingerprint": meta.get("fingerprint"),
                    "stopped": meta.get("stopped"),
                    "cost": cost if has_cost else math.nan,
                    "batch_id": b["batch_id"],
                }
            )
    finally:
        if own:
            store.close()
    columns = [
        "experiment",
        "flow",
        "started",
        "finished",
        "rows",
        "succeeded",
        "failed",
        "not_finished",
        "grid",
        "variants",
        "notes",
        "fingerprint",
        "stopped",
        "cost",
        "batch_id",
    ]
    return pd.DataFrame.from_records(records, columns=columns)


def load_batch(db: str | os.PathLike[str] | BatchStore, name: str, *, unpickle: bool = True) -> pd.DataFrame:
    """The result frame of experiment ``name`` (or batch id) from the store, rows in their batch order.

    ``frame.attrs`` holds what ``flow.batch`` set (flow, batch_id, outputs, grid, variants, counts,
    experiment, notes), so ``nf.summarize`` and ``nf.compare`` work on it as on a fresh result.
    Rows never finished are absent. ``unpickle=False`` leaves pickled values as a marker (a store
    you did not write yourself).

    The frame names its store (``attrs["store"]``), so it behaves as the frame the batch returned, in
    this process or after a restart: ``df.nbflow.run(i)`` opens a row's run from the store and
    ``flow.answer(df, {row: answer})`` resumes a paused row, writing its new state to the store.
    """
    from nbflow._batch.accessor import register_accessor

    register_accessor()  # df.nbflow, even in a process that imported pandas after nbflow
    store, own = _open(db)
    try:
        batch_id = _find(store, name)
        info = store.batch_info(batch_id)
        assert info is not None
        frame = store.load(batch_id, unpickle=unpickle)
    finally:
        if own:
            store.close()
    meta = info["meta"]
    frame.attrs.update(
        {
            "flow": info["flow"],
            "batch_id": batch_id,
            "outputs": meta.get("outputs", []),
            "grid": meta.get("grid", []),
            "variants": meta.get("variants", {}),
            "variants_exact": bool(meta.get("variants_exact", False)),
            "repeats": meta.get("repeats", 1),
            "experiment": meta.get("experiment", batch_id),
            "notes": meta.get("notes"),
            "stopped": meta.get("stopped"),
            "counts": {str(k): int(v) for k, v in frame["status"].value_counts().items()} if "status" in frame else {},
            "store": os.path.abspath(store.path),
        }
    )
    from nbflow._batch.rows import split_scores  # (the row engine: loaded when a frame is, not with nf.experiments)

    return split_scores(frame, frame.attrs["outputs"])


def _find(store: BatchStore, name: str) -> str:
    if not isinstance(name, str) or not name:
        raise BatchError(f"load_batch: give the experiment name or batch id (a string), got {name!r}")
    if store.batch_info(name) is not None:
        return name
    found = []
    names = []
    for b in store.batches():
        meta = (store.batch_info(b["batch_id"]) or {}).get("meta", {})
        exp = meta.get("experiment", b["batch_id"])
        names.append(exp)
        if exp == name:
            found.append(b["batch_id"])
    if len(found) == 1:
        return found[0]
    from nbflow._core.errors import _suggest

    raise StoreError(
        f"store {store.path!r} has no experiment {name!r}{_suggest(name, names)}; experiments: "
        f"{', '.join(map(repr, names)) or '(none)'} (nf.experiments(path) lists them)"
    )
