"""A batch keeps its rows' results by column and uses the caller's row dicts as they are: it never changes them,
and every row's frame cells, partial frames and stored rows are what they were when each row held a dict."""

from __future__ import annotations

import asyncio
import copy
import math
from pathlib import Path
from typing import Any

import pytest

import nbflow as nf


def _flow(name: str) -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def double(x: int, label: str = "") -> int:
        if x == 3:
            raise ValueError("three")
        if x % 2:
            nf.usage(input_tokens=x)
        return 2 * x

    return flow


def test_the_callers_row_dicts_are_never_changed() -> None:
    flow = _flow("rows_as_given")
    rows: list[dict[str, Any]] = [{"x": i, "note": f"n{i}"} for i in range(6)]
    before = copy.deepcopy(rows)
    df = flow.batch(rows, progress=False)
    assert rows == before  # (no result column added to them)
    one_value_grid = flow.batch(rows, grid={"label": ["a"]}, progress=False)
    repeated = flow.batch(rows, repeats=2, progress=False)
    assert rows == before
    assert list(df["double"].iloc[:3]) == [0, 2, 4] and math.isnan(df["double"].iloc[3])
    assert list(df["status"]) == ["succeeded"] * 3 + ["failed", "succeeded", "succeeded"]
    assert list(one_value_grid["label"]) == ["a"] * 6 and "label" not in rows[0]
    assert len(repeated) == 12 and "sample" not in rows[0]


def test_the_same_dict_given_twice_is_two_rows_and_stays_as_it_was() -> None:
    flow = _flow("rows_twice")
    row = {"x": 5}
    df = flow.batch([row, row], progress=False)
    assert row == {"x": 5}
    assert list(df["double"]) == [10, 10] and list(df["status"]) == ["succeeded"] * 2
    assert df["run_id"].nunique() == 2


def test_usage_and_error_columns_are_per_row_as_before() -> None:
    flow = _flow("rows_usage")
    df = flow.batch([{"x": i} for i in range(5)], progress=False)
    assert list(df["status"]) == ["succeeded"] * 3 + ["failed", "succeeded"]
    assert df.loc[3, "error_type"] == "ValueError" and df.loc[3, "error_node"] == "double"
    assert df["error_type"].isna().sum() == 4
    # usage reported by odd rows only: the finished rows that reported nothing count 0, as before
    # (row 3 failed before it reported any; row 1 reported tokens but no cost)
    assert list(df["input_tokens"]) == [0, 1, 0, 0, 0]
    assert math.isnan(df.loc[1, "cost"]) and df["cost"].drop(index=1).eq(0).all()
    assert df.attrs["counts"] == {"succeeded": 4, "failed": 1}


def test_a_stored_row_is_written_whole_and_read_back(tmp_path: Path) -> None:
    flow = _flow("rows_stored")
    rows = [{"x": i, "note": f"n{i}"} for i in range(5)]
    db = tmp_path / "runs.db"
    df = flow.batch(rows, store=db, experiment="as-given", progress=False)
    again = flow.batch(rows, store=db, experiment="as-given", resume=True, progress=False)
    loaded = nf.load_batch(db, "as-given")
    for frame in (again, loaded):
        assert list(frame["note"]) == [f"n{i}" for i in range(5)]
        assert list(frame["status"]) == list(df["status"])
        assert frame["double"].tolist()[:3] == [0, 2, 4]


def test_a_partial_frame_shows_the_rows_not_finished_as_pending() -> None:
    flow = nf.Flow("rows_partial")
    gate = asyncio.Event()

    @flow.node
    async def wait(x: int) -> int:
        if x >= 2:
            await gate.wait()
        return x

    with pytest.warns(nf.NbflowWarning, match="stopped early"):
        df = flow.batch([{"x": i} for i in range(6)], concurrency=3, timeout=1.0, progress=False)
    assert list(df["status"].iloc[:2]) == ["succeeded", "succeeded"]
    assert set(df["status"].iloc[2:]) <= {"cancelled", "pending"} and "pending" in set(df["status"])
    pending = df[df["status"] == "pending"]
    assert pending["run_id"].isna().all() and (pending["attempts"] == 0).all()
    assert list(pending["x"]) == list(pending.index)  # the row's own columns, from its case


def test_a_row_whose_secret_text_is_marked_again_is_copied_not_changed() -> None:
    flow = nf.Flow("rows_secret")

    @flow.node
    def length(key: str) -> int:
        return len(key)

    text = "sk-proj-Rr92nYv5Lq1sSu6Mz"
    nf.Secret(text)  # (made in this process: its text is known)
    rows: list[dict[str, Any]] = [{"key": text}, {"key": "plain"}]
    with pytest.warns(nf.NbflowWarning, match=r"\['key'\].*nf\.Secret"):
        df = flow.batch(rows, progress=False)
    assert type(rows[0]["key"]) is str and rows == [{"key": text}, {"key": "plain"}]  # the caller's, unchanged
    assert isinstance(df.loc[0, "key"], nf.Secret) and df.loc[1, "key"] == "plain"
    assert list(df["length"]) == [len(text), 5]
