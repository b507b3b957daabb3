"""``nf.explore(df)``: a batch result as a results explorer in the notebook.

Per-variant status bars; a paged table (50 rows a page, sent as data, not as one HTML blob, so it stays
fast at 10,000 rows) filtered by status and variant and sorted by latency or any numeric output
(a score); clicking a row opens its run view beside the table (the row's run must have been kept:
``keep=``, or ``store=``); "compare variants" shows each case once with every variant's outputs and
status side by side, each variant's change against the chosen baseline (default: the first name) and
``nf.compare``'s verdict in its note; a scorer's explanation (``nf.Score``) follows its score; paused rows get
their answer buttons inline. The DataFrame's own repr is untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbflow._batch.cases import OWN_COLUMNS, STATUS_COLUMNS
from nbflow._batch.columns import QUESTION_COLUMNS, REUSED_COLUMN
from nbflow._batch.compare import classify, compare
from nbflow._batch.runs import FrameRuns, unopenable
from nbflow._batch.save import frame_secrets
from nbflow._batch.variants import MASK, count_by_variant, short, variant_labels
from nbflow._core.errors import BatchError
from nbflow._core.registry import flow_of
from nbflow._core.secrets import Redactor, Secret, is_secret_name

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PAGE", "SNAPSHOT_ROWS", "explore", "query", "snapshot_state"]

PAGE = 50


def explore(frame: pd.DataFrame) -> Any:
    """The results explorer widget for a batch frame (see the module docstring)."""
    if "status" not in frame.columns or "run_id" not in frame.columns:
        raise BatchError("nf.explore(df) takes a frame returned by flow.batch (it needs 'status' and 'run_id' columns)")
    from nbflow.widgets.explorer import ExplorerView

    accessor = FrameRuns(frame)
    redact = secrets_of(frame)
    variants = _variant_labels(frame, redact)
    static = {
        "statuses": sorted(frame["status"].astype(str).unique()),
        "variants": sorted(set(variants)) if variants is not None else [],
        "sorts": ["", *[f"{c} {d}" for c in _numeric(frame) for d in ("↓", "↑")]],
    }

    def open_row(pos: int) -> Any:
        return accessor._run_of(frame.iloc[pos], frame.index[pos])

    def answer(pos: int, value: Any) -> None:
        run = accessor._run_of(frame.iloc[pos], frame.index[pos])
        flow_of(run).answer(frame, {frame.index[pos]: _unmasked(run, value, redact)})

    verdicts: dict[str, str] = {}  # compare mode's verdict line (nf.compare) per baseline, computed on first use

    def state(request: dict[str, Any]) -> dict[str, Any]:
        out = query(frame, request, redact)
        if out["query"]["mode"] == "compare":
            base = str(out["query"].get("baseline") or "")
            if base not in verdicts:
                verdicts[base] = _verdict(frame, base)
            out["note"] = "; ".join(n for n in (out["note"], verdicts[base]) if n)
        return out

    # The state goes through the redactor once more as a whole: nothing the browser gets holds a secret.
    return ExplorerView(
        lambda request: redact.scrub(state(request)),
        open_row,
        answer,
        static,
        size=len(frame),
        snapshot=lambda: redact.scrub(snapshot_state(frame, redact)),
    )


SNAPSHOT_ROWS = 50  # rows a saved notebook's static snapshot of the explorer lists (problems first)


def snapshot_state(frame: pd.DataFrame, redact: Redactor | None = None) -> dict[str, Any]:
    """What the explorer's static snapshot shows (saved notebooks, nbconvert): the per-variant bars, the summary
    (``nf.summarize``) and up to ``SNAPSHOT_ROWS`` rows, the failed and paused ones first, from ``query``'s rows."""
    from nbflow._batch.summary import summarize

    statuses = frame["status"].astype(str).tolist()
    problems = [p for p, s in enumerate(statuses) if s in ("failed", "paused")]
    rest = [p for p, s in enumerate(statuses) if s not in ("failed", "paused")]
    positions = (problems + rest)[:SNAPSHOT_ROWS]
    rows, columns = _rows(frame, positions, redact)
    try:
        table = summarize(frame)
        summary = [{str(k): v for k, v in rec.items()} for rec in table.reset_index().to_dict("records")]
    except Exception:  # a snapshot must never break the display
        summary = []
    return {
        "progress": _progress(frame, _variant_labels(frame, redact)),
        "columns": columns,
        "rows": rows,
        "total": len(frame),
        "problems": len(problems),
        "summary": summary,
    }


_VERDICT_MAX_ROWS = 20_000  # (a paired bootstrap per score: past this, compare mode opens without it)


def _verdict(frame: pd.DataFrame, baseline: str = "") -> str:
    """nf.compare's verdict for the explorer's compare mode: each variant against the baseline (the explorer's
    choice, else the first by name), for a batch with one grid key that is not secret-named; "" when it does
    not apply."""
    keys = [k for k in frame.attrs.get("grid") or [] if k in frame.columns]
    if len(keys) != 1 or is_secret_name(keys[0]) or len(frame) > _VERDICT_MAX_ROWS:
        return ""
    key = keys[0]
    names = sorted(frame[key].dropna().unique().tolist(), key=str)
    if len(names) < 2:
        return ""
    base = next((n for n in names if str(n) == baseline), names[0])
    try:
        if len(names) == 2:
            other = next(n for n in names if n is not base)
            return str(compare(frame, base, other, by=key).attrs["verdict"])
        return str(compare(frame, by=key, baseline=base).attrs["verdict"])
    except BatchError:  # no score column, cases that do not pair: the table still shows the cases
        return ""


def secrets_of(frame: pd.DataFrame, *more: pd.DataFrame) -> Redactor:
    """A redactor with the widgets' mask for every secret value in ``frame``'s input columns (``frame_secrets``:
    the rule ``df.nbflow.save`` applies too), and in ``more`` frames' (two sides of a comparison). Outputs, error
    messages and questions built from those values are then redacted wherever the explorer shows them."""
    redact = frame_secrets(frame, MASK)
    for other in more:
        frame_secrets(other, MASK, into=redact)
    return redact


def _unmasked(run: Any, value: Any, redact: Redactor) -> Any:
    """The option a click meant: the browser was sent options with secret text masked, and sends one back."""
    for question in (getattr(run, "pending", None) or {}).values():
        for option in question.options or ():
            if option == value:
                return value
            if redact(str(option)) == value:
                return option
    return value


def _variant_labels(frame: pd.DataFrame, redact: Redactor | None = None) -> list[str] | None:
    keys = [k for k in frame.attrs.get("grid") or [] if k in frame.columns]
    if not keys:
        return None
    return variant_labels(keys, frame[keys].itertuples(index=False), redact)


def _cell_text(name: str, value: Any, redact: Redactor | None) -> str:
    """``value`` as text with secrets masked (before any shortening: a cut secret would still leak); the batch's own
    columns as they are (``OWN_COLUMNS``: a secret whose text is a status must not garble the status column)."""
    if is_secret_name(name) or isinstance(value, Secret):
        return MASK
    text = str(value)
    return redact(text) if redact and name not in OWN_COLUMNS else text


def _numeric(frame: pd.DataFrame) -> list[str]:
    outputs = [o for o in frame.attrs.get("outputs") or [] if o in frame.columns]
    cols = [c for c in outputs if str(frame[c].dtype).startswith(("float", "int", "bool"))]
    return [*cols, "latency"] if "latency" in frame.columns else cols


def _cell(name: str, value: Any, redact: Redactor | None = None) -> Any:
    if is_secret_name(name) or isinstance(value, Secret):
        return MASK
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, bool | int | float):
        return round(value, 4) if isinstance(value, float) else value
    return short(_cell_text(name, value, redact), 200)


def query(frame: pd.DataFrame, request: dict[str, Any], redact: Redactor | None = None) -> dict[str, Any]:
    """The explorer's state for ``request`` (status, variant, sort, page, mode); pure, tested directly.

    ``redact``: masks the text of secret values in every cell (``secrets_of(frame)``).
    """
    request = {k: v for k, v in request.items() if v is not None}
    status, variant, sort = request.get("status") or "", request.get("variant") or "", request.get("sort") or ""
    mode = request.get("mode") or "rows"
    positions = list(range(len(frame)))
    variants = _variant_labels(frame, redact)
    if status:
        st = frame["status"].astype(str).tolist()
        positions = [p for p in positions if st[p] == status]
    if variant and variants is not None:
        positions = [p for p in positions if variants[p] == variant]
    if sort:
        col, direction = sort.rsplit(" ", 1)
        if col in frame.columns:
            values = frame[col].tolist()
            present = [p for p in positions if values[p] == values[p] and values[p] is not None]
            missing = [p for p in positions if p not in set(present)]
            present.sort(key=lambda p: values[p], reverse=direction == "↓")
            positions = present + missing
    progress = _progress(frame, variants)
    note = ""
    names = sorted(set(variants)) if variants is not None else []
    baseline = str(request.get("baseline") or "")
    baseline = baseline if baseline in names else (names[0] if names else "")
    if mode == "compare" and variants is not None:
        rows, columns = _compare(frame, positions, variants, redact, baseline)
        rows, note = _regressions(rows, columns, bool(request.get("regressions")), baseline)
    else:
        rows, columns = _rows(frame, positions, redact)
    total = len(rows)
    pages = max(1, -(-total // PAGE))
    page = min(max(int(request.get("page") or 0), 0), pages - 1)
    shown = rows[page * PAGE : (page + 1) * PAGE]
    text = f"{page * PAGE + 1 if total else 0}–{page * PAGE + len(shown)} of {total}"
    return {
        "rows": shown,
        "columns": columns,
        "progress": progress,
        "range_text": text,
        "query": {
            "status": status,
            "variant": variant,
            "sort": sort,
            "page": page,
            "mode": mode,
            "regressions": bool(request.get("regressions")),
            "baseline": baseline,
        },
        "note": note if total else (note + "; " if note else "") + "no rows match",
    }


def _rows(
    frame: pd.DataFrame, positions: list[int], redact: Redactor | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    outputs = [o for o in frame.attrs.get("outputs") or [] if o in frame.columns]
    # a scorer's explanation (nf.Score: "<node>.explanation") and details follow its score
    nested = {o: [c for c in frame.columns if str(c).startswith(f"{o}.")] for o in outputs}
    inner = {c for cs in nested.values() for c in cs}
    added = (*STATUS_COLUMNS, *QUESTION_COLUMNS, REUSED_COLUMN)
    inputs = [c for c in frame.columns if c not in outputs and c not in inner and c not in added]
    columns = [*inputs, *(c for o in outputs for c in (o, *nested[o])), "status", "error_message", "latency"]
    if REUSED_COLUMN in frame.columns:  # which nodes a resumed row reused instead of running them
        columns.insert(columns.index("status") + 1, REUSED_COLUMN)
    if "question_prompt" in frame.columns:
        columns.append("question_prompt")
    data = {c: frame[c].tolist() for c in columns}
    if REUSED_COLUMN in data:
        data[REUSED_COLUMN] = [", ".join(v) if isinstance(v, list | tuple) else v for v in data[REUSED_COLUMN]]
    options = frame["question_options"].tolist() if "question_options" in frame.columns else None
    run_ids = frame["run_id"].tolist() if "run_id" in frame.columns else [None] * len(frame)
    rows = []
    for p in positions:
        row: dict[str, Any] = {c: _cell(c, data[c][p], redact) for c in columns}
        row["__pos"] = p
        blocked = unopenable(frame, run_ids[p], str(data["status"][p]))
        if blocked is not None:  # marked before it is clicked (a lock, and the reason as its tooltip)
            row["__blocked"] = blocked
        if options is not None and data["status"][p] == "paused" and isinstance(options[p], list):
            row["__options"] = [redact(str(o)) if redact else str(o) for o in options[p]]
        rows.append(row)
    return rows, columns


def _compare(
    frame: pd.DataFrame,
    positions: list[int],
    variants: list[str],
    redact: Redactor | None = None,
    baseline: str | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    scores = [o for o in frame.attrs.get("outputs") or [] if o in frame.columns]
    # each output with its scorer explanation ("<node>.explanation"), which is no case column
    outputs = [c for o in scores for c in (o, *(c for c in frame.columns if str(c).startswith(f"{o}.")))]
    grid = [k for k in frame.attrs.get("grid") or [] if k in frame.columns]
    case_cols = [
        c
        for c in frame.columns
        if c not in outputs
        and c not in grid
        and c not in STATUS_COLUMNS
        and c not in QUESTION_COLUMNS
        and c != REUSED_COLUMN
    ]
    base = baseline if baseline in set(variants) else sorted(set(variants))[0]
    names = [base, *sorted(set(variants) - {base})]  # the baseline first: every other variant is compared with it
    score = next((c for c in _numeric(frame) if c != "latency"), None)
    changes = [f"{v}: change" for v in names[1:]] if score is not None else []
    columns = [*case_cols, *[f"{v}: {c}" for v in names for c in (*outputs, "status")], *changes]
    cases: dict[tuple[str, ...], dict[str, Any]] = {}
    data = {c: frame[c].tolist() for c in {*case_cols, *outputs, "status"}}
    raw: dict[tuple[str, ...], dict[str, tuple[bool, Any, int]]] = {}  # case -> variant -> (ok, score, position)
    for p in positions:
        key = tuple(repr(data[c][p]) for c in case_cols)
        row = cases.get(key)
        if row is None:
            row = cases[key] = {c: _cell(c, data[c][p], redact) for c in case_cols}
            row["__pos"] = p
        for c in (*outputs, "status"):
            row[f"{variants[p]}: {c}"] = _cell(c, data[c][p], redact)
        if score is not None:
            raw.setdefault(key, {})[variants[p]] = (data["status"][p] == "succeeded", data[score][p], p)
    for key, seen in raw.items():
        if base not in seen:
            continue
        ok_a, score_a, _ = seen[base]
        for v in names[1:]:
            if v not in seen:
                continue
            ok_b, score_b, pos = seen[v]
            change = classify(ok_a, ok_b, _delta(score_a, score_b))
            cases[key][f"{v}: change"] = change
            if change in _WORSE and "__worse" not in cases[key]:
                cases[key]["__worse"] = True
                cases[key]["__pos"] = pos  # a click on a regression opens the run that got worse
    return list(cases.values()), columns


_WORSE = ("newly_failing", "regressed")


def _delta(a: Any, b: Any) -> float | None:
    try:
        return float(b) - float(a)
    except (TypeError, ValueError):
        return None


def _regressions(
    rows: list[dict[str, Any]], columns: list[str], only: bool, base: str
) -> tuple[list[dict[str, Any]], str]:
    """Compare mode: the cases where a variant got worse than the first one come first (or alone)."""
    changes = [c for c in columns if c.endswith(": change")]
    if not changes:
        return rows, ""
    worse = [r for r in rows if r.get("__worse")]
    text = f"{len(worse)} case{'s' if len(worse) != 1 else ''} regressed or newly failing vs {base!r} (listed first)"
    if only:
        return worse, text
    return worse + [r for r in rows if not r.get("__worse")], text


def _progress(frame: pd.DataFrame, variants: list[str] | None) -> list[dict[str, Any]]:
    statuses = frame["status"].astype(str).tolist()
    return count_by_variant(variants if variants is not None else ["all rows"] * len(frame), statuses)
