"""A finished run as OpenLineage ``RunEvent`` s (plain JSON data, no OpenLineage package needed).

The flow is a job (``namespace``, its name) with a run; each node is a job of its own (``flow.node``) whose
run names the flow's run as its parent (the ``parent`` facet, as an orchestrator's tasks do), with a START
and a COMPLETE / FAIL / ABORT event. A node's output is a dataset (``flow.node``) whose ``version`` facet is
its data version, so a consumer (Marquez, a catalog) links each node to the outputs it read by name and
version. What is not a dataset travels in facets: the node's code version and its resolved inputs, defaults
included (``nbflow`` run facet: the run's lineage, ``nbflow._engine.lineage``), the nbflow and Python
versions, packages and git commit of the flow's run (``processing_engine`` and ``nbflow`` run facets), a
failed node's error (``errorMessage``). Everything comes from what the run records (a stored run: what its
checkpoint kept, redacted as stored); run ids are UUIDs derived from nbflow's (the same run gives the same
events). Spec: OpenLineage 2-0-2 (docs/lineage.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from nbflow._core.secrets import gate

if TYPE_CHECKING:
    from nbflow._record.run import Run

__all__ = ["SCHEMA_URL", "openlineage_events"]

SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_FACETS = "https://openlineage.io/spec/facets/"
_PARENT = _FACETS + "1-0-1/ParentRunFacet.json#/$defs/ParentRunFacet"
_ENGINE = _FACETS + "1-1-0/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet"
_JOB_TYPE = _FACETS + "2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
_VERSION = _FACETS + "1-0-0/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet"
_ERROR = _FACETS + "1-0-0/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
_END = {"succeeded": "COMPLETE", "failed": "FAIL", "cancelled": "ABORT", "skipped": "ABORT"}


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _run_uuid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "nbflow:" + "/".join(parts)))


def openlineage_events(run: Run, *, namespace: str = "nbflow") -> list[dict[str, Any]]:
    """OpenLineage ``RunEvent`` s (JSON-ready dicts, in time order) for ``run``: its flow's START and end, and each
    node's, with the node outputs as versioned datasets (see the module docstring and docs/lineage.md).

    ``run``: a finished run, in memory or loaded from a store (``nf.load_run``). Write them as JSON lines
    (``nbflow lineage RUNS.db RUN_ID --openlineage``) or send each to an OpenLineage endpoint.
    Raises NbflowError when the run has no lineage (a run stored by an nbflow before lineage).
    """
    from nbflow._core.errors import NbflowError

    try:
        data = run._lineage if run._lineage is not None else run._flow._lineage_of(run) if run._flow else None
    except Exception as exc:
        raise NbflowError(f"run {run.run_id}: no lineage ({type(exc).__name__}: {exc})") from None
    if data is None or "error" in data:
        why = data["error"] if data else "a run stored by an nbflow before lineage, or without its flow"
        raise NbflowError(f"run {run.run_id}: no lineage to export ({why})")
    env: Mapping[str, Any] = data.get("env") or {}
    producer = f"urn:nbflow:{env.get('nbflow') or '0'}"  # (the nbflow that ran it)
    nodes: Mapping[str, Any] = data.get("nodes") or {}
    flow = run.flow
    flow_run = _run_uuid(run.run_id)

    def facet(schema: str, **fields: Any) -> dict[str, Any]:
        return {"_producer": producer, "_schemaURL": schema, **fields}

    def dataset(node: str, version: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"namespace": namespace, "name": f"{flow}.{node}"}
        if version:
            out["facets"] = {"version": facet(_VERSION, datasetVersion=version)}
        return out

    def job(name: str, kind: str) -> dict[str, Any]:
        return {
            "namespace": namespace,
            "name": name,
            "facets": {"jobType": facet(_JOB_TYPE, processingType="BATCH", integration="NBFLOW", jobType=kind)},
        }

    def event(kind: str, at: float, job_: dict[str, Any], run_: dict[str, Any], **more: Any) -> dict[str, Any]:
        return {
            "eventType": kind,
            "eventTime": _time(at),
            "producer": producer,
            "schemaURL": SCHEMA_URL,
            "job": job_,
            "run": run_,
            **more,
        }

    git = env.get("git") or {}
    engine = facet(_ENGINE, name="nbflow", version=str(env.get("nbflow") or "0"))
    flow_facets = {
        "processing_engine": engine,
        "nbflow": facet(
            producer + "#/facets/run",
            runId=run.run_id,
            status=run.status.value,
            python=env.get("python"),
            packages=env.get("packages") or {},
            git=git or None,
        ),
    }
    read = {p[1] for info in nodes.values() for p in info["inputs"] if p[2] == "node"}
    sinks = [dataset(n, info["output"]) for n, info in nodes.items() if n not in read and info["output"]]
    flow_job = job(flow, "FLOW")
    started = (
        run.started_at
        if run.started_at is not None
        else min((r.started_at for r in run.nodes.values() if r.started_at is not None), default=0.0)
    )
    events = [event("START", started, flow_job, {"runId": flow_run, "facets": flow_facets}, inputs=[], outputs=[])]
    parent = facet(_PARENT, run={"runId": flow_run}, job={"namespace": namespace, "name": flow})
    for name, info in nodes.items():
        rec = run.nodes.get(name)
        if rec is None or rec.started_at is None:
            continue
        node_run: dict[str, Any] = {
            "runId": _run_uuid(run.run_id, name),
            "facets": {
                "parent": parent,
                "nbflow": facet(
                    producer + "#/facets/node",
                    runId=run.run_id,
                    node=name,
                    status=rec.status.value,
                    codeVersion=info["code"],
                    cached=bool(rec.cached),
                    attempts=len(rec.attempts),
                    inputs=[
                        {"parameter": p, "source": s, "kind": k, "value": v, "dataVersion": dv}
                        for p, s, k, v, dv in info["inputs"]
                    ],
                ),
            },
        }
        node_job = job(f"{flow}.{name}", "NODE")
        inputs = [dataset(p[1], p[4]) for p in info["inputs"] if p[2] == "node"]
        events.append(event("START", rec.started_at, node_job, node_run, inputs=inputs, outputs=[]))
        end = _END.get(rec.status.value)
        if end is None:  # still running, or paused: no end yet
            continue
        ended = dict(node_run, facets=dict(node_run["facets"]))
        if rec.status.value == "failed" and rec.error is not None:
            ended["facets"]["errorMessage"] = facet(
                _ERROR,
                message=gate(f"{rec.error_type}: {rec.error}"),
                programmingLanguage="PYTHON",
                **({"stackTrace": gate(rec.traceback)} if rec.traceback else {}),
            )
        outputs = [dataset(name, info["output"])] if rec.status.value == "succeeded" else []
        at = rec.finished_at if rec.finished_at is not None else rec.started_at
        events.append(event(end, at, node_job, ended, inputs=inputs, outputs=outputs))
    end = _END.get(run.status.value)
    if end is not None:
        ends = [r.finished_at for r in run.nodes.values() if r.finished_at is not None]
        at = run.finished_at if run.finished_at is not None else max(ends, default=started)
        events.append(event(end, at, flow_job, {"runId": flow_run, "facets": flow_facets}, inputs=[], outputs=sinks))
    events.sort(key=lambda e: e["eventTime"])  # (ISO times of one zone sort as text; sort keeps START first)
    return events
