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
from nbflow._core.secrets import REDACTED_TEXT, Redactor, Secret, is_secret_name
from nbflow._core.states import NodeStatus
from nbflow._engine.caching import data_version, node_fingerprints

if TYPE_CHECKING:
    from nbflow._graph.graph import Graph
    from nbflow._record.run import Run

__all__ = ["code_versions", "environment", "git_commit", "lineage_of", "node_inputs"]

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
    found = graph._views.get("lineage_environment")
    if found is None:
        folder = _code_folder(graph)
        found = graph._views["lineage_environment"] = {
            "nbflow": _nbflow_version(),
            "python": sys.version.split()[0],
            "packages": _packages(graph),
            "git": git_commit(folder) if folder is not None else None,
        }
    return dict(found)


def code_versions(graph: Graph, validate: bool) -> dict[str, str | None]:
    """``node_fingerprints`` once per graph (a graph never changes)."""
    found = graph._views.get("lineage_code")
    if found is None:
        found = graph._views["lineage_code"] = node_fingerprints(graph, validate)
    return found


def _version(value: Any) -> str | None:
    if value is MISSING:
        return None
    return data_version(value)


def _shown(name: str, value: Any, redact: Redactor) -> str:
    if isinstance(value, Secret) or is_secret_name(name):
        return REDACTED_TEXT
    text = redact(repr(value))
    return text if len(text) <= _VALUE_TEXT else text[: _VALUE_TEXT - 3] + "..."


def lineage_of(run: Run) -> dict[str, Any]:
    """The run's lineage as JSON-friendly data (what a checkpoint stores). Needs ``run.graph``."""
    graph = run.graph
    if graph is None:
        raise ValueError("the run has no graph")
    flow = run._flow
    validate = bool(getattr(flow, "validate", True))
    code = code_versions(graph, validate)
    redact = Redactor.for_inputs(run._root.inputs)
    outputs: dict[str, str | None] = {}
    nodes: dict[str, Any] = {}
    for name in run.nodes:
        rec = run.nodes[name]
        g = graph.nodes.get(name)
        if g is None or rec.status is NodeStatus.PENDING:
            continue
        if rec.status is NodeStatus.SUCCEEDED:
            cached = rec._cache_id
            outputs[name] = cached if isinstance(cached, str) else _version(rec.output)
        params = node_inputs(graph, name, run.inputs, outputs, redact)
        nodes[name] = {"code": code.get(name), "output": outputs.get(name), "inputs": params}
    return {"env": environment(graph), "nodes": nodes}


def node_inputs(
    graph: Graph, name: str, inputs: Mapping[str, Any], outputs: Mapping[str, str | None], redact: Redactor
) -> list[list[Any]]:
    """Where each parameter of node ``name`` came from: ``[parameter, source, kind, value, data version]`` with
    ``kind`` ``node`` (``outputs``: the upstream nodes' output versions), ``input`` (the run's ``inputs``) or
    ``default``; ``value`` a short redacted repr (None for a node's output), a secret's version None."""
    g = graph.nodes[name]
    params: list[list[Any]] = []
    given = {d.param: d for d in g.deps}
    for p in g.spec.params:
        dep = given.get(p.name)
        if dep is None:
            continue  # a resource
        if dep.is_node:
            up = next((a for a in (dep.alternatives or (dep.source,)) if a in outputs), dep.source)
            params.append([p.name, up, "node", None, outputs.get(up)])
        elif dep.source in inputs:
            value = inputs[dep.source]
            secret = (
                isinstance(value, Secret)
                or is_secret_name(dep.source)
                or (isinstance(value, str) and redact(value) != value)
            )
            version = None if secret else _version(value)
            params.append([p.name, dep.source, "input", _shown(dep.source, value, redact), version])
        elif p.default is not MISSING:
            params.append([p.name, dep.source, "default", _shown(p.name, p.default, redact), _version(p.default)])
    return params
