"""Batch input side: rows + ``columns=`` + ``grid=`` -> cases, checked against the graph before anything runs."""

from __future__ import annotations

import hashlib
import itertools
import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from nbflow._batch.columns import QUESTION_COLUMNS, REUSED_COLUMN
from nbflow._core.errors import (
    BatchError,
    MissingColumnError,
    MissingInputError,
    NbflowWarning,
    TypeValidationError,
    UnknownNodeError,
    _suggest,
    short_repr,
)
from nbflow._core.records import record
from nbflow._core.secrets import Secret, is_secret_name, remark_secrets
from nbflow._graph.graph import Graph, Plan
from nbflow._graph.validate import admits_none

__all__ = [
    "OWN_COLUMNS",
    "SAMPLE_COLUMN",
    "STATUS_COLUMNS",
    "Case",
    "Cases",
    "KeyTexts",
    "Refed",
    "assign_keys",
    "batch_key",
    "check_types",
    "content_key",
    "none_inputs",
    "prepare_cases",
    "refed_frame",
]

# Columns the batch adds to every result row.
STATUS_COLUMNS = ("status", "error_type", "error_message", "error_node", "attempts", "latency", "run_id")
# Those whose text nbflow writes itself (a status word, an exception's type, a node's name, an id): stored as they
# are, never redacted (a secret whose text is also such a word must not garble the row; an error message can quote
# a secret, so it is redacted like any value).
OWN_COLUMNS = frozenset(("status", "error_type", "error_node", "run_id"))
SAMPLE_COLUMN = "sample"  # repeats=N: the repeat index 0..N-1
# Grid keys people use for repeated sampling; such a key feeds no input, so it would not sample anything.
_REPEAT_WORDS = ("repeat", "repeats", "rep", "sample", "samples", "trial", "trials", "run", "iteration", "seed")


@record()
class Case:
    """One run of the batch: the result row's own columns and the flow inputs taken from them."""

    index: int
    row: dict[str, Any]
    inputs: dict[str, Any]
    plan: Plan
    key: str = ""
    """A digest of the row's content (values, grid combination, variant values, repeat): how a
    resumed batch finds the row's stored result, whatever its position; ``#n`` marks the n-th duplicate."""
    sample: int | None = None
    """The repeat index with ``repeats=N`` (None without)."""


@record()
class Cases:
    cases: list[Case]
    columns: list[str]  # row columns then grid keys, in order
    grid_keys: list[str]
    input_columns: dict[str, str]  # column -> flow input
    outputs: list[str]
    index: Any = None  # the input DataFrame's own index, repeated per grid combination (None: 0..n-1)
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)  # grid key -> {name: value}
    repeats: int = 1
    per_row: int = 1  # cases per input row (grid combinations × repeats): case.index // per_row is its row


def _records(rows: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows as a list of dicts plus the column order (first seen): the caller's dicts themselves, never changed."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns") and hasattr(rows, "iloc"):  # a DataFrame
        bad = [c for c in rows.columns if not isinstance(c, str)]
        if bad:
            raise BatchError(
                f"batch rows: column names must be strings, got {bad[0]!r}; rename them (df.columns = [...])"
            )
        if rows.columns.duplicated().any():
            dup = list(rows.columns[rows.columns.duplicated()])
            raise BatchError(f"batch rows: duplicated column names {dup}; give every column its own name")
        found: list[dict[str, Any]] = rows.to_dict("records")
        _remark(found)
        return found, list(rows.columns)
    if isinstance(rows, (str | bytes, Mapping)):
        raise BatchError(
            f"batch rows must be a DataFrame or an iterable of mappings (one per row), got "
            f"{type(rows).__name__}; for a dict of columns use pandas.DataFrame(...), for one row use [row]"
        )
    if not isinstance(rows, Iterable):
        raise BatchError(f"batch rows must be a DataFrame or an iterable of mappings, got {type(rows).__name__}")
    records: list[dict[str, Any]] = []
    seen: dict[str, None] = {}
    last: Any = None  # the previous row's keys: a row with the same keys needs no check (most rows)
    for i, r in enumerate(rows):
        if type(r) is not dict and not isinstance(r, Mapping):
            raise BatchError(
                f"batch row {i} is a {type(r).__name__}, not a mapping; each row must map column names to values"
            )
        # (the caller's own dict, not a copy: nothing changes a case's row, ``remark_secrets`` copies before it
        # marks one; a copy per row was ~180 bytes a row of the batch's peak)
        rec = r if type(r) is dict else dict(r)
        keys = rec.keys()
        if keys != last:
            for k in rec:
                if not isinstance(k, str):
                    raise BatchError(f"batch row {i}: column names must be strings, got {k!r}")
                seen.setdefault(k)
            last = keys
        records.append(rec)
    _remark(records)
    return records, list(seen)


def _remark(records: list[dict[str, Any]]) -> None:
    """Values that are the text of an ``nf.Secret`` but reach the batch as plain ``str`` are marked again."""
    columns = remark_secrets(records)
    if columns:
        warnings.warn(
            f"batch rows: column(s) {columns} hold the text of an nf.Secret as a plain str (pandas turns a column "
            "of nf.Secret into its string dtype); nbflow treats those values as secrets again. To keep the "
            "marking yourself, build the column with dtype=object: pd.Series([...], dtype=object)",
            NbflowWarning,
            stacklevel=4,
        )


def _check_grid(
    grid: Mapping[str, Sequence[Any]] | None, columns: Sequence[str], variants: dict[str, dict[str, Any]]
) -> dict[str, list[Any]]:
    """The grid's values per key; named variants (``{"terse": P1, ...}``) go to ``variants``, names to the values."""
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
        if isinstance(values, Mapping):  # named variants: the column holds the name, the node gets the value
            bad = [k for k in values if not isinstance(k, str) or not k]
            if bad:
                raise BatchError(
                    f"grid[{key!r}] names variants, and {bad[0]!r} is not a name; give non-empty strings as keys, "
                    f'e.g. grid={{{key!r}: {{"terse": ..., "steps": ...}}}}'
                )
            variants[key] = dict(values)
            values = list(values)
        if isinstance(values, (str | bytes)) or not isinstance(values, Iterable):
            raise BatchError(
                f"grid[{key!r}] must be a list of values (or a dict of named variants), got {values!r}; "
                f"wrap a single value in a list: [{values!r}]"
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
    repeats: int = 1,
    labels: Mapping[str, Any] | Iterable[str] | None = None,
    known: Mapping[str, Mapping[str, Any]] | None = None,
) -> Cases:
    """Expand rows × grid × repeats, map columns to flow inputs and plan once per set of columns.

    ``labels`` declares grid keys that feed no input (a list of names), or adds constant label
    columns to every row (a dict). Secret-looking columns are left out of the rows' content keys. A result
    frame of this flow given back runs its rows again (``refed_frame``; ``known``: its batch's real variants).
    Raises BatchError / MissingColumnError / UnknownNodeError before anything runs.
    """
    refed = refed_frame(graph, rows, grid, repeats, known)
    if refed is not None:  # a result frame of this flow given back: its rows, each with its own variants
        rows, grid = refed.rows, refed.grid
        if outputs is None:  # the frame's own output columns again (df.update(new) puts them back)
            outputs = [o for o in refed.outputs if o in graph.nodes] or None
    records, row_columns = _records(rows)
    own_index = _own_index(rows)
    label_names, constants = _check_labels(labels, row_columns)
    if constants:
        records = [{**rec, **constants} for rec in records]
        row_columns = row_columns + list(constants)
    variants: dict[str, dict[str, Any]] = {}
    if refed is not None:
        variants.update(refed.variants)
        label_names.update(refed.grid_keys)
        _check_names(records, refed.variants)
    grid_values = _check_grid(grid, row_columns, variants)
    if repeats > 1 and (SAMPLE_COLUMN in row_columns or SAMPLE_COLUMN in grid_values):
        raise BatchError(
            f"repeats={repeats} adds a {SAMPLE_COLUMN!r} column (the repeat index), and the rows or the grid have "
            f"one already; rename it (e.g. df.rename(columns={{'sample': 'sample_id'}}))"
        )
    all_columns = row_columns + list(grid_values) + ([SAMPLE_COLUMN] if repeats > 1 else [])

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
    _check_grid_keys(graph, grid_values, input_columns, label_names, mapping)
    blank_ok = none_inputs(graph) & set(input_columns.values())

    if isinstance(outputs, str):
        outputs = [outputs]
    out_list = list(outputs) if outputs is not None else [n for n, g in graph.nodes.items() if not g.downstream]
    if len(set(out_list)) != len(out_list):
        raise BatchError(f"outputs= lists a node twice: {out_list}")
    for name in out_list:
        if name not in graph.nodes:
            raise UnknownNodeError(name, graph.nodes, role="output")
    reserved = [n for n in out_list if n in STATUS_COLUMNS]
    if reserved:
        n = reserved[0]
        raise BatchError(
            f"output node {n!r} has the name of a column the batch adds ({', '.join(STATUS_COLUMNS)}), so its "
            f"output could not be told apart in the result; rename the node (@flow.node(name='{n}_value')) "
            f"or leave it out of outputs="
        )
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
    row_samples = refed is not None and refed.sampled  # a re-fed sample keeps its index (per-sample cache keys)
    index = 0
    samples = range(repeats) if repeats > 1 else (None,)
    every_input = frozenset(input_columns.values())
    same_names = all(c == target for c, target in input_columns.items())
    input_names = input_columns.keys()
    for i, rec in enumerate(records):
        for combo in combos:
            for sample in samples:
                # (a dict of its own where the grid or the repeat adds to it; else the caller's row, never changed)
                row = dict(rec) if combo or sample is not None else rec
                if combo:
                    row.update(zip(keys, combo, strict=True))
                if sample is not None:
                    row[SAMPLE_COLUMN] = sample
                if variants:
                    inputs = {
                        input_columns[c]: variants[c][v] if c in variants else v
                        for c, v in row.items()
                        if c in input_columns
                    }
                elif same_names and row.keys() == input_names:  # every column is an input of its own name:
                    inputs = row  # the row is its inputs (neither is changed once made; a run copies its inputs)
                else:
                    inputs = {input_columns[c]: v for c, v in row.items() if c in input_columns}
                if blank_ok:
                    for name in blank_ok:
                        if name in inputs and _is_blank(inputs[name]):
                            if inputs is row:
                                inputs = row.copy()
                            inputs[name] = None
                given = every_input if len(inputs) == len(every_input) else frozenset(inputs)
                plan = plans.get(given)
                if plan is None:
                    plan = plans[given] = _plan(graph, given, out_list, list(row), i)
                own = row.get(SAMPLE_COLUMN) if row_samples else sample
                cases.append(Case(index, row, inputs, plan, "", own))
                index += 1
    per_row = len(combos) * len(samples)
    if own_index is not None and per_row > 1:
        own_index = own_index.repeat(per_row)  # like DataFrame.explode: each row's label, per combination
    if refed is not None:
        keys = [*refed.grid_keys, *keys]
        repeats = refed.repeats
    return Cases(cases, all_columns, keys, input_columns, out_list, own_index, variants, repeats, per_row)


def none_inputs(graph: Graph) -> frozenset[str]:
    """The flow inputs whose every hinted consumer admits ``None``: an empty cell (NaN, ``pd.NA``) feeds them ``None``.

    An input with no hinted consumer keeps what the rows hold (nothing says what empty means there)."""
    found = []
    for name, info in graph.inputs.items():
        hints = [
            getattr(check, "hint", object)
            for node in info.consumers
            for param, check in graph.nodes[node].checks
            if any(d.param == param and d.source == name and not d.is_node for d in graph.nodes[node].deps)
        ]
        if hints and all(admits_none(h) for h in hints):
            found.append(name)
    return frozenset(found)


def _is_blank(value: Any) -> bool:
    """An empty cell as pandas reads it: NaN, ``pd.NA``, ``pd.NaT`` or ``None``."""
    if value is None:
        return True
    if isinstance(value, float):
        return value != value  # NaN (numpy's float64 too)
    return type(value).__name__ in ("NAType", "NaTType")


def check_types(graph: Graph, cases: Cases, limit: int = 3) -> None:
    """Check every case's inputs against the hints of the nodes that take them, before anything runs.

    Raises BatchError naming the row (its position in the rows given) and the column of each of the
    first ``limit`` values that do not fit, and how many more there are. ``flow.batch`` itself leaves a
    bad value to fail its row; the ``nbflow batch`` command calls this for a cases file.
    """
    consumers: dict[str, list[tuple[str, Any]]] = {}
    for name in set(cases.input_columns.values()):
        consumers[name] = [
            (node, check)
            for node in graph.inputs[name].consumers
            for param, check in graph.nodes[node].checks
            if any(d.param == param and d.source == name and not d.is_node for d in graph.nodes[node].deps)
        ]
    problems: list[str] = []
    bad_rows: set[int] = set()
    for case in cases.cases:
        wrong = None
        for column, name in cases.input_columns.items():
            if name not in case.inputs:
                continue
            value = case.inputs[name]
            for node, check in consumers[name]:
                if node not in case.plan.nodes or node in case.plan.overridden:
                    continue
                try:
                    check(value)
                except TypeValidationError as exc:
                    where = (
                        f"grid value {column}={short_repr(case.row.get(column))}"
                        if column in cases.grid_keys
                        else f"column {column!r}"
                    )
                    wrong = (
                        f"row {case.index // cases.per_row}, {where}: got {short_repr(value)} "
                        f"({type(value).__name__}), expected {exc.expected} (node {node!r}, parameter {exc.parameter!r})"
                    )
                    break
            if wrong:
                break
        if wrong:
            bad_rows.add(case.index // cases.per_row)
            if len(problems) < limit:
                problems.append(wrong)
    if problems:
        more = f"; and {len(bad_rows) - len(problems)} more row(s)" if len(bad_rows) > len(problems) else ""
        raise BatchError(
            f"{'; '.join(problems)}{more}. Nothing ran: fix those cells (an empty cell is None only for an input "
            f"whose hint admits None, e.g. int | None)"
        )


@record()
class Refed:
    """A batch result frame given back to ``flow.batch`` (``refed_frame``)."""

    rows: Any  # the frame without the columns the batch added
    grid: dict[str, Any] | None  # what is left of grid=: keys the frame does not have (crossed as usual)
    variants: dict[str, dict[str, Any]]  # grid column of the frame -> {name: value}
    grid_keys: list[str]  # the frame's grid columns: labels of each row's variant
    sampled: bool  # the frame has its repeats' ``sample`` column
    repeats: int
    outputs: list[str]  # the frame's output nodes


def refed_frame(
    graph: Graph,
    rows: Any,
    grid: Mapping[str, Any] | None,
    repeats: int,
    known: Mapping[str, Mapping[str, Any]] | None = None,
) -> Refed | None:
    """``rows`` as the rows of a result frame of this flow given back (all rows or a filtered subset), else None.

    The columns the batch added go (outputs, flattened ``node.field`` columns, status, question, usage, reused);
    the grid columns stay as labels (and the frame's outputs are the default ``outputs=``), and a named variant's column gives the node its *value*: from ``grid=``
    given again (its keys the frame has are not crossed again), else from ``known`` (the real values of the
    frame's own batch, when it ran in this process), else from ``frame.attrs["variants"]`` when they are exact (not a repr). BatchError otherwise.
    """
    attrs = getattr(rows, "attrs", None)
    columns = getattr(rows, "columns", None)
    if not isinstance(attrs, dict) or columns is None or attrs.get("flow") != graph.name:
        return None
    if "status" not in columns or "run_id" not in columns:
        return None
    from nbflow._core.usage import USAGE_COLUMNS

    outputs = [o for o in attrs.get("outputs") or [] if isinstance(o, str)]
    added = {*outputs, *STATUS_COLUMNS, *QUESTION_COLUMNS, *USAGE_COLUMNS, REUSED_COLUMN}
    prefixes = tuple(f"{o}." for o in outputs)
    drop = [c for c in columns if c in added or (isinstance(c, str) and c.startswith(prefixes))]
    frame = rows.drop(columns=drop)
    frame.attrs = {}
    keys = [k for k in attrs.get("grid") or [] if k in frame.columns]
    given = dict(grid or {})
    named = attrs.get("variants") or {}
    variants: dict[str, dict[str, Any]] = {}
    for key in keys:
        if key in given:
            values = given.pop(key)
            if isinstance(values, Mapping):
                variants[key] = dict(values)
            continue  # (a plain list: the column holds the value itself)
        if key not in named:
            continue
        real = (known or {}).get(key)
        if real is None:
            if not attrs.get("variants_exact"):
                raise BatchError(
                    f"batch rows: this result frame's column {key!r} holds variant names, and their values are not "
                    f"known here (a frame read back from a file, whose variants are kept by their repr); pass the "
                    f"variants again: grid={{{key!r}: {{{', '.join(repr(n) + ': ...' for n in named[key])}}}}}"
                )
            real = named[key]
        variants[key] = dict(real)
    sampled = int(attrs.get("repeats") or 1) > 1 and SAMPLE_COLUMN in frame.columns
    if sampled and repeats > 1:
        raise BatchError(
            f"repeats={repeats}: these rows are samples of a batch run with repeats={attrs.get('repeats')} (their "
            f"{SAMPLE_COLUMN!r} column); give them back without repeats= to run each sample again"
        )
    return Refed(
        frame, given or None, variants, keys, sampled, int(attrs.get("repeats") or 1) if sampled else 1, outputs
    )


def _check_names(records: list[dict[str, Any]], variants: Mapping[str, Mapping[str, Any]]) -> None:
    """Every re-fed row's variant name is one of its key's variants."""
    for key, named in variants.items():
        for i, rec in enumerate(records):
            name = rec.get(key)
            if not isinstance(name, str) or name not in named:
                raise BatchError(
                    f"batch row {i}: column {key!r} holds {name!r}, which is not one of its variants "
                    f"({', '.join(map(repr, named))}); pass grid={{{key!r}: {{...}}}} with every name the rows use"
                )


def assign_keys(cases: Cases) -> KeyTexts:
    """Give every case its content key (only batches with a store need them).

    Secret-looking columns are left out, as in ``batch_key``; the n-th duplicate gets ``#n``. Returns
    each row's values as the keys hashed them, for ``batch_key`` to hash again instead of encoding
    every row a second time.
    """
    skip = {c for c in cases.columns if is_secret_name(c)}
    variants = cases.variants
    seen: dict[str, int] = {}
    texts: list[str] = []
    sha256 = hashlib.sha256
    for case in cases.cases:
        row = case.row
        text = _values_text(row, skip)
        texts.append(text)
        used = {k: variants[k][row[k]] for k in variants if k in row} if variants else None
        key = sha256((f"[{text}, {_key_text(used)}]" if used else text).encode()).hexdigest()[:32]
        n = seen.get(key, 0)
        seen[key] = n + 1
        case.key = key if n == 0 else f"{key}#{n}"
    return KeyTexts(frozenset(skip), texts)


@record(frozen=True)
class KeyTexts:
    """Each case's values as ``assign_keys`` encoded them (``skip``: the columns left out)."""

    skip: frozenset[str]
    texts: list[str]


def _check_labels(
    labels: Mapping[str, Any] | Iterable[str] | None, columns: Sequence[str]
) -> tuple[set[str], dict[str, Any]]:
    """(grid keys declared as labels, constant label columns to add)."""
    if labels is None:
        return set(), {}
    if isinstance(labels, Mapping):
        for k in labels:
            if not isinstance(k, str) or not k:
                raise BatchError(f"labels= keys are column names (non-empty strings), got {k!r}")
            if k in columns:
                raise BatchError(f"labels= adds column {k!r}, which the rows have already; rename one of them")
        return set(labels), dict(labels)
    if isinstance(labels, str | bytes) or not isinstance(labels, Iterable):
        raise BatchError(
            f"labels= is a list of grid keys that feed no input, or a dict of label columns to add; got {labels!r}"
        )
    names = list(labels)
    for k in names:
        if not isinstance(k, str):
            raise BatchError(f"labels= lists column names (strings), got {k!r}")
    return set(names), {}


def _check_grid_keys(
    graph: Graph,
    grid: Mapping[str, Any],
    input_columns: Mapping[str, str],
    labels: set[str],
    mapping: Mapping[str, str],
) -> None:
    """A grid key must feed a flow input or be declared a label: a typo would silently run the default."""
    for key in grid:
        if key in input_columns or key in labels:
            continue
        candidates = [*graph.inputs, *(c for c in mapping if c not in grid)]
        hint = _suggest(key, candidates)
        if not hint and key.lower() in _REPEAT_WORDS:
            hint = (
                f"; for repeated sampling use repeats=N (a {SAMPLE_COLUMN!r} column, each sample a distinct call "
                f"of nodes declared cache='per-sample')"
            )
        raise BatchError(
            f"grid key {key!r} is not an input of flow {graph.name!r}{hint}, so every variant would run the same; "
            f"its inputs: {', '.join(sorted(graph.inputs)) or '(none)'}. Map it with columns={{{key!r}: '<input>'}}, "
            f"or declare it a label column with labels=[{key!r}]"
        )


# json.dumps(..., sort_keys=True, default=repr) with one encoder: dumps builds a new one per call with
# non-default options, which was most of the per-row cost of the two keys below.
_key_json = json.JSONEncoder(sort_keys=True, default=repr).encode


def _make_key_text() -> Any:
    """``_key_json`` (the same text) without the C encoder ``JSONEncoder.encode`` builds for every value.

    Built without a cycle check (``markers``): a value holding itself recurses until RecursionError,
    and is then encoded again by ``_key_json`` for its usual error."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return _key_json
    one = make(None, repr, encoder.encode_basestring_ascii, None, ": ", ", ", True, False, True)
    join = "".join

    def text(value: Any) -> str:
        if type(value) is str:  # (JSONEncoder.encode's own shortcut for a top-level string)
            return _key_json(value)
        try:
            return join(one(value, 0))
        except RecursionError:
            return _key_json(value)

    return text


_key_text = _make_key_text()
_PLAIN_KEY = frozenset({int, float, bool, str, type(None)})  # cells a key encodes as they are (no Secret)


def _values_text(row: Mapping[str, Any], skip: set[str] | frozenset[str]) -> str:
    """The JSON a content key hashes for ``row``'s values: secret columns left out, ``nf.Secret`` as ``***``."""
    if not skip and type(row) is dict:
        for v in row.values():
            if type(v) not in _PLAIN_KEY:
                break
        else:  # every cell a plain scalar (the common row): the row is its own value
            return _key_text(row)
    return _key_text({k: "***" if isinstance(v, Secret) else v for k, v in row.items() if k not in skip})


def content_key(row: Mapping[str, Any], variants: Mapping[str, Mapping[str, Any]], skip: set[str] | None = None) -> str:
    """A digest of what the row runs with: its values (secret columns left out) and its variants' values."""
    if skip is None:
        skip = {c for c in row if is_secret_name(c)}
    text = _values_text(row, skip)
    used = {k: variants[k][row[k]] for k in variants if k in row}
    if used:  # (the text of the list [values, used])
        text = f"[{text}, {_key_text(used)}]"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


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


def batch_key(flow: str, cases: Cases, secret: Iterable[str], known: KeyTexts | None = None) -> str:
    """A stable id for "the same batch": flow name, outputs, input mapping and every row's values.

    ``known``: what ``assign_keys`` returned for these cases; its texts are hashed when they left out
    the same columns (not encoded a second time)."""
    skip = set(secret)
    h = hashlib.sha256()
    head = {"flow": flow, "outputs": cases.outputs, "inputs": cases.input_columns, "grid": cases.grid_keys}
    h.update(json.dumps(head, sort_keys=True).encode())
    if known is not None and known.skip == skip and len(known.texts) == len(cases.cases):
        if known.texts:
            h.update(("\n".join(known.texts) + "\n").encode())
    else:
        for case in cases.cases:
            h.update(_values_text(case.row, skip).encode())
            h.update(b"\n")
    if cases.variants:  # the values named variants stand for (editing a prompt makes a new batch)
        h.update(json.dumps(cases.variants, sort_keys=True, default=repr).encode())
    return f"{flow}-{h.hexdigest()[:16]}"
