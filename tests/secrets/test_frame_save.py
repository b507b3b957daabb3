"""``df.nbflow.save(path)`` and ``df.nbflow.redacted()``: a batch frame written to a file (parquet, CSV, JSON
lines) holds no secret, whatever its name's case and even where a node echoed it, and reads back as the
same rows; the frame in memory keeps the real values."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import nbflow as nf

HF = "hf_upperCaseNameSecret123"
SK = "sk-plainNameSecretValue456"


def _frame(tmp_path, store: bool = False) -> pd.DataFrame:
    flow = nf.Flow("save_secrets")

    @flow.node
    def call(prompt: str, HF_TOKEN: str, key: str) -> dict:
        if prompt == "boom":
            raise RuntimeError(f"auth failed for token {HF_TOKEN} and key {key}")  # a client echoing its keys
        return {"answer": prompt.upper(), "debug": f"used {key}"}

    @flow.node
    def score(call: dict) -> float:
        return float(len(call["answer"]))

    rows = pd.DataFrame(
        {"prompt": ["hi", "boom", "hello"], "HF_TOKEN": [HF] * 3, "key": pd.Series([nf.Secret(SK)] * 3, dtype=object)}
    )
    kwargs = {"store": str(tmp_path / "runs.db")} if store else {}
    return flow.batch(rows, outputs=["call", "score"], progress=False, **kwargs)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_a_saved_frame_holds_no_secret_and_reads_back_as_the_same_rows(tmp_path, suffix):
    frame = _frame(tmp_path)
    path = frame.nbflow.save(tmp_path / f"results{suffix}")
    data = path.read_bytes()
    assert HF.encode() not in data and SK.encode() not in data
    assert b"[REDACTED]" in data
    back = (
        pd.read_parquet(path)
        if suffix == ".parquet"
        else pd.read_csv(path)
        if suffix == ".csv"
        else pd.read_json(path, lines=True)
    )
    assert list(back.columns) == list(frame.columns)
    assert back["status"].tolist() == ["succeeded", "failed", "succeeded"]
    assert back["score"].tolist()[::2] == [2.0, 5.0]
    assert back["HF_TOKEN"].tolist() == ["[REDACTED]"] * 3 and back["key"].tolist() == ["[REDACTED]"] * 3
    message = back["error_message"][1]
    assert message == "auth failed for token [REDACTED] and key [REDACTED]"
    call = back["call"][0]
    call = call if isinstance(call, dict) else json.loads(call)  # (parquet and CSV: nested values as JSON)
    assert call == {"answer": "HI", "debug": "used [REDACTED]"}
    # the frame in memory is left as it was: your code still has the real values
    assert frame["HF_TOKEN"][0] == HF and HF in frame["error_message"][1] and frame["call"][0]["debug"] == f"used {SK}"


def test_a_saved_parquet_frame_of_a_stored_batch_still_opens_its_rows(tmp_path):
    frame = _frame(tmp_path, store=True)
    path = frame.nbflow.save(tmp_path / "results.parquet")
    back = pd.read_parquet(path)
    assert back.attrs["store"] == str(tmp_path / "runs.db")
    run = back.nbflow.run(0)
    assert run.outputs["score"] == 2.0
    assert "auth failed" in (back.nbflow.traceback(1) or "")  # (a failed row: its run in memory, real values)


def test_redacted_is_a_copy_without_the_secrets(tmp_path):
    frame = _frame(tmp_path)
    clean = frame.nbflow.redacted()
    text = clean.to_json()
    assert HF not in text and SK not in text
    assert clean["error_message"][1] == "auth failed for token [REDACTED] and key [REDACTED]"
    assert clean.nbflow.run(1).nodes["call"].error is not None  # still the batch's frame: its rows open
    assert frame["key"][0] == SK


def test_an_unknown_suffix_is_refused_with_the_formats_and_nothing_is_written(tmp_path):
    frame = _frame(tmp_path)
    with pytest.raises(
        nf.BatchError, match=r"\.parquet, \.csv, \.jsonl; e\.g\. df\.nbflow\.save\('results\.parquet'\)"
    ):
        frame.nbflow.save(tmp_path / "results.xlsx")
    assert list(tmp_path.glob("results*")) == []


def test_a_grid_of_objects_saves_to_parquet_with_its_attributes_as_text(tmp_path):
    class Model:
        def __repr__(self) -> str:
            return "Model('small')"

    flow = nf.Flow("save_grid_objects")

    @flow.node
    def answer(prompt: str, model: object) -> str:
        return f"{prompt} with {model!r}"

    frame = flow.batch([{"prompt": "hi"}], grid={"model": {"small": Model()}}, progress=False)
    path = frame.nbflow.save(tmp_path / "results.parquet")
    back = pd.read_parquet(path)
    assert back["answer"].tolist() == ["hi with Model('small')"]
    assert back.attrs["variants"] == {"model": {"small": "Model('small')"}}


def test_a_batch_frame_with_a_grid_of_objects_writes_to_parquet_with_pandas_too(tmp_path):
    """docs/batch.md promises ``to_parquet`` keeps working: pandas writes ``attrs`` as JSON, so the frame's
    ``variants`` mapping holds a value JSON cannot hold by its repr (the rows feed the real object)."""

    class Model:
        def __repr__(self) -> str:
            return "Model('small')"

    flow = nf.Flow("grid_objects_to_parquet")

    @flow.node
    def answer(prompt: str, model: object, settings: dict) -> str:
        return f"{prompt} with {model!r} at {settings['t']}"

    grid = {"model": {"small": Model()}, "settings": {"cold": {"t": 0.0}}}
    frame = flow.batch([{"prompt": "hi"}], grid=grid, progress=False)
    assert frame["answer"].tolist() == ["hi with Model('small') at 0.0"]
    assert frame.attrs["variants"] == {"model": {"small": "Model('small')"}, "settings": {"cold": {"t": 0.0}}}
    frame.to_parquet(tmp_path / "plain.parquet")
    assert pd.read_parquet(tmp_path / "plain.parquet").attrs["variants"] == frame.attrs["variants"]


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_rows_with_labels_of_their_own_keep_them_in_the_file(tmp_path, suffix):
    flow = nf.Flow(f"save_labels_{suffix[1:]}")

    @flow.node
    def double(x: int) -> int:
        return 2 * x

    rows = pd.DataFrame({"x": [1, 2, 3]}, index=pd.Index(["q7", "q3", "q9"], name="case"))
    frame = flow.batch(rows, progress=False)
    assert list(frame.index) == ["q7", "q3", "q9"]
    path = frame.nbflow.save(tmp_path / f"results{suffix}")
    if suffix == ".parquet":
        back = pd.read_parquet(path)
        assert list(back.index) == ["q7", "q3", "q9"] and back.index.name == "case"
    else:
        back = pd.read_csv(path) if suffix == ".csv" else pd.read_json(path, lines=True)
        assert back["case"].tolist() == ["q7", "q3", "q9"]
    assert back["double"].tolist() == [2, 4, 6]
