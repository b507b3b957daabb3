"""A batch frame without its secrets, for a file or to share: ``df.nbflow.save(path)``, ``df.nbflow.redacted()``
and the command line's ``nbflow batch ... -o RESULTS``.

The frame in memory keeps every real value (your code may need them); what is written or handed on is
cleaned by one rule (``frame_secrets``): the secrets are the ``nf.Secret`` values anywhere in the frame's
input columns, the strings of its secret-named input columns (``HF_TOKEN``, ``apiKey``: the rule of
``nbflow._core.secrets``) and secret-named entries of dict values; their text is replaced by
``[REDACTED]`` in every cell (outputs, error messages, questions), and secret-named columns are masked whole.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbflow._batch.cases import OWN_COLUMNS, STATUS_COLUMNS, _own_index
from nbflow._batch.columns import QUESTION_COLUMNS, json_safe
from nbflow._batch.columns import as_dict as _as_dict
from nbflow._core.errors import BatchError
from nbflow._core.secrets import REDACTED_TEXT, Redactor, Secret, is_secret_name

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SUFFIXES", "frame_secrets", "redacted", "write_frame"]

SUFFIXES = (".parquet", ".csv", ".jsonl")
_PLAIN_ATTR = (str, int, float, bool, list, dict)


def frame_secrets(frame: pd.DataFrame, marker: str = REDACTED_TEXT, into: Redactor | None = None) -> Redactor:
    """A redactor for every secret value in ``frame``'s input columns (the rule in this module's docstring).

    Outputs, error messages and questions built from those values are redacted wherever it is applied.
    ``into``: a redactor to add them to (one for two frames side by side), returned.
    """
    redact = Redactor(marker=marker) if into is None else into
    outputs = set(frame.attrs.get("outputs") or [])
    skip = outputs.union(STATUS_COLUMNS, QUESTION_COLUMNS)
    columns = [c for c in frame.columns if c not in skip]
    data = [frame[c].tolist() for c in columns]
    for values in zip(*data, strict=True):
        redact.collect(dict(zip(columns, values, strict=True)))
    return redact


def redacted(frame: pd.DataFrame, redact: Redactor | None = None, suffix: str = ".jsonl") -> pd.DataFrame:
    """A copy of ``frame`` a file may hold: secret-named columns masked, secret texts redacted in every cell.

    ``redact``: the secrets to remove (default: ``frame_secrets(frame)``; the command line adds the inputs it
    was given as constants). Cells that are not plain data (models, dataclasses, numpy scalars) become plain
    data first; for ``suffix`` ``.parquet`` and ``.csv`` nested values (dicts, lists) become JSON text, one type
    per parquet column. The attributes that name no secret are kept (so a frame read back from parquet
    still finds its store), each text in them redacted too."""
    import pandas as pd

    if redact is None:
        redact = frame_secrets(frame)
    nested_as_text = suffix != ".jsonl"

    def clean(value: Any) -> Any:
        if isinstance(value, Secret):
            return REDACTED_TEXT
        value = _plain(value)
        if isinstance(value, str):
            return redact(value)
        if isinstance(value, dict | list):
            text = redact(json.dumps(value, default=repr))
            return text if nested_as_text else json.loads(text)
        return value

    out = frame.copy()
    # (pandas writes attrs into parquet's metadata as JSON; the run archive is a str, its id)
    out.attrs = {
        k: json_safe(redact.scrub(v)) for k, v in frame.attrs.items() if v is None or isinstance(v, _PLAIN_ATTR)
    }
    # A batch's own columns (a status, a node's name...) are written as they are: a secret whose text is also such
    # a word must not garble them (``OWN_COLUMNS``).
    own = OWN_COLUMNS if "run_id" in out.columns and "status" in out.columns else ()
    for col in out.columns:
        if col in own:
            continue
        if is_secret_name(str(col)):
            out[col] = REDACTED_TEXT
        elif not (pd.api.types.is_numeric_dtype(out[col]) or pd.api.types.is_datetime64_any_dtype(out[col])):
            values = [clean(v) for v in out[col]]
            kinds = {str if isinstance(v, str) else float if isinstance(v, int | float) else type(v) for v in values}
            kinds.discard(type(None))
            if suffix == ".parquet" and len(kinds) > 1:  # one type per parquet column: mixed values as text
                values = [v if v is None or isinstance(v, str) else json.dumps(v, default=repr) for v in values]
            out[col] = pd.Series(values, index=out.index, dtype=object)
    return out


def write_frame(frame: pd.DataFrame, path: str | os.PathLike[str], redact: Redactor | None = None) -> Path:
    """Write ``redacted(frame)`` to ``path`` (``.parquet``, ``.csv`` or ``.jsonl``, by its suffix) atomically:
    a temporary file beside it, renamed once whole. A frame whose rows have labels of their own (the index of
    the DataFrame the batch was given) keeps them: parquet's index, a first column in CSV and JSON lines.
    Returns the path written.

    Raises BatchError for another suffix, a missing pyarrow (parquet) or a file that cannot be written.
    """
    out_path = Path(path).expanduser()
    suffix = out_path.suffix.lower()
    if suffix not in SUFFIXES:
        raise BatchError(
            f"cannot save a batch frame as {os.fspath(path)!r}: the suffix says the format, one of "
            f"{', '.join(SUFFIXES)}; e.g. df.nbflow.save('results.parquet')"
        )
    clean = redacted(frame, redact, suffix)
    tmp = out_path.with_name(f".{out_path.name}.partial")
    try:
        own_index = _own_index(clean) is not None  # (the rows' own labels: kept, never dropped)
        if suffix == ".parquet":
            clean.to_parquet(tmp)  # (pandas keeps a non-default index and reads it back as the index)
        elif suffix == ".csv":
            clean.to_csv(tmp, index=own_index)
        else:
            (clean.reset_index() if own_index else clean).to_json(tmp, orient="records", lines=True, force_ascii=False)
        os.replace(tmp, out_path)
    except ImportError:
        raise BatchError(f"writing {os.fspath(path)!r} needs pyarrow: pip install 'nbflow[parquet]'") from None
    except OSError as exc:
        raise BatchError(f"cannot write {os.fspath(path)!r}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return out_path


def _plain(value: Any) -> Any:
    """A value a results file can hold: models and dataclasses as dicts, recursively."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    as_dict = _as_dict(value)
    if as_dict is not None:
        return {str(k): _plain(v) for k, v in as_dict.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    return repr(value)
