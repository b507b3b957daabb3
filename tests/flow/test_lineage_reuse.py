"""Lineage of reused and not-kept batch rows, and what a node's spans carry (issue 34, lineage items)."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import pandas as pd

import nbflow as nf


def _pipe(name: str = "pipe") -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def raw(n: int, noise: float = 0.1, seed: int = 0) -> pd.DataFrame:
        return pd.DataFrame({"x": [(i * 7 + seed) % 5 * noise for i in range(n * 100)]})

    @flow.node
    def score(raw: pd.DataFrame) -> float:
        return float(raw["x"].sum())

    return flow


def _edit_score(flow: nf.Flow) -> None:
    @flow.node
    def score(raw: pd.DataFrame) -> float:
        return float(raw["x"].sum()) * 2


def test_a_reused_node_records_the_inputs_it_was_fed_by_reference(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _pipe()
    flow.batch([{"n": 3}, {"n": 4, "seed": 2}], store=db, batch_id="b", progress=False)
    values_before = sqlite3.connect(db).execute("SELECT count(*) FROM nbflow_values").fetchone()[0]
    _edit_score(flow)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nf.NbflowWarning)
        again = flow.batch([{"n": 3}, {"n": 4, "seed": 2}], store=db, batch_id="b", resume=True, progress=False)
    assert [list(r) for r in again["reused"]] == [["raw"]] * 2
    run = again.nbflow.run(1)
    assert run.nodes["raw"].cached
    assert run.nodes["raw"].inputs == {"n": 4, "seed": 2}  # what it was fed (its defaults: in the lineage)
    assert run.nodes["score"].inputs["raw"] is run.nodes["raw"].output

    # Stored: the re-run rows added no copy of the frames (the fed output and score's input are one value).
    values_after = sqlite3.connect(db).execute("SELECT count(*) FROM nbflow_values").fetchone()[0]
    assert values_after == values_before
    loaded = nf.load_run(db, run.run_id)
    assert loaded.nodes["raw"].inputs == {"n": 4, "seed": 2}
    lin = loaded.lineage("score")
    got = {(r.node, r.parameter): (r.kind, r.value) for r in lin.itertuples()}
    assert got["raw", "seed"] == ("input", "2") and got["raw", "noise"] == ("default", "0.1")
    rows = {(r.node, r.parameter): r for r in lin.itertuples()}
    assert rows["score", "raw"].data_version == rows["raw", "n"].output_version  # the chain is whole
