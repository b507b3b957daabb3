"""Saving node outputs to files (``save=``) and loading them back (``nf.load``).

The format follows the file's suffix: ``.parquet`` (pyarrow), ``.csv``, ``.json`` for DataFrames
and Series (and JSON for plain data), ``.png``/``.svg``/``.pdf`` for matplotlib figures,
``.npy`` for numpy arrays, ``.pkl`` for anything picklable. A run records where each output went
(``run.saved``), and ``nf.load(path)`` reads a file back, e.g. to feed a node of another run with
``overrides={"features": nf.load("out/features.parquet")}``.
"""

from __future__ import annotations

import json
import os
import pickle
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nbflow._core.errors import FlowDefinitionError, NbflowError, NbflowWarning, UnknownNodeError
from nbflow._core.events import Event, NodeSucceeded
from nbflow._core.secrets import Redactor
from nbflow._record.run import Run

__all__ = ["FORMATS", "attach_save", "check_save", "load", "save_output"]

FORMATS = (".parquet", ".csv", ".json", ".png", ".svg", ".pdf", ".npy", ".pkl")


def check_save(where: str, save: object, nodes: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """``save=`` as {node: path}, checked (a known node, a known suffix)."""
    if not isinstance(save, Mapping):
        raise FlowDefinitionError(f"{where}: save= takes {{'node': 'path.parquet'}}, got {save!r}")
    out: dict[str, Path] = {}
    for node, path in save.items():
        if nodes is not None and node not in nodes:
            raise UnknownNodeError(node, nodes, role="save=")
        if not isinstance(path, str | os.PathLike):
            raise FlowDefinitionError(
                f"{where}: save[{node!r}] is {path!r}; give a file path such as 'out/{node}.parquet'"
            )
        p = Path(path)
        if p.suffix.lower() not in FORMATS:
            raise FlowDefinitionError(
                f"{where}: save[{node!r}]={str(p)!r} has no known format; end it with one of {', '.join(FORMATS)}"
            )
        out[node] = p
    return out


def save_output(node: str, value: Any, path: Path, red: Redactor | None = None) -> Path:
    """Write ``value`` to ``path`` in the format of its suffix; NbflowError naming the node if it cannot.

    No secret reaches the file: the text of every known secret (and of ``red``'s) is redacted in the strings of
    a table or of plain data; a file of another kind (a pickle, an array, a figure) that would still hold one
    is removed, and the NbflowError says so.
    """
    suffix = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = type(value).__name__
    red = red if red is not None else Redactor()
    if red:
        value = red.scrub(value)  # (a table's cells too)
    try:
        if suffix in (".png", ".svg", ".pdf"):
            figure = getattr(value, "figure", value)  # an Axes saves its figure
            if not hasattr(figure, "savefig"):
                raise TypeError(f"a {kind} is not a figure (return a matplotlib Figure or Axes)")
            figure.savefig(path)
        elif suffix == ".npy":
            import numpy as np

            np.save(path, value, allow_pickle=False)
        elif suffix == ".pkl":
            with open(path, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        elif hasattr(value, "to_parquet") and suffix == ".parquet":
            frame = value.to_frame() if not hasattr(value, "columns") else value
            frame.to_parquet(path)
        elif hasattr(value, "to_csv") and suffix == ".csv":
            value.to_csv(path, index=True)
        elif hasattr(value, "to_json") and suffix == ".json":
            value.to_json(path, orient="split", date_format="iso")
        elif suffix == ".json":
            path.write_text(json.dumps(value))
        else:
            raise TypeError(f"a {kind} cannot be written as {suffix} (that format is for DataFrames/Series)")
    except Exception as exc:
        raise NbflowError(
            f"node {node!r}: cannot save its output to {str(path)!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if red and suffix != ".parquet" and red.found_in(path.read_bytes()):  # (parquet: its strings were redacted)
        path.unlink()
        raise NbflowError(
            f"node {node!r}: its output was not saved to {str(path)!r}: the {kind} holds the text of a secret "
            f"(a secret input, an nf.Secret or a secret environment variable), which is never written to a file; "
            f"save a value without it (or in .json/.csv/.parquet, whose strings are written redacted)"
        )
    return path


def load(path: str | os.PathLike[str]) -> Any:
    """Read a file written by ``save=`` back (format by suffix): a DataFrame for parquet/csv/json tables."""
    p = Path(path)
    suffix = p.suffix.lower()
    if not p.exists():
        raise NbflowError(f"nf.load: no file at {str(p)!r}")
    if suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(p)
    if suffix == ".csv":
        import pandas as pd

        return pd.read_csv(p, index_col=0)
    if suffix == ".json":
        text = p.read_text()
        data = json.loads(text)
        if isinstance(data, dict) and {"columns", "index", "data"} <= set(data):
            import io

            import pandas as pd

            return pd.read_json(io.StringIO(text), orient="split")
        return data
    if suffix == ".npy":
        import numpy as np

        return np.load(p, allow_pickle=False)
    if suffix == ".pkl":
        with open(p, "rb") as f:
            return pickle.load(f)
    raise NbflowError(f"nf.load: {str(p)!r} has no format nf.load reads; it reads .parquet, .csv, .json, .npy, .pkl")


def attach_save(run: Run, save: Mapping[str, Path]) -> None:
    """Write each named node's output as it succeeds; ``run.saved`` records {node: path}."""
    run.saved = {}

    def on_event(event: Event) -> None:
        if not isinstance(event, NodeSucceeded) or event.node not in save:
            return
        rec = run.nodes.get(event.node)
        if rec is None:
            return
        try:
            red = Redactor.for_inputs(run._root.inputs)  # the run's secrets, and every known one
            run.saved[event.node] = save_output(event.node, rec.output, save[event.node], red)
        except NbflowError as exc:
            from nbflow._engine.logs import STORE

            STORE.warning("run %s: %s", run.run_id, exc)
            warnings.warn(str(exc), NbflowWarning, stacklevel=2)

    run.subscribe(on_event)
