"""Batch inputs from files: an empty cell is None for an input whose hint admits None; bad cells stop the command."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from tests.test_cli import nbflow

FLOWS = """
import nbflow as nf

flow = nf.Flow("fit")

@flow.node
def model(seed: int | None, depth: int, label: str | None = "x", note: str = "") -> str:
    return f"seed={seed!r} depth={depth!r} label={label!r} note={note!r}"
"""


def _flow() -> nf.Flow:
    flow = nf.Flow("blank")

    @flow.node
    def model(seed: int | None, ratio: float, label: str | None = None) -> str:
        return f"{seed!r} {ratio!r} {label!r}"

    return flow


def test_nan_in_a_frame_feeds_none_where_the_hint_admits_it() -> None:
    df = pd.DataFrame({"seed": [1, None], "ratio": [0.5, math.nan], "label": ["a", pd.NA]})
    out = _flow().batch(df, progress=False)
    assert list(out["status"]) == ["succeeded", "succeeded"]
    # seed and label admit None: NaN / pd.NA become None; ratio is a float: NaN is a float and stays
    assert out["model"].tolist() == ["1 0.5 'a'", "None nan None"]


def test_a_list_of_dicts_with_nan_too() -> None:
    out = _flow().batch([{"seed": math.nan, "ratio": 1.0}], progress=False)
    assert out.loc[0, "model"] == "None 1.0 None"


def test_nan_for_an_input_that_does_not_admit_none_still_fails_its_row() -> None:
    flow = nf.Flow("strict")

    @flow.node
    def model(seed: int) -> int:
        return seed

    out = flow.batch(pd.DataFrame({"seed": [1, math.nan]}), progress=False)
    assert list(out["status"]) == ["succeeded", "failed"]
    assert out.loc[1, "error_type"] == "TypeValidationError"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "fitflow.py").write_text(FLOWS)
    return tmp_path


def test_an_empty_csv_cell_is_none_from_the_command_line(project: Path) -> None:
    (project / "cases.csv").write_text("seed,depth,label,note\n1,3,a,n\n,4,,\n")
    p = nbflow(project, "batch", "fitflow:flow", "cases.csv", "-o", "out.jsonl", "--no-progress")
    assert p.returncode == 0, p.stderr
    rows = pd.read_json(project / "out.jsonl", lines=True)
    assert rows["model"].tolist() == [
        "seed=1 depth=3 label='a' note='n'",
        "seed=None depth=4 label=None note=''",  # note is a plain str: its empty cell stays ""
    ]


def test_a_bad_cell_stops_the_batch_before_any_row_runs_naming_row_and_column(project: Path) -> None:
    (project / "cases.csv").write_text("seed,depth\n1,3\n2,deep\n3,4\n4,x\n")
    p = nbflow(project, "batch", "fitflow:flow", "cases.csv", "--store", "runs.db", "--no-progress")
    assert p.returncode == 2, p.stdout + p.stderr
    msg = p.stderr
    assert "row 1, column 'depth': got 'deep' (str), expected int" in msg
    assert "row 3, column 'depth': got 'x' (str)" in msg
    assert "node 'model', parameter 'depth'" in msg and "Nothing ran" in msg
    assert "Traceback" not in msg
    assert not (project / "runs.db").exists()  # nothing ran, nothing stored


def test_a_bad_grid_value_is_named_too(project: Path) -> None:
    (project / "cases.csv").write_text("seed\n1\n")
    p = nbflow(project, "batch", "fitflow:flow", "cases.csv", "--grid", "depth=2", "--grid", "depth=two")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "row 0, grid value depth='two': got 'two' (str), expected int" in p.stderr
