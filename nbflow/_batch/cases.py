"""Batch input side: rows + ``columns=`` + ``grid=`` -> cases, checked against the graph before anything runs."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbflow._core.errors import BatchError, MissingColumnError, MissingInputError, UnknownNodeError, _suggest
from nbflow._core.secrets import Secret
from nbflow._graph.graph import Graph, Plan

__all__ = ["STATUS_COLUMNS", "Case", "Cases", "batch_key", "prepare_cases"]

# Columns the batch adds to every result row.
STATUS_COLUMNS = ("status", "error_type", "error_message", "error_node", "attempts", "latency", "run_id")


@dataclass(slots=True)
class Case:
    """One run of the batch: the result row's own columns and the flow inputs taken from them."""

    index: int
    row: dict[str, Any]
    inputs: dict[str, Any]
    plan: Plan


@dataclass(slots=True)
class Cases:
    cases: list[Case]
    columns: list[str]  # row columns then grid keys, in order
    grid_keys: list[str]
    input_columns: dict[str, str]  # column -> flow input
    outputs: list[str]
    index: Any = None  # the input DataFrame's own index, repeated per grid combination (None: 0..n-1)


def _records(rows: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows as a list of dicts plus the column order (first seen)."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns") and hasattr(rows, "iloc"):  # a DataFrame
        bad = [c for c in rows.columns if not isinstance(c, str)]
        if bad:
            raise BatchError(
                f"batch rows: column names must be strings, got {bad[0]!r}; rename them (df.columns = [...])"
            )
        if rows.columns.duplicated().any():
            dup = list(rows.columns[rows.columns.duplicated()])
            raise BatchError(f"batch rows: duplicated column names {dup}; give every column its own name")
        return rows.to_dict("records"), list(rows.columns)
    if isinstance(rows, (str | bytes, Mapping)):
        raise BatchError(
            f"batch rows must be a DataFrame or an iterable of mappings (one per row), got "
            f"{type(rows).__name__}; for a dict of columns use pandas.DataFrame(...), for one row use [row]"
        )
    if not isinstance(rows, Iterable):
        raise BatchError(f"batch rows must be a DataFrame or an iterable of mappings, got {type(rows).__name__}")
    records: list[dict[str, Any]] = []
    seen: dict[str, None] = {}
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise BatchError(
                f"batch row {i} is a {type(r).__name__}, not a mapping; each row must map column names to values"
            )
        rec = dict(r)
        for k in rec:
            if not isinstance(k, str):
                raise BatchError(f"batch row {i}: column names must be strings, got {k!r}")
            seen.setdefault(k)
        records.append(rec)
    return records, list(seen)


def _check_grid(grid: Mapping[str, Sequence[Any]] | None, columns: Sequence[str]) -> dict[str, list[Any]]:
    if grid is None:
        return {}
    if not isinstance(grid, Mapping):
        raise BatchError(f"grid= must map a column name to a list of values, got {type(grid).__name__}")
    out: dict[str, list[Any]] = {}
    for key, values in grid.items():
        if not isinstance(key, str):
            raise BatchError(f"grid= keys are column names (strings), got {key!r}")
        if key in columns:
            raise BatchError(
                f"grid key {key!r} is also a column of the rows; rename one of them (the grid key becomes a column)"
            )
        if isinstance(values, (str | bytes, Mapping)) or not isinstance(values, Iterable):
            raise BatchError(
                f"grid[{key!r}] must be a list of values, got {values!r}; wrap a single value in a list: [{values!r}]"
            )
        values = list(values)
        if not values:
            raise BatchError(f"grid[{key!r}] is empty; give at least one value or drop the key")
        out[key] = values
    return out


def prepare_cases(
    graph: Graph,
    rows: Any,
    columns: Mapping[str, str] | None,
    grid: Mapping[str, Sequence[Any]] | None,
    outputs: Iterable[str] | str | None,
) -> Cases:
    """Expand rows × grid, map columns to flow inputs and plan once per set of columns.

    Raises BatchError / MissingColumnError / UnknownNodeError before anything runs.
    """
    records, row_columns = _records(rows)
    own_index = _own_index(rows)
    grid_values = _check_grid(grid, row_columns)
    all_columns = row_columns + list(grid_values)

    mapping = dict(columns or {})
    for col, target in mapping.items():
        if col not in all_columns:
            raise BatchError(
                f"columns= maps {col!r}, which is not a column of the rows or a grid key{_suggest(col, all_columns)}; "
                f"columns: {', '.join(repr(c) for c in all_columns) or '(none)'}"
            )
        if not isinstance(target, str) or target not in graph.inputs:
            raise BatchError(
                f"columns= maps {col!r} to {target!r}, which is not an input of flow {graph.name!r}"
                f"{_suggest(str(target), graph.inputs)}; its inputs: {', '.join(sorted(graph.inputs)) or '(none)'}"
            )
    input_columns: dict[str, str] = {}
    fed_by: dict[str, str] = {}
    for col in all_columns:
        target = mapping.get(col, col)
        if target not in graph.inputs:
            continue  # carried through untouched
        if target in fed_by:
            raise BatchError(
                f"flow input {target!r} would be fed by two columns, {fed_by[target]!r} and {col!r}; "
                f"map only one of them (columns=) or rename the other"
            )
        fed_by[target] = col
        input_columns[col] = target

    if isinstance(outputs, str):
        outputs = [outputs]
    out_list = list(outputs) if outputs is not None else [n for n, g in graph.nodes.items() if not g.downstream]
    if len(set(out_list)) != len(out_list):
        raise BatchError(f"outputs= lists a node twice: {out_list}")
    for name in out_list:
        if name not in graph.nodes:
            raise UnknownNodeError(name, graph.nodes, role="output")
    clash = [c for c in all_columns if c in out_list or c in STATUS_COLUMNS]
    if clash:
        c = clash[0]
        what = "an output node" if c in out_list else "a column the batch adds"
        raise BatchError(
            f"column {c!r} has the name of {what}; rename the column (e.g. df.rename(columns={{{c!r}: "
            f"'{c}_expected'}})) so both fit in the result"
        )

    plans: dict[frozenset[str], Plan] = {}
    cases: list[Case] = []
    combos = list(itertools.product(*grid_values.values())) if grid_values else [()]
    keys = list(grid_values)
    index = 0
    for i, rec in enumerate(records):
        for combo in combos:
            row = dict(rec)
            if combo:
                row.update(zip(keys, combo, strict=True))
            inputs = {input_columns[c]: v for c, v in row.items() if c in input_columns}
            key = frozenset(inputs)
            plan = plans.get(key)
            if plan is None:
                plan = plans[key] = _plan(graph, key, out_list, list(row), i)
            cases.append(Case(index, row, inputs, plan))
            index += 1
    if own_index is not None and len(combos) > 1:
        own_index = own_index.repeat(len(combos))  # like DataFrame.explode: each row's label, per combination
    return Cases(cases, all_columns, keys, input_columns, out_list, own_index)


def _own_index(rows: Any) -> Any:
    """A DataFrame's index unless it is the default 0..n-1 (then the result gets a fresh one)."""
    index = getattr(rows, "index", None)
    if index is None or not hasattr(rows, "columns"):
        return None
    if type(index).__name__ == "RangeIndex" and index.start == 0 and index.step == 1 and index.name is None:
        return None
    return index


def _plan(graph: Graph, given: frozenset[str], outputs: list[str], columns: list[str], row: int) -> Plan:
    try:
        return graph.plan(sorted(given), outputs)
    except MissingInputError as exc:
        err = MissingColumnError(exc.missing, columns)
        if row:
            err.args = (f"batch row {row}: {err.args[0]}",)
        raise err from None


def batch_key(flow: str, cases: Cases, secret: Iterable[str]) -> str:
    """A stable id for "the same batch": flow name, outputs, input mapping and every row's values."""
    skip = set(secret)
    h = hashlib.sha256()
    head = {"flow": flow, "outputs": cases.outputs, "inputs": cases.input_columns, "grid": cases.grid_keys}
    h.update(json.dumps(head, sort_keys=True).encode())
    for case in cases.cases:
        values = {k: "***" if isinstance(v, Secret) else v for k, v in case.row.items() if k not in skip}
        h.update(json.dumps(values, sort_keys=True, default=repr).encode())
        h.update(b"\n")
    return f"{flow}-{h.hexdigest()[:16]}"
