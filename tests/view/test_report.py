"""`nbflow report` and `nf.report`: one self-contained HTML file (data and scripts inline, nothing fetched)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nbflow as nf
from nbflow._view import report as report_module
from tests.view.conftest import digest, hostile_store, qa_flow


def _data(path: Path) -> dict:
    text = path.read_text()
    found = re.search(r'<script type="application/json" id="nbx-data">(.*?)</script>', text, re.S)
    assert found is not None
    return json.loads(found.group(1))


def _self_contained(text: str) -> None:
    assert "<link" not in text and not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "default-src 'none'" in text  # the page's policy: no request leaves it


def test_cli_report_of_a_comparison_is_one_self_contained_file(runs_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    before = digest(runs_db)
    done = subprocess.run(
        [sys.executable, "-m", "nbflow", "report", str(runs_db), "v1", "--vs", "v2", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and out.exists()
    text = out.read_text()
    _self_contained(text)
    data = _data(out)
    assert data["start"].startswith("#/c/")
    from urllib.parse import unquote

    cmp = data["compare"][unquote(data["start"][2:])]
    assert cmp["summary"] == nf.compare(nf.load_batch(runs_db, "v1"), nf.load_batch(runs_db, "v2")).attrs["summary"]
    (eid,) = [k for k, e in data["experiment"].items() if e["name"] == "v1"]
    assert len(data["experiment"][eid]["page"]["rows"]) == 15
    failed = [r for r in data["experiment"][eid]["page"]["rows"] if r["status"] == "failed"]
    detail = data["rows"][eid][str(failed[0]["__index"])]
    assert any(n["traceback"] for n in detail["nodes"]) and data["rows"][eid]["graph"].startswith("<svg")
    assert str(runs_db.parent) not in text  # no folder of the user's in the page
    assert digest(runs_db) == before


def test_cli_report_names_the_experiments_when_one_is_missing(runs_db: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nbflow", "report", str(runs_db), "v3", "-o", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "no experiment 'v3'" in done.stderr and "'v1'" in done.stderr


def test_nf_report_of_a_frame_with_secrets_keeps_them_out(tmp_path: Path) -> None:
    flow = nf.Flow("secretive")

    @flow.node
    def call(question: str, api_key: str) -> str:
        if question == "bad":
            raise RuntimeError(f"auth failed for key {api_key}")
        return f"answer to {question} (key {api_key})"

    df = flow.batch([{"question": q, "api_key": nf.Secret("sk-TOPSECRET-123")} for q in ("a", "bad")], progress=False)
    path = nf.report(df, tmp_path / "r.html")
    text = path.read_text()
    assert "sk-TOPSECRET-123" not in text
    data = _data(path)
    rows = data["experiment"]["0"]["page"]["rows"]
    assert {r["status"] for r in rows} == {"succeeded", "failed"}
    assert any(
        d["nodes"] for k, d in data["rows"]["0"].items() if k != "graph"
    )  # the failed row's kept run is in the file
    marks = {r["status"]: (r["__detail"], r["__kept"]) for r in rows}
    assert marks == {"failed": (True, True), "succeeded": (True, True)}  # by default every row's run is kept
    df = flow.batch(
        [{"question": q, "api_key": nf.Secret("sk-TOPSECRET-123")} for q in ("a", "bad")], keep="failed", progress=False
    )
    rows = _data(nf.report(df, tmp_path / "failed.html"))["experiment"]["0"]["page"]["rows"]
    marks = {r["status"]: (r["__detail"], r["__kept"]) for r in rows}
    assert marks == {"failed": (True, True), "succeeded": (True, False)}  # keep="failed": marked, its values open


def test_report_rows_are_capped_with_a_stated_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_module, "REPORT_ROWS", 10)
    monkeypatch.setattr(report_module, "REPORT_DETAILS", 4)
    flow = qa_flow()
    df = flow.batch([{"question": f"q{i}"} for i in range(8)], grid={"prompt": ["a", "b"]}, progress=False)
    data = _data(nf.report(df, tmp_path / "r.html"))
    page = data["experiment"]["0"]["page"]
    assert len(page["rows"]) == 10 and page["capped"] and data["experiment"]["0"]["total"] == 16
    assert len([k for k in data["rows"]["0"] if k != "graph"]) <= 4


def test_report_embeds_hostile_text_as_data_only(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    db = hostile_store(tmp_path / "evil.db", marker)
    out = report_module.report_store([db], "<script>window.pwned=6</script>", tmp_path / "r.html")
    text = out.read_text()
    assert not marker.exists()
    body = text.split('id="nbx-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in body  # every "<" of the data is \u003c: nothing in it can end the script or start a tag
    assert "window.pwned" in body  # (the text is there, as data)


def test_nf_report_refuses_what_is_not_a_batch_frame(tmp_path: Path) -> None:
    with pytest.raises(nf.BatchError, match="batch frame"):
        nf.report("runs.db", tmp_path / "r.html")
    flow = qa_flow()
    df = flow.batch([{"question": "one"}], grid={"prompt": ["a"]}, progress=False)
    with pytest.raises(nf.BatchError, match=r"\.html"):
        nf.report(df, tmp_path / "r.txt")


@pytest.mark.usefixtures("forget_generated_secrets")
def test_a_secret_equal_to_a_status_or_node_name_leaves_the_report_readable(tmp_path: Path) -> None:
    # Learned secrets whose texts are also a status and a node's name: the page keeps its own words; a real secret
    # (a key echoed in an output and an error, and in a grid compare) stays out of the file.
    nf.Secret("succeeded")
    nf.Secret("summarize")
    flow = nf.Flow("words")

    @flow.node
    def summarize(question: str, api_key: str, v: str) -> float:
        if question == "bad":
            raise RuntimeError(f"auth failed for key {api_key}")
        return 1.0 if v == "b" else 0.5

    key = nf.Secret("sk-TOPSECRET-456")
    df = flow.batch(
        [{"question": q, "api_key": key} for q in ("a", "c", "bad")], grid={"v": ["a", "b"]}, progress=False
    )
    path = nf.report(df, tmp_path / "r.html")
    text = path.read_text()
    assert "sk-TOPSECRET-456" not in text
    data = _data(path)
    exp = data["experiment"]["0"]
    assert exp["outputs"] == ["summarize"]
    assert sorted(r["status"] for r in exp["page"]["rows"]) == ["failed", "failed"] + ["succeeded"] * 4
    assert {status for p in exp["progress"] for status in p["counts"]} >= {"succeeded", "failed"}
    details = [d for k, d in data["rows"]["0"].items() if k != "graph"]
    assert {n["name"] for d in details for n in d["nodes"]} == {"summarize"}
    assert {n["status"] for d in details for n in d["nodes"]} == {"succeeded", "failed"}
    assert {d["values"]["status"] for d in details} == {"succeeded", "failed"}
    assert any("auth failed for key" in (n["error"] or "") for d in details for n in d["nodes"])
    compares = [c for k, c in data["compare"].items() if k.startswith("v/")]
    assert compares and all("summarize" in " ".join(c["columns"]) for c in compares)
