"""save= writes node outputs to files (parquet, csv, json, png, npy), recorded in the run; nf.load reads them back."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbflow as nf


def pipeline(tmp_path: Path) -> nf.Flow:
    flow = nf.Flow("saving")

    @flow.node
    def features(n: int) -> pd.DataFrame:
        return pd.DataFrame({"x": np.arange(n), "y": np.arange(n) * 0.5})

    @flow.node(save=tmp_path / "node_option" / "summary.json")
    def summary(features: pd.DataFrame) -> dict:
        return {"rows": len(features), "mean_y": float(features["y"].mean())}

    @flow.node
    def weights(n: int) -> np.ndarray:
        return np.linspace(0, 1, n)

    @flow.node
    def figure(features: pd.DataFrame):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        ax.plot(features["x"], features["y"])
        plt.close(fig)
        return fig

    return flow


def test_outputs_are_saved_recorded_and_load_back(tmp_path):
    flow = pipeline(tmp_path)
    save = {
        "features": tmp_path / "out" / "features.parquet",
        "weights": tmp_path / "out" / "w.npy",
        "figure": tmp_path / "out" / "plot.png",
    }
    run = flow.run(n=6, save=save, show=False)
    assert run.status is nf.RunStatus.SUCCEEDED
    assert set(run.saved) == {"features", "weights", "figure", "summary"}
    pd.testing.assert_frame_equal(nf.load(run.saved["features"]), run["features"])
    assert nf.load(run.saved["weights"]).tolist() == run["weights"].tolist()
    assert Path(run.saved["figure"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert nf.load(tmp_path / "node_option" / "summary.json") == {"rows": 6, "mean_y": 1.25}
    # a saved output feeds another run as an input
    again = flow.run(n=6, overrides={"features": nf.load(run.saved["features"])}, targets="summary", show=False)
    assert again["summary"] == run["summary"] and again.nodes["features"].overridden


def test_csv_and_json_tables_round_trip(tmp_path):
    flow = pipeline(tmp_path)
    run = flow.run(n=4, save={"features": tmp_path / "f.csv"}, targets="features", show=False)
    pd.testing.assert_frame_equal(nf.load(run.saved["features"]), run["features"])
    run = flow.run(n=4, save={"features": tmp_path / "f.json"}, targets="features", show=False)
    pd.testing.assert_frame_equal(nf.load(run.saved["features"]), run["features"], check_dtype=False)


def test_bad_save_requests_are_refused_before_running(tmp_path):
    flow = pipeline(tmp_path)
    with pytest.raises(nf.UnknownNodeError, match="'featurs'"):
        flow.run(n=2, save={"featurs": tmp_path / "x.parquet"}, show=False)
    with pytest.raises(nf.FlowDefinitionError, match=r"save\['features'\].*\.xlsx.*\.parquet"):
        flow.run(n=2, save={"features": tmp_path / "x.xlsx"}, show=False)


def test_an_output_that_cannot_be_written_warns_naming_the_node(tmp_path):
    flow = pipeline(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = flow.run(n=2, save={"weights": tmp_path / "w.parquet"}, targets="weights", show=False)
    assert run.status is nf.RunStatus.SUCCEEDED and "weights" not in run.saved
    assert any("node 'weights': cannot save its output" in str(w.message) for w in caught)


def test_save_then_keep_writes_before_dropping(tmp_path):
    flow = pipeline(tmp_path)
    run = flow.run(n=3, save={"features": tmp_path / "f.parquet"}, keep=["summary"], show=False)
    assert len(nf.load(run.saved["features"])) == 3
    with pytest.raises(nf.NodeOutputError, match="dropped"):
        run["features"]
