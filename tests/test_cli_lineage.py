"""``nbflow show``: a node attempt's captured output and a batch row's lineage, through the real command on real
SQLite stores (issue 34, lineage and logs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_cli import nbflow

LOUD = """
import logging
import warnings

import nbflow as nf

flow = nf.Flow("loud", retry=nf.Retry(attempts=2, backoff=0.01))
log = logging.getLogger("loud")
tries = {"n": 0}


@flow.node
def fetch(x: int, api_key: str, noise: float = 0.5) -> int:
    tries["n"] += 1
    print(f"try {tries['n']} with key {api_key}")
    if tries["n"] == 1:
        raise ConnectionError("flaky")
    log.warning("slow answer for %s", x)
    warnings.warn("old endpoint")
    return x + 1


@flow.node
def chatty(fetch: int) -> int:
    for i in range(100):
        print(f"line {i}")
    return fetch * 2
"""

SWEEP = """
import nbflow as nf

flow = nf.Flow("sweep")


@flow.node
def raw(n: int, noise: float = 0.1, seed: int = 0) -> list[float]:
    print(f"raw n={n}")
    return [(i * 7 + seed) % 5 * noise for i in range(n)]


@flow.node
def score(raw: list[float]) -> float:
    return sum(raw)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "loud.py").write_text(LOUD)
    (tmp_path / "sweep.py").write_text(SWEEP)
    return tmp_path


def test_show_prints_each_attempts_captured_output_redacted(project: Path) -> None:
    env = {"LOUD_KEY": "sk-loud-secret-4242"}
    ran = nbflow(
        project, "run", "loud:flow", "-i", "x=3", "--secret", "api_key=LOUD_KEY", "--store", "runs.db", env=env
    )
    assert ran.returncode == 0, ran.stderr
    found = re.search(r"^run (\w+) of flow 'loud'", ran.stdout, re.M)
    assert found is not None, ran.stdout
    run_id = found[1]
    shown = nbflow(project, "show", "runs.db", run_id)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "output of fetch (attempt 1 of 2):\n  try 1 with key [REDACTED]\n" in out
    assert (
        "output of fetch (attempt 2 of 2):\n  try 2 with key [REDACTED]\n  WARNING loud: slow answer for 3\n"
        "  UserWarning: old endpoint\n" in out
    )
    assert "output of chatty:\n  line 0\n" in out and "  line 39\n" in out and "  line 40\n" not in out
    assert "[... 60 more lines: --show-outputs prints them all]" in out
    assert "sk-loud-secret-4242" not in out
    assert "noise: default = 0.5" in out  # the lineage follows, defaults included
    full = nbflow(project, "show", "runs.db", run_id, "--show-outputs")
    assert "  line 99\n" in full.stdout and "more lines" not in full.stdout
    assert b"sk-loud-secret-4242" not in (project / "runs.db").read_bytes()


def test_show_a_batch_row_kept_or_not(project: Path) -> None:
    cases = project / "cases.jsonl"
    cases.write_text('{"n": 2}\n{"n": 5, "seed": 3}\n')
    for keep, name in (("none", "lean"), ("all", "full")):
        done = nbflow(
            project, "batch", "sweep:flow", str(cases), "--store", "runs.db", "--keep", keep, "--experiment", name
        )
        assert done.returncode == 0, done.stderr

    lean = nbflow(project, "show", "runs.db", "lean", "--row", "1")
    assert lean.returncode == 0, lean.stderr
    assert "row 1 (run " in lean.stdout and "SUCCEEDED; its run was not kept" in lean.stdout
    assert "n: input 'n' = 5" in lean.stdout and "seed: input 'seed' = 3" in lean.stdout
    assert "noise: default = 0.1" in lean.stdout and "raw: output of 'raw'" in lean.stdout
    assert "lineage: nbflow" in lean.stdout

    first = nbflow(project, "show", "runs.db", "lean", "--row", "0", "--lineage", "raw")
    assert "seed: default = 0" in first.stdout  # a row without a seed: the default ran
    assert "raw: output of 'raw'" not in first.stdout  # only raw and what is upstream of it

    full = nbflow(project, "show", "runs.db", "full", "--row", "1")
    assert full.returncode == 0, full.stderr
    assert "of flow 'sweep': SUCCEEDED" in full.stdout  # the kept run's tree
    assert "output of raw:\n  raw n=5\n" in full.stdout
    assert "noise: default = 0.1" in full.stdout
    # The same row's data versions whether its run was kept or not.
    versions = [ln for ln in lean.stdout.splitlines() if "  code " in ln]
    assert versions and versions == [ln for ln in full.stdout.splitlines() if "  code " in ln]

    bad = nbflow(project, "show", "runs.db", "lean", "--row", "7")
    assert bad.returncode == 2 and "has no row '7'; its rows: 0, 1" in bad.stderr
