"""Resuming a stored batch: which stored rows are still valid for the rows and the flow given now.

A stored row is reused only if

* its **content key** matches a row of this call (row values + grid combination + variant values +
  repeat, duplicates numbered in order) — never its position, so rows given in another order, a
  subset or a superset all find their own results; and
* none of the nodes the row runs **changed** since it was stored: each row remembers the flow's
  per-node fingerprints (``nbflow._engine.caching.node_fingerprints``, the cache's own rule: code,
  declaration and the simple globals it reads). ``resume=True`` re-runs rows that depend on a
  changed node and says how many and why; ``resume="strict"`` refuses, naming the nodes.

A row that runs again runs **from its changed nodes** (``_fed``): they and what depends on them run, every
other node is fed its stored output (the row's kept run, ``BatchStore.kept_outputs``; else a succeeded row's
own output columns) as an override marked ``cached`` in the new run. ``reuse="name"`` applies the same to the
rows of another stored batch, copying the rows that changed nothing into this one.

Rows of a version 1 store (no key, no fingerprints) are re-keyed from their stored values once;
their fingerprints are unknown: ``resume=True`` reuses them with a warning, ``"strict"`` refuses.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nbflow._batch.cases import STATUS_COLUMNS, content_key
from nbflow._batch.columns import REUSED_COLUMN
from nbflow._batch.rows import FINISHED, Fed
from nbflow._core.errors import NbflowWarning, StoreError
from nbflow._core.usage import USAGE_COLUMNS
from nbflow._store.batch_store import LEGACY_KEY, BatchStore, StoredRow, holds_redaction

if TYPE_CHECKING:
    from nbflow._batch.rows import Options, State
    from nbflow._graph.graph import Graph
    from nbflow._record.batch_progress import BatchProgress

__all__ = ["STRICT", "reuse_rows"]

STRICT = "strict"


def reuse_rows(
    state: State,
    store: BatchStore,
    stored: list[StoredRow],
    current: Mapping[str, str | None],
    progress: BatchProgress,
    borrowed: list[StoredRow] | None = None,
) -> list[int]:
    """Fill ``state.results`` with the stored rows still valid; return the indices of the rows to run.

    ``borrowed``: the rows of another stored batch named by ``reuse=`` (this batch's own ``stored`` rows win);
    the rows taken from it whole are copied into this batch (``state.copied``). A row that changed runs again
    from its changed nodes, fed the others' stored outputs where the store kept them (``state.fed``).
    """
    opts, cases = state.opts, state.cases
    assert state.batch_id is not None
    by_key = {r.key: r for r in borrowed or () if not r.key.startswith(LEGACY_KEY)}
    own = {r.key: r for r in _rekeyed(state, store, stored)}
    by_key.update(own)
    graph = state.flow.graph
    changed_by: Counter[str] = Counter()
    added: set[str] = set()  # nodes the stored rows did not have (a new scorer)
    not_kept: Counter[str] = Counter()
    unknown: list[int] = []
    rerun = 0
    todo: list[int] = []
    reuse: list[tuple[int, StoredRow]] = []
    for i, case in enumerate(cases.cases):
        old = by_key.get(case.key)
        if old is None or old.status not in FINISHED:
            todo.append(i)
            continue
        # A row paused in the batch named by reuse= asks again here, in a run of its own: taken whole, it would share
        # that batch's paused run (an answer given here would resume the other batch's row).
        retry = (opts.retry_failed and old.status == "failed") or (
            old.status == "paused" and own.get(old.key) is not old
        )
        if old.fingerprints is None:
            if retry:
                todo.append(i)
                continue
            unknown.append(i)
            reuse.append((i, old))
            continue
        changed = [n for n in case.plan.nodes if current.get(n) is None or old.fingerprints.get(n) != current.get(n)]
        if changed:
            changed_by.update(changed)
            added.update(n for n in changed if n not in old.fingerprints)
            rerun += 1
        elif not retry:
            reuse.append((i, old))
            continue
        todo.append(i)
        if opts.executor is None:  # (rows sent to Dask run whole)
            fed = _fed(state, store, graph, i, old, changed, not_kept)
            if fed is not None:
                state.fed[i] = fed
    where = f"store {store.path!r}, batch {state.batch_id!r}"
    if opts.resume == STRICT and (changed_by or unknown):
        if changed_by:
            raise StoreError(
                f"{where}: {rerun} stored rows were computed by another version of {_nodes(changed_by)} "
                f"(code, declaration, globals or closure settings changed); resume='strict' refuses to mix them. "
                f"Pass resume=True to re-run exactly those rows, or restore the nodes' code"
            )
        raise StoreError(
            f"{where}: {len(unknown)} stored rows come from an nbflow that did not record node fingerprints, so "
            f"whether the flow changed since cannot be checked; resume='strict' refuses them. Pass resume=True "
            f"to reuse them anyway, or store.delete_batch({state.batch_id!r}) to start over"
        )
    if changed_by:
        partial = len(state.fed)
        how = (
            f"; {partial} of them run only those nodes and what depends on them, fed the other nodes' stored outputs"
            if partial
            else ""
        )
        edited = Counter({n: k for n, k in changed_by.items() if n not in added})
        new = Counter({n: k for n, k in changed_by.items() if n in added})
        why = (
            [f"{_nodes(edited)} changed since they were stored (code, declaration, globals or closure settings)"]
            if edited
            else []
        )
        if new:
            why.append(f"{_nodes(new)} {'is' if len(new) == 1 else 'are'} new")
        warnings.warn(
            f"{_verb(opts)}: {rerun} of the stored rows run again because {' and '.join(why)}{how}; "
            f"{len(reuse)} stored rows reused",
            NbflowWarning,
            stacklevel=5,
        )
    if not_kept:
        warnings.warn(
            f"{_verb(opts)}: {_nodes(not_kept)} ran again although unchanged: the store did not keep their outputs "
            f"(the rows' runs were not kept: keep='none' or 'failed', or a value it could not store). keep='all' "
            f"(the default with a store) keeps every node's output for re-use; docs/batch.md",
            NbflowWarning,
            stacklevel=5,
        )
    if unknown:
        warnings.warn(
            f"{_verb(opts)}: {len(unknown)} stored rows of {where} were written before nbflow recorded node "
            f"fingerprints; they are reused without checking whether the flow changed since (resume='strict' "
            f"refuses them)",
            NbflowWarning,
            stacklevel=5,
        )
    moved = {old.key: i for i, old in reuse if old.index != i and own.get(old.key) is old}
    if moved:  # the store shows the rows in the order of the latest call (nf.load_batch)
        store.reindex(state.batch_id, moved)
    # (rows that have a column of that name keep theirs: the run records still mark what was reused)
    taken = REUSED_COLUMN in cases.columns or REUSED_COLUMN in cases.outputs
    state.reused = (bool(state.fed) or borrowed is not None) and not taken
    for i, old in reuse:
        case = cases.cases[i]
        result = dict(case.row)  # inputs come from the rows given now (secrets were never stored)
        for col in (*cases.outputs, *STATUS_COLUMNS):
            result[col] = old.data.get(col)
        for col, value in old.data.items():  # usage columns and anything else the row recorded
            result.setdefault(col, value)
        if state.reused:
            result[REUSED_COLUMN] = sorted(case.plan.nodes)  # every node: the whole row was reused
        state.results[i] = result
        if own.get(old.key) is not old:
            state.copied.append(i)  # a row of the batch named by reuse=: written into this one
        progress.resumed += 1
    state.rerun = dict(changed_by)
    return todo


def _fed(
    state: State,
    store: BatchStore,
    graph: Graph,
    i: int,
    old: StoredRow,
    changed: list[str],
    not_kept: Counter[str],
) -> Fed | None:
    """How stored row ``old`` runs again from its changed nodes (None: the whole row runs).

    Runs again: the changed nodes, in a failed row every node that did not succeed, and everything downstream of
    them. Fed: every other node's stored output, from the row's kept run (``keep="all"``), else, for a row that
    succeeded, the output columns of the row itself. A node the re-run needs whose output the store did not keep
    runs again too (counted in ``not_kept``), and so on upstream.
    """
    case = state.cases.cases[i]
    planned = case.plan.nodes
    outputs = state.cases.outputs
    kept = store.kept_outputs(old.run_id) if old.run_id else None
    secret: set[str] = set()  # outputs that held a secret's text: never stored, so their nodes run again
    if kept is not None:
        values = dict(kept.outputs)
        secret.update(kept.redacted)
    elif old.status == "succeeded":  # the row's own output columns (every node of a succeeded row succeeded)
        values = {o: old.data[o] for o in outputs if o in old.data}
        secret.update(o for o, v in values.items() if holds_redaction(v))
        for o in secret:
            del values[o]
    else:
        return None  # which nodes of a failed row succeeded is not known
    again = set(changed)
    if old.status != "succeeded":
        if kept is None:
            return None
        again.update(n for n in planned if kept.statuses.get(n) != "succeeded")
    nodes = graph.nodes
    while True:
        for n in planned:  # topological: a node runs again when something it reads does
            if n not in again and any(u in again for u in nodes[n].upstream):
                again.add(n)
        needed = {u for n in again for u in nodes[n].upstream if u not in again}
        needed.update(o for o in outputs if o not in again)
        missing = needed - values.keys()
        if not missing:
            break
        not_kept.update(missing - secret)
        again.update(missing)
    if again.issuperset(planned):
        return None
    fed = {n: values[n] for n in planned if n not in again and n in values}
    # Targets: the outputs, and every fed node (so the row's run records the whole row, reused nodes included).
    plan = graph.plan(case.plan.inputs, sorted({*outputs, *fed}), fed)
    origin = f"run:{old.run_id}"
    usage = {c: old.data[c] for c in USAGE_COLUMNS if c in old.data}
    return Fed(plan, fed, dict.fromkeys(fed, origin), usage)


def _verb(opts: Options) -> str:
    return f"reuse={opts.reuse!r}" if opts.reuse is not None and not opts.resume else "resume"


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
