"""Resuming a stored batch: which stored rows are still valid for the rows and the flow given now.

A stored row is reused only if

* its **content key** matches a row of this call (row values + grid combination + variant values +
  repeat, duplicates numbered in order) — never its position, so rows given in another order, a
  subset or a superset all find their own results; and
* none of the nodes the row runs **changed** since it was stored: each row remembers the flow's
  per-node fingerprints (``nbflow._engine.caching.node_fingerprints``, the cache's own rule: code,
  declaration and the simple globals it reads). ``resume=True`` re-runs rows that depend on a
  changed node and says how many and why; ``resume="strict"`` refuses, naming the nodes.

Rows of a version 1 store (no key, no fingerprints) are re-keyed from their stored values once;
their fingerprints are unknown: ``resume=True`` reuses them with a warning, ``"strict"`` refuses.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nbflow._batch.cases import STATUS_COLUMNS, content_key
from nbflow._batch.rows import FINISHED
from nbflow._core.errors import NbflowWarning, StoreError
from nbflow._store.batch_store import LEGACY_KEY, BatchStore, StoredRow

if TYPE_CHECKING:
    from nbflow._batch.rows import State
    from nbflow._record.batch_progress import BatchProgress

__all__ = ["STRICT", "reuse_rows"]

STRICT = "strict"


def reuse_rows(
    state: State,
    store: BatchStore,
    stored: list[StoredRow],
    current: Mapping[str, str | None],
    progress: BatchProgress,
) -> list[int]:
    """Fill ``state.results`` with the stored rows still valid; return the indices of the rows to run."""
    opts, cases = state.opts, state.cases
    assert state.batch_id is not None
    by_key = {r.key: r for r in _rekeyed(state, store, stored)}
    changed_by: Counter[str] = Counter()
    unknown: list[int] = []
    rerun = 0
    todo: list[int] = []
    reuse: list[tuple[int, StoredRow]] = []
    for i, case in enumerate(cases.cases):
        old = by_key.get(case.key)
        if old is None or old.status not in FINISHED or (opts.retry_failed and old.status == "failed"):
            todo.append(i)
            continue
        if old.fingerprints is None:
            unknown.append(i)
            reuse.append((i, old))
            continue
        changed = [n for n in case.plan.nodes if current.get(n) is None or old.fingerprints.get(n) != current.get(n)]
        if changed:
            changed_by.update(changed)
            rerun += 1
            todo.append(i)
        else:
            reuse.append((i, old))
    where = f"store {store.path!r}, batch {state.batch_id!r}"
    if opts.resume == STRICT and (changed_by or unknown):
        if changed_by:
            raise StoreError(
                f"{where}: {rerun} stored rows were computed by another version of {_nodes(changed_by)} "
                f"(code, declaration or the globals it reads changed); resume='strict' refuses to mix them. "
                f"Pass resume=True to re-run exactly those rows, or restore the nodes' code"
            )
        raise StoreError(
            f"{where}: {len(unknown)} stored rows come from an nbflow that did not record node fingerprints, so "
            f"whether the flow changed since cannot be checked; resume='strict' refuses them. Pass resume=True "
            f"to reuse them anyway, or store.delete_batch({state.batch_id!r}) to start over"
        )
    if changed_by:
        warnings.warn(
            f"resume: {rerun} of the stored rows run again because {_nodes(changed_by)} changed since they were "
            f"stored (code, declaration or the globals it reads); {len(reuse)} stored rows reused",
            NbflowWarning,
            stacklevel=5,
        )
    if unknown:
        warnings.warn(
            f"resume: {len(unknown)} stored rows of {where} were written before nbflow recorded node fingerprints; "
            f"they are reused without checking whether the flow changed since (resume='strict' refuses them)",
            NbflowWarning,
            stacklevel=5,
        )
    moved = {old.key: i for i, old in reuse if old.index != i}
    if moved:  # the store shows the rows in the order of the latest call (nf.load_batch)
        store.reindex(state.batch_id, moved)
    for i, old in reuse:
        result = dict(cases.cases[i].row)  # inputs come from the rows given now (secrets were never stored)
        for col in (*cases.outputs, *STATUS_COLUMNS):
            result[col] = old.data.get(col)
        for col, value in old.data.items():  # usage columns and anything else the row recorded
            result.setdefault(col, value)
        state.results[i] = result
        progress.resumed += 1
    state.rerun = dict(changed_by)
    return todo


def _rekeyed(state: State, store: BatchStore, stored: list[StoredRow]) -> list[StoredRow]:
    """Rows of a version 1 store get their content key from their stored values (once, in the file)."""
    legacy = [r for r in stored if r.key.startswith(LEGACY_KEY)]
    if not legacy:
        return stored
    cases = state.cases
    columns = [c for c in cases.columns]
    seen: Counter[str] = Counter()
    mapping: dict[str, str] = {}
    out = [r for r in stored if not r.key.startswith(LEGACY_KEY)]
    for r in legacy:
        if any(_redacted(r.data.get(c)) for c in columns if c in r.data and not _skipped(c)):
            continue  # cannot be told apart: it runs again
        row = {c: r.data.get(c) for c in columns}
        key = content_key(row, cases.variants)
        n = seen[key]
        seen[key] += 1
        new = key if n == 0 else f"{key}#{n}"
        mapping[r.key] = new
        out.append(StoredRow(r.index, r.run_id, r.status, r.finished_at, r.data, new, r.fingerprints))
    if mapping:
        store.rekey(state.batch_id or "", mapping)
    return out


def _skipped(column: str) -> bool:
    from nbflow._core.secrets import is_secret_name

    return is_secret_name(column)


def _redacted(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("<redacted")


def _nodes(counts: Counter[str]) -> str:
    names = [f"{n!r} ({k} rows)" for n, k in counts.most_common()]
    return ("node " if len(names) == 1 else "nodes ") + ", ".join(names)
