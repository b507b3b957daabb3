"""The explorer's compare mode lists the cases a variant made worse first (a regressions list you click into)."""

from __future__ import annotations

from typing import Any

import pytest

import nbflow as nf
from nbflow._batch.explore import query
from tests.helpers import widget_comm


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def frame() -> Any:
    flow = nf.Flow("regress")

    @flow.node
    def answer(q: int, prompt: str) -> str:
        if prompt == "steps" and q == 4:
            raise RuntimeError("steps broke q4")
        return f"{prompt}:{q}"

    @flow.node
    def score(answer: str, q: int, prompt: str) -> float:
        if prompt == "steps":
            return {1: 0.2, 2: 0.9}.get(q, 0.5)  # q1 regressed, q2 improved
        return 0.5

    return flow.batch([{"q": i} for i in range(6)], grid={"prompt": ["terse", "steps"]}, keep="all", progress=False)


def test_compare_mode_lists_regressions_first_with_their_change() -> None:
    df = frame()
    nf_changes = nf.compare(df, "steps", "terse", by="prompt")  # the same rule as nf.compare, steps as the base
    state = query(df, {"mode": "compare"})
    assert "steps: change" not in state["columns"] and "terse: change" in state["columns"]
    changes = {r["q"]: r["terse: change"] for r in state["rows"]}
    # base is the first variant by name ("steps"): terse vs steps, as nf.compare(df, "steps", "terse") says
    expected = dict(zip(nf_changes["q"], nf_changes["change"], strict=True))
    assert changes == expected
    assert changes[2] == "regressed" and changes[4] == "fixed" and changes[1] == "improved"
    assert [r["q"] for r in state["rows"]][:1] == [2]  # the regression comes first
    assert state["note"] == "1 case regressed or newly failing vs 'steps' (listed first)"
    only = query(df, {"mode": "compare", "regressions": True})
    assert [r["q"] for r in only["rows"]] == [2] and only["query"]["regressions"] is True
    # a click on the regression opens the run that got worse: terse's row for q2
    pos = only["rows"][0]["__pos"]
    assert (df.iloc[pos]["q"], df.iloc[pos]["prompt"]) == (2, "terse")


def test_clicking_a_regression_opens_its_run(comm_log: list[Any]) -> None:
    df = frame()
    view = nf.explore(df)
    view.table._handle_custom_msg({"type": "query", "mode": "compare", "regressions": True, "page": 0}, [])
    (row,) = view.table.rows
    assert row["q"] == 2 and row["terse: change"] == "regressed"
    opened: list[Any] = []
    original = view._open
    view._open = lambda pos: opened.append(original(pos)) or opened[-1]
    view.table._handle_custom_msg({"type": "open", "pos": row["__pos"]}, [])
    assert view.table.selected == row["__pos"]
    (run,) = opened
    assert run.inputs["prompt"] == "terse" and run.inputs["q"] == 2 and run["score"] == 0.5


def test_compare_mode_says_nf_compares_verdict(comm_log: list[Any]) -> None:
    df = frame()
    view = nf.explore(df)
    assert view.table.note == ""  # rows mode: no verdict
    view.table._handle_custom_msg({"type": "query", "mode": "compare", "page": 0}, [])
    verdict = nf.compare(df, "steps", "terse", by="prompt").attrs["verdict"]
    assert verdict.startswith("score: no evidence of a difference between terse and steps")
    assert view.table.note == f"1 case regressed or newly failing vs 'steps' (listed first); {verdict}"
