"""OpenLineage export of a stored run: ``nbflow lineage RUNS.db RUN_ID --openlineage`` and ``nf.openlineage_events``,
checked against the required fields, types and formats of the OpenLineage 2-0-2 ``RunEvent`` spec and its
facets (written out below as a JSON Schema, with ``jsonschema``)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest

import nbflow as nf
from tests.test_cli import nbflow

SECRET = "sk-ol-secret-31337"

PIPE = """
import nbflow as nf

flow = nf.Flow("olpipe")


@flow.node
def raw(n: int, noise: float = 0.1, seed: int = 0) -> list[float]:
    return [(i * 7 + seed) % 5 * noise for i in range(n)]


@flow.node
def score(raw: list[float], api_key: str) -> float:
    return sum(raw)


@flow.node
def report(score: float, strict: bool = False) -> str:
    if strict:
        raise ValueError(f"score {score} too low")
    return f"score={score}"
"""

_FACET = {
    "type": "object",
    "required": ["_producer", "_schemaURL"],
    "properties": {"_producer": {"type": "string", "format": "uri"}, "_schemaURL": {"type": "string", "format": "uri"}},
}


def _named(**facets: list[str]) -> dict:
    """A job or dataset: namespace and name, facets (each a base facet; ``facets``: the required fields of some)."""
    return {
        "type": "object",
        "required": ["namespace", "name"],
        "properties": {
            "namespace": {"type": "string"},
            "name": {"type": "string"},
            "facets": {
                "type": "object",
                "additionalProperties": _FACET,
                "properties": {k: {"allOf": [_FACET, {"required": v}]} for k, v in facets.items()},
            },
        },
    }


_DATASET = _named(version=["datasetVersion"])
RUN_EVENT = {  # OpenLineage 2-0-2: RunEvent, Run, Job, InputDataset/OutputDataset, BaseFacet; facets used
    "type": "object",
    "required": ["eventTime", "producer", "schemaURL", "run", "job"],
    "properties": {
        "eventType": {"enum": ["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]},
        "eventTime": {"type": "string"},
        "producer": {"type": "string", "format": "uri"},
        "schemaURL": {"type": "string", "format": "uri"},
        "run": {
            "type": "object",
            "required": ["runId"],
            "properties": {
                "runId": {"type": "string", "format": "uuid"},
                "facets": {
                    "type": "object",
                    "additionalProperties": _FACET,
                    "properties": {
                        "parent": {
                            "allOf": [
                                _FACET,
                                {
                                    "required": ["run", "job"],
                                    "properties": {
                                        "run": {"required": ["runId"], "properties": {"runId": {"format": "uuid"}}},
                                        "job": {"required": ["namespace", "name"]},
                                    },
                                },
                            ]
                        },
                        "processing_engine": {"allOf": [_FACET, {"required": ["version"]}]},
                        "errorMessage": {"allOf": [_FACET, {"required": ["message", "programmingLanguage"]}]},
                    },
                },
            },
        },
        "job": _named(jobType=["processingType", "integration"]),
        "inputs": {"type": "array", "items": _DATASET},
        "outputs": {"type": "array", "items": _DATASET},
    },
}


def _valid(event: dict) -> None:
    jsonschema.validate(event, RUN_EVENT, format_checker=jsonschema.FormatChecker())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["eventTime"])
    datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))
    uuid.UUID(event["run"]["runId"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "olpipe.py").write_text(PIPE)
    return tmp_path


def _stored_run(project: Path, *inputs: str) -> str:
    done = nbflow(
        project,
        "run",
        "olpipe:flow",
        "-i",
        "n=4",
        *inputs,
        "--secret",
        "api_key=OL_KEY",
        "--store",
        "runs.db",
        env={"OL_KEY": SECRET},
    )
    found = re.search(r"^run (\w+) of flow", done.stdout, re.M)
    assert found is not None, done.stdout + done.stderr
    return found[1]


def test_a_stored_run_exports_valid_openlineage_events(project: Path) -> None:
    run_id = _stored_run(project)
    done = nbflow(project, "lineage", "runs.db", run_id, "--openlineage", "--namespace", "team-ml", "-o", "ol.jsonl")
    assert done.returncode == 0, done.stderr
    text = (project / "ol.jsonl").read_text()
    assert SECRET not in text
    events = [json.loads(line) for line in text.splitlines()]
    for e in events:
        _valid(e)
    by = {(e["job"]["name"], e["eventType"]): e for e in events}
    assert [(e["job"]["name"], e["eventType"]) for e in (events[0], events[-1])] == [
        ("olpipe", "START"),
        ("olpipe", "COMPLETE"),
    ]
    assert set(by) == {
        (j, t) for j in ("olpipe", "olpipe.raw", "olpipe.score", "olpipe.report") for t in ("START", "COMPLETE")
    }
    assert {e["job"]["namespace"] for e in events} == {"team-ml"}
    flow_run = events[0]["run"]["runId"]
    for name in ("raw", "score", "report"):
        parent = by[f"olpipe.{name}", "START"]["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == flow_run and parent["job"] == {"namespace": "team-ml", "name": "olpipe"}

    # The same data versions as the run's lineage: raw's output is score's input, by name and version.
    lin = nf.load_run(project / "runs.db", run_id).lineage()
    raw_version = lin[lin["node"] == "raw"]["output_version"].iloc[0]
    (raw_out,) = by["olpipe.raw", "COMPLETE"]["outputs"]
    assert raw_out["name"] == "olpipe.raw" and raw_out["facets"]["version"]["datasetVersion"] == raw_version
    (score_in,) = by["olpipe.score", "START"]["inputs"]
    assert score_in["name"] == "olpipe.raw" and score_in["facets"]["version"]["datasetVersion"] == raw_version
    assert [d["name"] for d in events[-1]["outputs"]] == ["olpipe.report"]  # the flow's end product
    # Code version and resolved inputs, defaults included, in the node's nbflow facet.
    facet = by["olpipe.raw", "COMPLETE"]["run"]["facets"]["nbflow"]
    assert facet["codeVersion"] == lin[lin["node"] == "raw"]["code_version"].iloc[0]
    params = {p["parameter"]: p for p in facet["inputs"]}
    assert (params["noise"]["kind"], params["noise"]["value"]) == ("default", "0.1")
    assert (params["n"]["kind"], params["n"]["value"]) == ("input", "4")
    key = {p["parameter"]: p for p in by["olpipe.score", "START"]["run"]["facets"]["nbflow"]["inputs"]}["api_key"]
    assert key["value"] == "[REDACTED]" and key["dataVersion"] is None
    engine = events[0]["run"]["facets"]["processing_engine"]
    assert engine["name"] == "nbflow" and engine["version"] == nf.__version__

    # The same run exports the same events (run ids derived from nbflow's), to stdout too.
    again = nbflow(project, "lineage", "runs.db", run_id, "--openlineage", "--namespace", "team-ml")
    assert [json.loads(line) for line in again.stdout.splitlines()] == events


def test_a_failed_node_is_a_fail_event_with_its_error(project: Path) -> None:
    run_id = _stored_run(project, "-i", "strict=true")
    events = nf.openlineage_events(nf.load_run(project / "runs.db", run_id))
    for e in events:
        _valid(e)
    failed = [e for e in events if e["eventType"] == "FAIL"]
    assert [e["job"]["name"] for e in failed] == ["olpipe.report", "olpipe"]
    error = failed[0]["run"]["facets"]["errorMessage"]
    assert error["message"].startswith("ValueError: score") and error["programmingLanguage"] == "PYTHON"
    assert "raise ValueError" in error["stackTrace"] and failed[0]["outputs"] == []


def test_the_lineage_command_prints_the_table_and_refuses_bad_use(project: Path) -> None:
    run_id = _stored_run(project)
    table = nbflow(project, "lineage", "runs.db", run_id, "--node", "raw")
    assert table.returncode == 0, table.stderr
    assert "noise: default = 0.1" in table.stdout and "score" not in table.stdout
    unknown = nbflow(project, "lineage", "runs.db", "nope")
    assert unknown.returncode == 2 and "has no run 'nope'" in unknown.stderr
    mixed = nbflow(project, "lineage", "runs.db", run_id, "--openlineage", "--node", "raw")
    assert mixed.returncode == 2 and "--node is for the lineage table" in mixed.stderr
