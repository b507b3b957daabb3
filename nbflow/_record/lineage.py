"""A run's lineage as a DataFrame: which code and data produced a value (the data: ``nbflow._engine.lineage``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "compact", "expand", "frame", "redacted"]

COLUMNS = ("node", "code_version", "parameter", "source", "kind", "value", "data_version", "output_version")


def frame(data: Mapping[str, Any], node: str | None = None) -> pd.DataFrame:
    """The lineage of ``node`` (it and every node upstream of it, in run order), or of the whole run.

    One row per parameter of each node: ``source`` (the upstream node, flow input or ``default``),
    ``kind`` (``node`` / ``input`` / ``default``), ``value`` (for inputs and defaults, a short repr),
    ``data_version`` (the content digest of the value), ``code_version`` and ``output_version`` of the
    node. ``frame.attrs["environment"]``: nbflow, Python and package versions, git commit.
    """
    import pandas as pd

    nodes: Mapping[str, Any] = data.get("nodes", {})
    wanted: list[str] = list(nodes)
    if node is not None:
        if node not in nodes:
            from nbflow._core.errors import UnknownNodeError

            raise UnknownNodeError(node, nodes)
        keep = {node}
        for name in reversed(wanted):  # run order: a node's upstream nodes come before it
            if name in keep:
                keep.update(p[1] for p in nodes[name]["inputs"] if p[2] == "node")
        wanted = [n for n in wanted if n in keep]
    rows = []
    for name in wanted:
        info = nodes[name]
        params = info["inputs"] or [[None, None, None, None, None]]
        for param, source, kind, value, version in params:
            rows.append((name, info["code"], param, source, kind, value, version, info["output"]))
    out = pd.DataFrame(rows, columns=list(COLUMNS), dtype=object)  # (None stays None, not NaN)
    out.attrs["environment"] = dict(data.get("env") or {})
    return out


def compact(data: Mapping[str, Any]) -> dict[str, Any]:
    """A run's lineage as a batch row keeps it (``expand`` reverses it): per node its output version and inputs,
    without what the row's other records hold: the code versions (the row's fingerprints) and the environment
    (its experiment's record); an upstream node's output version is written once, as that node's output.
    A row whose run is not kept gets the same made directly (``nbflow._engine.lineage.row_lineage``)."""
    nodes = {}
    for name, info in data.get("nodes", {}).items():
        params = [p[:3] if p[2] == "node" else p for p in info["inputs"]]
        nodes[name] = [info["output"], params]
    return {"nodes": nodes}


def expand(
    row: Mapping[str, Any], code: Mapping[str, str | None] | None, env: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A batch row's ``compact`` lineage back as a run's (what ``frame`` reads), given the row's per-node code
    fingerprints and its experiment's environment (or the row's own: a row copied from another batch by ``reuse=``
    whose environment was not this batch's)."""
    nodes: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    for name, (output, params) in row.get("nodes", {}).items():
        outputs[name] = output
        inputs = [[*p, None, outputs.get(p[1])] if p[2] == "node" else list(p) for p in params]
        nodes[name] = {"code": (code or {}).get(name), "output": output, "inputs": inputs}
    own = row.get("env")  # (a row copied from another batch names the environment its values were computed in)
    return {"env": dict(own if isinstance(own, Mapping) else env or {}), "nodes": nodes}


def redacted(data: Mapping[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    """A lineage (whole, ``compact`` or ``{"error": ...}``) with ``redact`` applied to its values only: each input's
    and default's shown value and an error's text. Its structure is nbflow's own words and is written as it is:
    node names, parameters, sources, kinds, versions, the environment. A secret whose text is also such a word
    (a node named like a row's key) must not garble what the lineage says; a value that quotes it is redacted."""
    if "nodes" not in data:
        return {k: redact(v) if isinstance(v, str) else v for k, v in data.items()}
    nodes: dict[str, Any] = {}
    for name, info in data["nodes"].items():
        if isinstance(info, Mapping):
            nodes[name] = {**info, "inputs": _redacted_inputs(info["inputs"], redact)}
        else:  # compact: [output version, inputs]
            nodes[name] = [info[0], _redacted_inputs(info[1], redact)]
    return {**data, "nodes": nodes}


def _redacted_inputs(params: list[list[Any]], redact: Callable[[str], str]) -> list[list[Any]]:
    return [[*p[:3], redact(p[3]), *p[4:]] if len(p) > 3 and isinstance(p[3], str) else p for p in params]


_FAST: list[Any] = []  # [orjson.dumps, or None without it], once known


def lineage_json(data: Any) -> str:
    """``json.dumps(data, default=repr)`` as ``json.loads`` reads it back, written by orjson (measured ~20x faster
    on a lineage's kilobyte: most of what storing it cost). A lineage holds texts, digests and flags, no numbers
    (a NaN would be written null); what orjson refuses (an int beyond 64 bits, a key that is not a str) goes to
    the standard encoder. The one encoder of a stored lineage: a run's record and a batch row's."""
    if not _FAST:
        try:
            import orjson
        except ImportError:  # (a dependency of nbflow; without it the standard encoder writes)
            _FAST.append(None)
        else:
            _FAST.append(orjson.dumps)
    fast = _FAST[0]
    if fast is not None:
        try:
            return str(fast(data, default=repr).decode())
        except TypeError:  # orjson.JSONEncodeError
            pass
    import json

    return json.dumps(data, default=repr, separators=(",", ":"))
