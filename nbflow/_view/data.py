"""The viewer's data layer: stores (read-only) or a batch frame -> the JSON the front end's components render.

One shape of data for three hosts: the notebook's explorer snapshot, ``nbflow report`` (one HTML file) and
``nbflow view`` (a local server). Pages:

- ``experiments()``: every experiment of every store (name, flow, time, rows, failed, paused, cost, notes,
  summary scores, whether it is still running);
- ``experiment(id, query)``: one experiment's per-variant summary (``nf.summarize``'s figures with their
  intervals: every column it gives, so richer statistics show up as they are added), its progress per
  variant, and ONE page of its rows (``PAGE`` rows; filtered by status, variant, score range and a search,
  sorted by a column) read with paged SQL queries, never the whole batch;
- ``compare(a, b)``: ``nf.compare``'s per-case frame (regressions first) with both sides' outputs side by
  side, its summary line (and verdict, when ``nf.compare`` gives one);
- ``row(id, index)``: one row's values, its question if paused, and its run record (every node's state,
  output, error, traceback and attempts) with the flow's picture (``graph_shape`` recorded by the batch).

Safety: a store is opened ``mode=ro`` (``BatchStore(read_only=True)``: SQLite refuses any write); values are
decoded by the stores' code-free readers (``pickling.peek``, ``unpickle=False``): a pickle is never opened,
whoever signed it, and no module of the flow is imported. Every text goes to the page as JSON data, which
the components put in the page as text (never as HTML); a value's text is capped (``VALUE_CHARS``). Only a
store's file name reaches the page, never its folder.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nbflow._batch.cases import OWN_COLUMNS, STATUS_COLUMNS
from nbflow._batch.explore import _cell, secrets_of
from nbflow._batch.rows import QUESTION_COLUMNS
from nbflow._batch.variants import ORDER, variant_labels
from nbflow._core.errors import BatchError, StoreError
from nbflow._core.secrets import Redactor, Secret, is_secret_name
from nbflow._store.batch_store import BatchStore, NoBatchYet
from nbflow._store.checkpoint import peek_run

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COMPARE_LIMIT", "PAGE", "VALUE_CHARS", "FrameSource", "NotYet", "StoreSource", "run_record", "text_of"]

PAGE = 50  # rows a page of the rows table
VALUE_CHARS = 20_000  # a value's text in a row's details (a huge value is cut, saying how much is left out)
SUMMARY_LIMIT = 20_000  # a running experiment's summary is computed from its rows up to this many
COMPARE_LIMIT = 20_000  # rows per side that a comparison loads (nf.compare works on whole frames)
COMPARE_ROWS = 1_000  # cases a comparison page lists (regressions first)


def text_of(value: Any, limit: int = VALUE_CHARS) -> str:
    """A value as the text a page shows: strings as they are, other values by their repr, cut at ``limit``."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = (
                json.dumps(value, ensure_ascii=False, default=repr) if isinstance(value, list | dict) else repr(value)
            )
        except Exception:
            text = repr(value)
    if len(text) > limit:
        return text[:limit] + f"… ({len(text) - limit:,} more characters)"
    return text


def _number(value: Any, red: Redactor | None = None) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return None if isinstance(value, float) and not math.isfinite(value) else value
    return red(text_of(value, 200)) if red else text_of(value, 200)


def _summary_table(
    records: Sequence[Mapping[str, Any]], grid: Sequence[str], red: Redactor | None = None
) -> dict[str, Any]:
    """``nf.summarize``'s records as {columns, rows}: every column it gives (intervals included); ``red``: redacts
    the texts in its cells (grid values), not its column names."""
    columns: list[str] = []
    for rec in records:
        columns.extend(str(k) for k in rec if str(k) not in columns)
    rows = [[_number(rec.get(c), red) for c in columns] for rec in records]
    return {"columns": columns, "rows": rows, "by": list(grid)}


def run_record(
    nodes: Sequence[Mapping[str, Any]], questions: Sequence[Any], redact: Redactor | None = None
) -> dict[str, Any]:
    """A run's nodes (``peek_run``'s, or a live run's) as the page's JSON: texts capped and redacted."""
    red = redact or Redactor()
    out = []
    for node in nodes:
        err = None
        if node.get("error_type"):
            err = red(f"{node['error_type']}: {node.get('error_message') or ''}")
        attempts = []
        for a in node.get("attempts") or []:
            a = list(a) + [None] * (5 - len(a))
            number, t0, t1, error, delay = a[:5]
            took = t1 - t0 if isinstance(t0, int | float) and isinstance(t1, int | float) else None
            attempts.append(
                {
                    "number": number,
                    "seconds": took,
                    "error": red(text_of(f"{type(error).__name__}: {error}", 2000)) if error is not None else None,
                    "delay": delay,
                    "extra": [red(text_of(x, 4000)) for x in a[5:]],  # what later records add (transcripts)
                }
            )
        t0, t1 = node.get("started_at"), node.get("finished_at")
        inputs = node.get("inputs") or {}
        out.append(
            {
                "name": str(node["name"]),
                "status": str(node["status"]),
                "output": red(text_of(node["output"])) if node.get("status") == "succeeded" else None,
                "error": err,
                "traceback": red(text_of(node["traceback"])) if node.get("traceback") else None,
                "skip_reason": red(str(node["skip_reason"])) if node.get("skip_reason") else None,
                "seconds": t1 - t0 if isinstance(t0, int | float) and isinstance(t1, int | float) else None,
                "attempts": attempts,
                "inputs": {
                    str(k): "••••••" if is_secret_name(str(k)) else red(text_of(v, 2000)) for k, v in inputs.items()
                },
                # what a node's record holds beyond these (model-call transcripts, as they are recorded)
                "more": {str(k): red(text_of(v, VALUE_CHARS)) for k, v in (node.get("more") or {}).items() if v},
            }
        )
    asked = []
    for q in questions:
        asked.append(
            {
                "prompt": red(text_of(getattr(q, "prompt", q), 4000)),
                "options": [red(text_of(o, 200)) for o in (getattr(q, "options", None) or [])],
                "data": red(text_of(getattr(q, "data", None), 4000)) if getattr(q, "data", None) is not None else None,
            }
        )
    return {"nodes": out, "questions": asked}


def _json_path(column: str) -> str:
    """SQLite's JSON path of a top-level key (given to ``json_extract`` as a parameter, never as SQL)."""
    return '$."' + column.replace("\\", "\\\\").replace('"', '\\"') + '"'


class NotYet(StoreError):
    """What a page asks for is not in the store yet: the store's file (no batch has written it), an experiment, a
    row. The viewer's page says so and shows it once a batch writes it (it keeps asking)."""


class StoreSource:
    """The pages of one or more batch stores, opened read-only. ``close()`` when done.

    ``wait=True`` (``nbflow view``): a store that is not there yet (no file, or a file a batch is still creating)
    is opened when a page asks for it; until then its pages raise ``NotYet``. A file that is there but is not a
    readable store, or a path whose folder does not exist (no batch can write it there), is a StoreError at once.
    ``wait=False`` (``nbflow report``): every store must be there.
    """

    def __init__(self, paths: Sequence[str | os.PathLike[str]], *, wait: bool = False) -> None:
        if not paths:
            raise StoreError("give at least one store file (the path a batch was run with: store=...)")
        self.paths = [os.fspath(p) for p in paths]
        self.stores: list[BatchStore | None] = [None] * len(self.paths)
        names = [os.path.basename(p) for p in self.paths]
        self.labels = [n if names.count(n) == 1 else f"{n} ({i + 1})" for i, n in enumerate(names)]
        self._graphs: dict[str, str | None] = {}
        try:
            for number, path in enumerate(self.paths):
                folder = os.path.dirname(os.path.abspath(path))
                if os.path.isfile(path):
                    try:
                        self.stores[number] = BatchStore(path, read_only=True)
                    except NoBatchYet:
                        if not wait:
                            raise
                elif not wait or not os.path.isdir(folder) or os.path.isdir(path):
                    where = "" if os.path.isdir(folder) else f" (there is no folder {folder!r})"
                    where = f" ({path!r} is a folder)" if os.path.isdir(path) else where
                    raise StoreError(f"no store at {path!r}{where}; give the path a batch was run with (store=...)")
        except BaseException:
            self.close()
            raise

    def store(self, number: int) -> BatchStore:
        """Store ``number``, opened on first use; ``NotYet`` while it has no file or no batch yet."""
        found = self.stores[number]
        if found is not None:
            return found
        path, label = self.paths[number], self.labels[number]
        if not os.path.isfile(path):
            raise NotYet(f"no store at {label!r} yet (no batch has written it)")
        try:
            found = BatchStore(path, read_only=True)
        except NoBatchYet:
            raise NotYet(f"{label!r} holds no experiment yet (a batch is creating it, or has not started)") from None
        except StoreError as exc:  # (a garbled file says so; only its name reaches the page, never its folder)
            raise StoreError(str(exc).replace(path, label)) from None
        self.stores[number] = found
        return found

    def close(self) -> None:
        for s in self.stores:
            if s is not None:
                s.close()

    # --- ids ---------------------------------------------------------------------------------------
    def _find(self, eid: str) -> tuple[BatchStore, str, dict[str, Any]]:
        number, _, batch_id = str(eid).partition(":")
        try:
            store = self.store(int(number))
        except (ValueError, IndexError):
            raise StoreError(f"no experiment {eid!r} (ids are '<store number>:<batch id>')") from None
        info = store.batch_info(batch_id)
        if info is None:
            raise NotYet(f"no experiment {eid!r} in {self.labels[int(number)]} yet")
        return store, batch_id, info

    # --- pages -------------------------------------------------------------------------------------
    def experiments(self) -> dict[str, Any]:
        """Every experiment of every store (the list page)."""
        from nbflow._batch.experiments import experiments

        out = []
        waiting = []
        for number in range(len(self.paths)):
            try:
                store = self.store(number)
            except NotYet as exc:
                waiting.append(str(exc))
                continue
            frame = experiments(store)
            for rec in frame.to_dict("records"):
                info = store.batch_info(rec["batch_id"]) or {}
                meta = info.get("meta", {})
                counts = dict(meta.get("counts") or {}) or store.status_counts(rec["batch_id"])
                out.append(
                    {
                        "id": f"{number}:{rec['batch_id']}",
                        "store": self.labels[number],
                        "name": str(rec["experiment"]),
                        "flow": str(rec["flow"]),
                        "started": _stamp(rec["started"]),
                        "finished": _stamp(rec["finished"]),
                        "running": not meta.get("finished_at"),
                        "rows": int(rec["rows"]),
                        "succeeded": int(rec["succeeded"]),
                        "failed": int(rec["failed"]),
                        "paused": int(counts.get("paused", 0)),
                        "cost": _number(rec["cost"]),
                        "notes": text_of(rec["notes"], 500) if rec["notes"] else "",
                        "scores": _score_text(meta.get("summary") or [], meta.get("grid") or []),
                        "stopped": text_of(rec["stopped"], 300) if rec["stopped"] else "",
                    }
                )
        return {"stores": self.labels, "experiments": out, "waiting": waiting}

    def experiment(self, eid: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One experiment: summary, progress per variant, and one page of rows for ``query``."""
        store, batch_id, info = self._find(eid)
        meta = info["meta"]
        grid = [str(k) for k in meta.get("grid") or []]
        outputs = [str(o) for o in meta.get("outputs") or []]
        columns = _row_columns(info["columns"], outputs)
        running = not meta.get("finished_at")
        summary = meta.get("summary")
        note = ""
        if summary is None or running:
            finished = sum(store.status_counts(batch_id).values())
            if finished and finished <= SUMMARY_LIMIT:
                summary = _summary_records(_load(store, batch_id), grid)
            elif finished:
                note = f"the summary is computed when the batch ends (more than {SUMMARY_LIMIT:,} rows so far)"
        progress = self._progress(store, batch_id, grid, int(info["n_rows"]))
        page = self.rows(eid, query or {})
        return {
            "id": eid,
            "name": str(meta.get("experiment", batch_id)),
            "flow": str(info["flow"]),
            "store": self.labels[int(eid.partition(":")[0])],
            "notes": text_of(meta.get("notes"), 2000) if meta.get("notes") else "",
            "started": info["created_at"],
            "finished": meta.get("finished_at"),
            "running": running,
            "total": int(info["n_rows"]),
            "grid": grid,
            "outputs": outputs,
            "variants": [p["label"] for p in progress] if grid else [],
            "scores": [c for c in columns if c in outputs] + ["latency"],
            "progress": progress,
            "summary": _summary_table(summary or [], grid),
            "summary_note": note or ("" if summary else "no summary recorded"),
            "stopped": text_of(meta.get("stopped"), 500) if meta.get("stopped") else "",
            "page": page,
        }

    def _progress(self, store: BatchStore, batch_id: str, grid: list[str], n_rows: int) -> list[dict[str, Any]]:
        keys = ", ".join(["json_extract(data, ?)"] * len(grid))
        select = f"SELECT {keys + ', ' if grid else ''}status, COUNT(*) FROM batch_rows WHERE batch_id = ? GROUP BY "
        select += f"{keys + ', ' if grid else ''}status"
        groups: dict[str, dict[str, int]] = {}
        values: dict[str, tuple[Any, ...]] = {}
        for row in store._db.execute(select, [*map(_json_path, grid), batch_id, *map(_json_path, grid)]):
            key = row[: len(grid)]
            label = variant_labels(grid, [key])[0] if grid else "all rows"
            values[label] = key
            counts = groups.setdefault(label, dict.fromkeys(ORDER, 0))
            counts[str(row[-2])] = counts.get(str(row[-2]), 0) + int(row[-1])
        done = sum(sum(c.values()) for c in groups.values())
        if not grid:
            groups.setdefault("all rows", dict.fromkeys(ORDER, 0))["pending"] += max(0, n_rows - done)
        return [
            {"label": label, "counts": counts, "values": list(map(_number, values.get(label, ())))}
            for label, counts in groups.items()
        ]

    def rows(self, eid: str, query: Mapping[str, Any]) -> dict[str, Any]:
        """One page of an experiment's rows (paged SQL: the other rows are never read)."""
        store, batch_id, info = self._find(eid)
        meta = info["meta"]
        grid = [str(k) for k in meta.get("grid") or []]
        outputs = [str(o) for o in meta.get("outputs") or []]
        columns = _row_columns(info["columns"], outputs)
        where: list[tuple[str, tuple[Any, ...]]] = []
        status = str(query.get("status") or "")
        if status:
            where.append(("status = ?", (status,)))
        variant = query.get("variant")
        if variant and grid:
            for key, value in zip(grid, _variant_values(store, batch_id, grid, str(variant)), strict=False):
                where.append(("json_extract(data, ?) IS ?", (_json_path(key), value)))
        score = str(query.get("score") or "")
        if score in columns:
            for bound, op in (("min", ">="), ("max", "<=")):
                raw = query.get(f"score_{bound}")
                if raw not in (None, ""):
                    try:
                        number = float(raw)
                    except (TypeError, ValueError):
                        raise BatchError(f"score_{bound} must be a number, got {raw!r}") from None
                    where.append((f"CAST(json_extract(data, ?) AS REAL) {op} ?", (_json_path(score), number)))
        search = str(query.get("search") or "")
        if search:
            where.append(("instr(lower(data), lower(?)) > 0", (search,)))
        order = "row_index, finished_at"
        sort = str(query.get("sort") or "")
        column, _, direction = sort.rpartition(" ")
        if column in columns:
            literal = "'" + _json_path(column).replace("'", "''") + "'"
            order = f"json_extract(data, {literal}) IS NULL, json_extract(data, {literal}) " + (
                "DESC" if direction == "desc" else "ASC"
            )
            order += ", row_index"
        try:
            page = max(0, int(query.get("page") or 0))
        except (TypeError, ValueError):
            page = 0
        total, stored = store.rows_page(batch_id, where=where, order=order, limit=PAGE, offset=page * PAGE)
        pages = max(1, -(-total // PAGE))
        if page >= pages and total:
            page = pages - 1
            total, stored = store.rows_page(batch_id, where=where, order=order, limit=PAGE, offset=page * PAGE)
        rows = []
        for r in stored:
            cells = {c: _cell(c, r.data.get(c)) for c in columns}
            cells["status"] = r.status
            rows.append({"__index": r.index, "__run": bool(r.run_id), **cells})
        return {
            "columns": columns,
            "rows": rows,
            "total": int(total),
            "page": page,
            "pages": pages,
            "limit": PAGE,
            "query": {
                k: query.get(k) or ""
                for k in ("status", "variant", "score", "score_min", "score_max", "search", "sort")
            },
        }

    def row(self, eid: str, index: int) -> dict[str, Any]:
        """One row: its values, question (if paused), run record and the flow's picture coloured by state."""
        store, batch_id, info = self._find(eid)
        meta = info["meta"]
        _, found = store.rows_page(
            batch_id, where=[("row_index = ?", (int(index),))], order="finished_at DESC", limit=1
        )
        if not found:
            if meta.get("finished_at") or not 0 <= int(index) < int(info["n_rows"]):
                raise StoreError(f"experiment {eid!r} has no finished row {index}")
            raise NotYet(f"row {index} of experiment {eid!r} has not finished yet")
        r = found[0]
        record = peek_run(store._db, r.run_id) if r.run_id else None
        detail = run_record(record["nodes"], record["questions"]) if record else {"nodes": [], "questions": []}
        if not detail["questions"] and r.data.get("question_prompt"):
            opts = r.data.get("question_options")
            detail["questions"] = [
                {
                    "prompt": text_of(r.data["question_prompt"], 4000),
                    "options": [text_of(o, 200) for o in opts] if isinstance(opts, list) else [],
                    "data": None,
                }
            ]
        return {
            "experiment": eid,
            "name": str(meta.get("experiment", batch_id)),
            "index": r.index,
            "status": r.status,
            "values": {str(k): ("••••••" if is_secret_name(str(k)) else text_of(v, 4000)) for k, v in r.data.items()},
            "kept": record is not None,
            "graph": self._graph(eid, meta),
            **detail,
        }

    def _graph(self, eid: str, meta: Mapping[str, Any]) -> str | None:
        if eid not in self._graphs:
            shape = meta.get("graph")
            from nbflow._show.draw import shape_svg

            self._graphs[eid] = shape_svg(shape) if isinstance(shape, dict) else None
        return self._graphs[eid]

    def compare(self, a: str, b: str, variants: Sequence[str] | None = None) -> dict[str, Any]:
        """Experiments ``a`` and ``b`` compared (``nf.compare``), or two variants of experiment ``a``."""
        store_a, id_a, info_a = self._find(a)
        frame_a = _load(store_a, id_a, limit=COMPARE_LIMIT)
        if variants:
            grid = list(info_a["meta"].get("grid") or [])
            if len(grid) != 1:
                raise BatchError("comparing two variants needs an experiment with one grid key")
            return compare_frames(frame_a, frame_a, (str(variants[0]), str(variants[1]), grid[0]))
        store_b, id_b, _ = self._find(b)
        return compare_frames(frame_a, _load(store_b, id_b, limit=COMPARE_LIMIT))

    def version(self) -> list[int]:
        """Changes when any store is written (``PRAGMA data_version`` + row counts): a page refreshes then. A store
        not opened yet (no file, a file a batch is creating, one that cannot be read) counts by its file's size and
        time, and is opened here once it can be: a page waiting for it then refreshes."""
        out = []
        for number, path in enumerate(self.paths):
            try:
                s = self.store(number)
            except StoreError:
                try:
                    st = os.stat(path)
                    out += [-1, st.st_size, st.st_mtime_ns]
                except OSError:
                    out += [-1, -1, -1]
                continue
            out.append(int(s._db.execute("PRAGMA data_version").fetchone()[0]))
            out.append(int(s._db.execute("SELECT COUNT(*) FROM batch_rows").fetchone()[0]))
        return out


def _variant_values(store: BatchStore, batch_id: str, grid: list[str], label: str) -> tuple[Any, ...]:
    """The grid values behind a variant label (as the progress query read them)."""
    keys = ", ".join(["json_extract(data, ?)"] * len(grid))
    for row in store._db.execute(
        f"SELECT DISTINCT {keys} FROM batch_rows WHERE batch_id = ?", [*map(_json_path, grid), batch_id]
    ):
        if variant_labels(grid, [row])[0] == label:
            return tuple(row)
    raise BatchError(f"no variant {label!r} in this experiment")


def _row_columns(stored: Sequence[str], outputs: Sequence[str]) -> list[str]:
    """The rows table's columns, as the explorer orders them: inputs, outputs, status, error, latency."""
    outs = [o for o in outputs if o in stored]
    inputs = [c for c in stored if c not in outs and c not in STATUS_COLUMNS and c not in QUESTION_COLUMNS]
    inputs = [c for c in inputs if c not in ("input_tokens", "output_tokens", "cost", "failed_cost")]
    columns = [*inputs, *outs, "status", "error_message", "latency"]
    if "cost" in stored:
        columns.append("cost")
    if "question_prompt" in stored:
        columns.append("question_prompt")
    return [str(c) for c in columns]


def _load(store: BatchStore, batch_id: str, limit: int | None = None) -> pd.DataFrame:
    from nbflow._batch.experiments import load_batch

    if limit is not None:
        n = store._db.execute("SELECT COUNT(*) FROM batch_rows WHERE batch_id = ?", (batch_id,)).fetchone()[0]
        if n > limit:
            raise BatchError(
                f"experiment {batch_id!r} has {n:,} rows; the viewer compares up to {limit:,} rows a side "
                f"(compare in Python: nf.compare(nf.load_batch(db, a), nf.load_batch(db, b)))"
            )
    return load_batch(store, batch_id, unpickle=False)


def _summary_records(frame: pd.DataFrame, grid: Sequence[str]) -> list[dict[str, Any]]:
    from nbflow._batch.summary import summarize

    try:
        summary = summarize(frame, digits=None)
    except Exception:  # a summary is never worth a broken page
        return []
    return [{str(k): v for k, v in rec.items()} for rec in summary.reset_index().to_dict("records")]


def _score_text(summary: Sequence[Mapping[str, Any]], grid: Sequence[str]) -> str:
    """The experiments list's scores: each variant's score means, e.g. ``score: terse 0.67 · steps 0.62``."""
    parts = []
    for rec in summary:
        means = [(k[: -len("_mean")], v) for k, v in rec.items() if k.endswith("_mean") and k != "cost_mean"]
        label = ", ".join(str(rec.get(g)) for g in grid) if grid else ""
        for name, value in means:
            if isinstance(value, int | float) and math.isfinite(value):
                parts.append(f"{name} {label + ' ' if label else ''}{value:.3g}")
    return " · ".join(parts)


def _stamp(value: Any) -> float | None:
    try:
        return None if value is None or value != value else float(value.timestamp())
    except (AttributeError, TypeError, ValueError):
        return None


def compare_frames(a: pd.DataFrame, b: pd.DataFrame, variants: tuple[str, str, str] | None = None) -> dict[str, Any]:
    """``nf.compare``'s result as a page: its summary line (and verdict), regressions first, both sides'
    outputs side by side, and each case's row on each side (to open it)."""
    from nbflow._batch.compare import compare

    if variants is not None:
        va, vb, by = variants
        cmp = compare(a, va, vb, by=by)
        left, right = a[a[by] == va], a[a[by] == vb]
    else:
        cmp = compare(a, b)
        left, right = a, b
    keys = list(cmp.attrs.get("on") or [])
    labels = list(cmp.attrs.get("labels") or ("a", "b"))
    outputs = [o for o in dict.fromkeys([*left.attrs.get("outputs", []), *right.attrs.get("outputs", [])])]
    shown = [o for o in outputs if o not in (cmp.attrs.get("scores") or [])]
    red = secrets_of(left, right)  # (a case's inputs are both sides': their secrets are redacted on both)

    def cases(frame: pd.DataFrame) -> dict[str, tuple[Any, dict[str, Any]]]:
        found: dict[str, tuple[Any, dict[str, Any]]] = {}
        data = {c: frame[c].tolist() for c in [*keys, *[o for o in shown if o in frame], "error_message"] if c in frame}
        for p, index in enumerate(frame.index):
            key = repr(tuple(data[k][p] for k in keys))
            if key not in found:
                found[key] = (index, {c: data[c][p] for c in data if c not in keys})
        return found

    side_a, side_b = cases(left), cases(right)
    columns = [str(c) for c in cmp.columns]
    # Its values are redacted where they are put in, never its own words (column names, statuses, verdict words):
    # a secret whose text is also such a word must not garble the page.
    labels = [red(str(label)) for label in labels]
    extra = [f"{labels[0]}: {o}" for o in shown] + [f"{labels[1]}: {o}" for o in shown]
    rows = []
    records = cmp.head(COMPARE_ROWS).to_dict("records")
    for rec in records:
        key = repr(tuple(rec[k] for k in keys))
        ia, va_ = side_a.get(key, (None, {}))
        ib, vb_ = side_b.get(key, (None, {}))
        row = {c: _cell(c, rec.get(c), red) for c in columns}
        for o in shown:
            row[f"{labels[0]}: {o}"] = _cell(o, va_.get(o) if va_.get(o) is not None else va_.get("error_message"), red)
            row[f"{labels[1]}: {o}"] = _cell(o, vb_.get(o) if vb_.get(o) is not None else vb_.get("error_message"), red)
        row["__a"] = _index(ia)
        row["__b"] = _index(ib)
        rows.append(row)
    counts = dict(cmp.attrs.get("counts") or {})
    return {
        "labels": labels,
        "summary": red(str(cmp.attrs.get("summary") or "")),
        "verdict": red(str(cmp.attrs.get("verdict") or "")),
        "counts": counts,
        "columns": [*columns, *extra],
        "rows": rows,
        "total": len(cmp),
        "limit": COMPARE_ROWS,
        "stats": _stats({str(k): v for k, v in cmp.attrs.items()}, red),
    }


def _index(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _stats(attrs: Mapping[str, Any], red: Redactor) -> dict[str, Any]:
    """``nf.compare``'s per-score statistics (``attrs["stats"]``: paired test, p-value, interval, verdict) as a
    table, every field it gives (its texts redacted)."""
    found = attrs.get("stats")
    records = [r for r in found if isinstance(r, Mapping)] if isinstance(found, list) else []
    table = _summary_table(records, [], red)
    table["rows"] = [
        [v if isinstance(v, int | float | None) else text_of(v, 500) for v in row] for row in table["rows"]
    ]
    return table


class FrameSource:
    """The same pages from a batch frame in memory (``nf.report(df)``, the explorer's saved snapshot)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        if "status" not in frame.columns or "run_id" not in frame.columns:
            raise BatchError("give a frame returned by flow.batch or nf.load_batch (it needs 'status' and 'run_id')")
        self.frame = frame
        self.redact = secrets_of(frame)
        self.grid = [k for k in frame.attrs.get("grid") or [] if k in frame.columns]
        self.outputs = [o for o in frame.attrs.get("outputs") or [] if o in frame.columns]
        self.name = str(frame.attrs.get("experiment") or frame.attrs.get("flow") or "batch")

    def labels(self) -> list[str]:
        keys = self.grid
        if not keys:
            return ["all rows"] * len(self.frame)
        return variant_labels(keys, self.frame[keys].itertuples(index=False), self.redact)

    def experiment(self, limit: int) -> dict[str, Any]:
        """The experiment with its first ``limit`` rows (a report pages and filters them in the page)."""
        from nbflow._batch.variants import count_by_variant

        frame = self.frame
        labels = self.labels()
        columns = _row_columns([str(c) for c in frame.columns], self.outputs)
        data = {c: frame[c].tolist() for c in columns if c in frame.columns}
        rows = []
        for p in range(min(len(frame), limit)):
            cells = {c: _cell(c, data[c][p], self.redact) if c in data else "" for c in columns}
            rows.append({"__index": p, "__variant": labels[p], **cells})
        summary = _summary_records(frame, self.grid)
        progress = count_by_variant(labels, frame["status"].astype(str).tolist())
        attrs = frame.attrs
        red = self.redact
        # Its values are redacted where they are put in (cells, variant labels, notes, the summary's values), never
        # its own words (statuses, node and column names): a secret whose text is also such a word must not garble
        # the page.
        return {
            "id": "0:" + self.name,
            "name": self.name,
            "flow": str(attrs.get("flow") or ""),
            "store": "",
            "notes": red(text_of(attrs.get("notes"), 2000)) if attrs.get("notes") else "",
            "started": None,
            "finished": time.time(),
            "running": False,
            "total": len(frame),
            "grid": self.grid,
            "outputs": self.outputs,
            "variants": sorted(set(labels)) if self.grid else [],
            "scores": [c for c in columns if c in self.outputs] + ["latency"],
            "progress": progress,
            "summary": _summary_table(summary, self.grid, red),
            "summary_note": "" if summary else "no summary",
            "stopped": red(text_of(attrs.get("stopped"), 500)) if attrs.get("stopped") else "",
            "page": {
                "columns": columns,
                "rows": rows,
                "total": len(rows),
                "page": 0,
                "pages": 1,
                "limit": PAGE,
                "capped": len(frame) > limit,
                "query": {},
            },
        }

    def row(self, p: int) -> dict[str, Any] | None:
        """Row ``p``'s details, from its kept run (None when the batch did not keep it)."""
        from nbflow._batch.runs import FrameRuns

        frame = self.frame
        try:
            run = FrameRuns(frame)._run_of(frame.iloc[p], frame.index[p])
        except Exception:
            run = None
        values = {str(k): _value_text(str(k), v, self.redact) for k, v in frame.iloc[p].to_dict().items()}
        detail: dict[str, Any] = {"nodes": [], "questions": []}
        graph = None
        if run is not None:
            from nbflow._show.draw import graph_shape, shape_svg

            detail = run_record(live_nodes(run), list(run.pending.values()), self.redact)
            if run.graph is not None:
                graph = self._svg(run.graph, graph_shape, shape_svg)
        return {  # (its values redacted where they are put in, as ``experiment``'s)
            "experiment": "0:" + self.name,
            "name": self.name,
            "index": p,
            "status": str(frame["status"].iloc[p]),
            "values": values,
            "kept": run is not None,
            "graph": graph,
            **detail,
        }

    _svg_cache: dict[int, str | None]

    def _svg(self, graph: Any, shape_of: Any, svg_of: Any) -> str | None:
        cache = self.__dict__.setdefault("_svg_cache", {})
        if id(graph) not in cache:
            cache[id(graph)] = svg_of(shape_of(graph))
        return cache[id(graph)]


def _value_text(column: str, value: Any, red: Redactor) -> str:
    """A row's value as its details show it: masked under a secret's name, its secrets' texts redacted, except in
    the batch's own columns (a status, a node's name: ``OWN_COLUMNS``)."""
    if is_secret_name(column) or isinstance(value, Secret):
        return "••••••"
    text = text_of(value, 4000)
    return text if column in OWN_COLUMNS else red(text)


def live_nodes(run: Any) -> list[dict[str, Any]]:
    """A live ``Run``'s node records in ``peek_run``'s form (so one function makes the page's JSON)."""
    out = []
    for name, rec in run.nodes.items():
        status = rec.status.value
        err = rec.error
        out.append(
            {
                "name": name,
                "status": status,
                "output": rec.output if status == "succeeded" else None,
                "error_type": type(err).__name__ if err is not None else None,
                "error_message": str(err) if err is not None else None,
                "traceback": rec.traceback,
                "skip_reason": rec.skip_reason,
                "started_at": rec.started_at,
                "finished_at": rec.finished_at,
                "attempts": [[a.number, a.started_at, a.finished_at, a.error, a.delay] for a in rec.attempts],
                "inputs": dict(rec.inputs or {}),
            }
        )
    return out
