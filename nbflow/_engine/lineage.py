"""Which code and data produced a value: a run's lineage, as plain data (JSON) and as a DataFrame.

Per node: its code fingerprint (``caching.node_fingerprints``, the cache's own rule: code, declaration,
the simple globals it reads), the data version of its output (the cache's content digest,
``caching.data_version``) and where each parameter's value came from: an upstream node (and that
output's version), a flow input (its value and version) or the parameter's default (which a node's
recorded ``inputs`` leave out). ``nbflow._record.lineage.frame`` turns it into the DataFrame. Per run: the nbflow and Python versions, the versions of the packages
the nodes' modules import, and the git commit (``dirty`` when tracked files changed) of the folder the
flow's code is in; those are computed once per process (per folder and per graph).

Checkpoints store it when a run ends (``CheckpointStore``), a batch's experiment record keeps the
environment, and ``run.lineage(node)`` answers from the stored data after a restart. Secrets are never
in it: a secret input shows as ``[REDACTED]`` with no data version (a digest of a secret would identify it).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nbflow._core.missing import MISSING
from nbflow._core.secrets import REDACTED_TEXT, Redactor, Secret, is_secret_name, secret_texts
from nbflow._core.states import NodeStatus
from nbflow._engine.caching import data_version, node_fingerprints
from nbflow._record.lineage import compact, lineage_json, redacted

if TYPE_CHECKING:
    from nbflow._graph.graph import Graph
    from nbflow._record.run import Run

__all__ = ["code_versions", "environment", "git_commit", "lineage_of", "node_inputs", "row_lineage"]

_VALUE_TEXT = 120  # longest value shown (the data version identifies it whole)


@functools.lru_cache(maxsize=1)
def _nbflow_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nbflow")
    except PackageNotFoundError:  # a source tree
        return "0"


@functools.lru_cache(maxsize=1)
def _distributions() -> Mapping[str, list[str]]:
    from importlib.metadata import packages_distributions

    return packages_distributions()


@functools.lru_cache(maxsize=256)
def _package_version(top: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for dist in _distributions().get(top, ()):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


@functools.lru_cache(maxsize=32)
def git_commit(folder: str) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the git work tree holding ``folder`` (None: not one, or no git)."""
    try:
        head = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", folder, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def _code_folder(graph: Graph) -> str | None:
    for g in graph.nodes.values():
        code = getattr(getattr(g.spec.func, "__code__", None), "co_filename", None)
        if code and os.path.isfile(code):
            return os.path.dirname(os.path.abspath(code))
    return None


def _packages(graph: Graph) -> dict[str, str]:
    """The versions of the distributions whose modules the nodes' code refers to (``import numpy as np``)."""
    tops: set[str] = set()
    for g in graph.nodes.values():
        func = g.spec.func
        module = getattr(func, "__module__", None)
        if module:
            tops.add(module.partition(".")[0])
        for value in getattr(func, "__globals__", {}).values():
            if isinstance(value, types.ModuleType):
                tops.add(value.__name__.partition(".")[0])
            elif isinstance(value, type | types.FunctionType):
                tops.add((getattr(value, "__module__", "") or "").partition(".")[0])
    tops.discard("")
    tops -= set(sys.stdlib_module_names)
    found = {}
    for top in sorted(tops):
        v = _package_version(top)
        if v is not None:
            found[top] = v
    return found


def environment(graph: Graph) -> dict[str, Any]:
    """nbflow, Python and package versions and the git commit of the flow's code (once per graph)."""
    return dict(_environment(graph))


def _environment(graph: Graph) -> dict[str, Any]:
    """``environment``'s one dict per graph, shared by every run's lineage (never changed: each reader copies
    it, ``nbflow._record.lineage.frame``; a run's lineage holds it as JSON once stored)."""
    found = graph._views.get("lineage_environment")
    if found is None:
        folder = _code_folder(graph)
        found = graph._views["lineage_environment"] = {
            "nbflow": _nbflow_version(),
            "python": sys.version.split()[0],
            "packages": _packages(graph),
            "git": git_commit(folder) if folder is not None else None,
        }
    return found


def code_versions(graph: Graph, validate: bool) -> dict[str, str | None]:
    """``node_fingerprints`` once per graph (a graph never changes)."""
    found = graph._views.get("lineage_code")
    if found is None:
        found = graph._views["lineage_code"] = node_fingerprints(graph, validate)
    return found


_SCALARS: dict[tuple[type, Any], str | None] = {}  # plain scalars' versions (rows repeat defaults, grid values)
_SCALAR_TYPES = frozenset({int, bool, str, type(None), float})
_UNSEEN: Any = object()  # (a scalar not in ``_SCALARS`` yet)


def _version(value: Any) -> str | None:
    t = type(value)
    if t in _SCALAR_TYPES and (t is not str or len(value) <= 256):
        key = (t, value.hex() if t is float else value)  # (by type: 1, 1.0 and True differ; -0.0 and 0.0 too)
        found = _SCALARS.get(key, _UNSEEN)
        if found is not _UNSEEN:
            return found
        found = data_version(value)
        if len(_SCALARS) < 4096:
            _SCALARS[key] = found
        return found
    from nbflow._record.run import DROPPED

    if value is MISSING or value is DROPPED:  # (an output keep= dropped: its version is not known)
        return None
    return data_version(value)


def _shown(name: str, value: Any, redact: Redactor) -> str:
    if isinstance(value, Secret) or is_secret_name(name):
        return REDACTED_TEXT
    text = redact(repr(value))
    return text if len(text) <= _VALUE_TEXT else text[: _VALUE_TEXT - 3] + "..."


def lineage_of(run: Run) -> dict[str, Any]:
    """The run's lineage as JSON-friendly data (what a checkpoint stores). Needs ``run.graph``.

    A finished run's is computed once (a batch row's store write and its checkpoint share it); a run that
    goes on (resumed) finishes again and gets its own."""
    stamp = (run.status, run.finished_at)
    memo = run.__dict__.get("_lineage_memo")
    if memo is not None and memo[0] == stamp:
        return memo[1]
    data = _lineage_of(run)
    if run.status.finished:
        run.__dict__["_lineage_memo"] = (stamp, data)
    return data


def _lineage_of(run: Run, compact: bool = False, redact: Redactor | None = None) -> dict[str, Any]:
    """The run's lineage; ``compact``: as a batch row keeps it (``nbflow._record.lineage.compact`` of it, made
    directly: a row whose run is not kept needs no other form). ``redact``: the run's (``_redactor``), if known."""
    graph = run.graph
    if graph is None:
        raise ValueError("the run has no graph")
    code = _NO_CODE if compact else code_versions(graph, bool(getattr(run._flow, "validate", True)))
    if redact is None:
        redact = _redactor(run._root.inputs)
    templates = _templates(graph)
    inputs = run.inputs
    outputs: dict[str, str | None] = {}
    nodes: dict[str, Any] = {}
    # The run's node columns are read directly (``run.nodes`` would make a record view per node: a batch row
    # writing its lineage pays for every one).
    c = run._c
    statuses, outs, cold = c.status, c.output, c.cold
    for i, name in enumerate(c.names):
        status = statuses[i]
        if status is _PENDING:
            continue
        template = templates.get(name)
        if template is None:
            if name not in graph.nodes:
                continue
            template = _template(graph, name)
        version = None
        if status is _SUCCEEDED:
            extra = cold[i]
            version = None if extra is None else extra.get("_cache_id")
            if not isinstance(version, str):
                version = _version(outs[i])
                # The cache's own rule: a store writing the run's output digests it no more (the record's
                # ``_cache_id``). Not for a row's lineage (compact): its run, if kept, is written next as a compact
                # record, which a node with a record field set (``cold``) would make it give up.
                if version is not None and not compact:
                    if extra is None:
                        extra = cold[i] = {}
                    extra["_cache_id"] = version
            outputs[name] = version
        if compact:
            fixed = template.fixed
            nodes[name] = [version, fixed if fixed is not None else _inputs(template, inputs, outputs, redact, True)]
        else:
            params = _inputs(template, inputs, outputs, redact, False)
            nodes[name] = {"code": code.get(name), "output": version, "inputs": params}
    if compact:
        return {"nodes": nodes}
    return {"env": _environment(graph), "nodes": nodes}


_PENDING = NodeStatus.PENDING
_NO_CODE: dict[str, str | None] = {}  # (a compact lineage names no code versions; never changed)
_SUCCEEDED = NodeStatus.SUCCEEDED
_NO_REDACTION = Redactor(())  # (never given secrets of its own: it redacts the process's known secrets alone)


def _redactor(inputs: Mapping[str, Any]) -> Redactor:
    """``Redactor.for_inputs(inputs)``; the one shared redactor of no secret of their own for the common inputs."""
    texts = secret_texts(inputs)
    return Redactor(texts) if texts else _NO_REDACTION


class _Template(list[tuple[Any, ...]]):
    """A node's parameters as ``_inputs`` reads them; ``fixed``: their compact form when it is the same for every
    run (each comes from one upstream node: ``[parameter, source, "node"]``), else None."""

    fixed: list[list[Any]] | None = None


def _templates(graph: Graph) -> dict[str, _Template]:
    """The graph's ``_template``s made so far, by node name."""
    views = graph._views.get("lineage_params")
    if views is None:
        views = graph._views["lineage_params"] = {}
    return views


def _template(graph: Graph, name: str) -> _Template:
    """Node ``name``'s parameters as ``node_inputs`` reads them, once per graph (a graph never changes):
    ``(parameter, source, alternatives)`` of an upstream node (alternatives None: ``source`` alone),
    ``(parameter, source, secret name, has default, default's repr, default's version)`` of a flow input."""
    views = _templates(graph)
    found = views.get(name)
    if found is None:
        g = graph.nodes[name]
        given = {d.param: d for d in g.deps}
        found = _Template()
        for p in g.spec.params:
            dep = given.get(p.name)
            if dep is None:
                continue  # a resource
            if dep.is_node:
                alternatives = dep.alternatives or (dep.source,)
                found.append((p.name, dep.source, None if alternatives == (dep.source,) else alternatives))
            else:
                has = p.default is not MISSING
                secret = is_secret_name(dep.source)
                shown = _shown(p.name, p.default, _NO_REDACTION) if has else None
                version = _version(p.default) if has and not secret and shown != REDACTED_TEXT else None
                found.append((p.name, dep.source, secret, has, shown, version))  # (a secret's digest would name it)
        if all(len(t) == 3 and t[2] is None for t in found):  # (shared by every row's lineage: never changed)
            found.fixed = [[t[0], t[1], "node"] for t in found]
        views[name] = found
    return found


def node_inputs(
    graph: Graph, name: str, inputs: Mapping[str, Any], outputs: Mapping[str, str | None], redact: Redactor
) -> list[list[Any]]:
    """Where each parameter of node ``name`` came from: ``[parameter, source, kind, value, data version]`` with
    ``kind`` ``node`` (``outputs``: the upstream nodes' output versions), ``input`` (the run's ``inputs``) or
    ``default``; ``value`` a short redacted repr (None for a node's output), a secret's version None."""
    return _inputs(_template(graph, name), inputs, outputs, redact, False)


_PLAIN_INPUTS = frozenset({int, bool, float, type(None)})  # shown by their repr, no text of a secret in them


def _inputs(
    template: _Template,
    inputs: Mapping[str, Any],
    outputs: Mapping[str, str | None],
    redact: Redactor,
    compact: bool,
) -> list[list[Any]]:
    """``node_inputs`` from the node's ``_template``; ``compact``: a node's output as a row keeps it,
    ``[parameter, source, "node"]`` (its version is that node's output, written once)."""
    params: list[list[Any]] = []
    plain = not redact  # no secret of the run's nor known in the process: no text to look for
    for t in template:
        if len(t) == 3:
            param, source, alternatives = t
            up = source if alternatives is None else next((a for a in alternatives if a in outputs), source)
            params.append([param, up, "node"] if compact else [param, up, "node", None, outputs.get(up)])
            continue
        param, source, secret_name, has, shown, version = t
        if source in inputs:
            value = inputs[source]
            if plain and not secret_name and type(value) in _PLAIN_INPUTS:  # (the common input: a number)
                text = repr(value)
                if len(text) > _VALUE_TEXT:
                    text = text[: _VALUE_TEXT - 3] + "..."
                params.append([param, source, "input", text, _version(value)])
                continue
            secret = secret_name or isinstance(value, Secret) or (isinstance(value, str) and redact(value) != value)
            params.append([param, source, "input", _shown(source, value, redact), None if secret else _version(value)])
        elif has:
            params.append([param, source, "default", REDACTED_TEXT if secret_name else redact(shown), version])
    return params


def row_lineage(run: Run) -> str | None:
    """A finished batch row's lineage as its stored row keeps it when its run is not kept
    (``nbflow._record.lineage.compact``, JSON, redacted); None for a run without its graph."""
    if run.graph is None:
        return None
    redact = _redactor(run._root.inputs)
    try:
        memo = run.__dict__.get("_lineage_memo")  # (computed whole already: the row's form is read from it)
        if memo is not None and memo[0] == (run.status, run.finished_at):
            data = compact(memo[1])
        else:
            data = _lineage_of(run, compact=True, redact=redact)
    except Exception as exc:  # lineage must never lose a row: it says why it is missing
        data = {"error": f"{type(exc).__name__}: {exc}"}
    # Its values redacted (the redactor holds the run's secrets and the process's), never its node names.
    return lineage_json(redacted(data, redact) if redact else data)
