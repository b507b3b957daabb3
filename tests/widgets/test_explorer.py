"""The batch results explorer (nf.explore): queries, a click opening a row's run view, compare, answers."""

from __future__ import annotations

from typing import Any

import pytest

import nbflow as nf
from nbflow._batch.explore import PAGE, query, snapshot_state
from tests.helpers import widget_comm


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def scored_flow() -> nf.Flow:
    flow = nf.Flow("explore_eval")

    @flow.node
    def answer(question: str, prompt: str) -> str:
        if question.endswith("7"):
            raise RuntimeError(f"judge crashed on {question}")
        return f"{prompt}: {question}"

    @flow.node
    def score(answer: str, question: str) -> float:
        return (int(question[1:]) % 10) / 10

    return flow


def batch_frame(n: int = 30, **options: Any) -> Any:
    rows = [{"question": f"q{i}", "api_key": "sk-SECRET-123"} for i in range(n)]
    return scored_flow().batch(rows, grid={"prompt": ["terse", "steps"]}, progress=False, **options)


def test_query_filters_sorts_pages_and_masks_secrets() -> None:
    df = batch_frame(60)  # 120 rows, 12 failed
    state = query(df, {"status": "failed"})
    assert state["range_text"] == "1–12 of 12" and {r["status"] for r in state["rows"]} == {"failed"}
    assert all("judge crashed" in r["error_message"] for r in state["rows"])
    assert {r["api_key"] for r in state["rows"]} == {"••••••"}  # a secret-named column never reaches the browser
    steps = query(df, {"variant": "steps", "sort": "score ↓"})
    scores = [r["score"] for r in steps["rows"] if r["score"] != ""]
    assert scores == sorted(scores, reverse=True) and steps["range_text"] == f"1–{PAGE} of 60"
    last = query(df, {"variant": "steps", "page": 99})  # clamped to the last page
    assert last["query"]["page"] == 1 and last["range_text"] == "51–60 of 60"
    assert [p["label"] for p in state["progress"]] == ["terse", "steps"]
    assert state["progress"][0]["counts"]["failed"] == 6 and state["progress"][0]["counts"]["succeeded"] == 54


def test_compare_shows_each_case_once_with_every_variant() -> None:
    df = batch_frame(10)
    state = query(df, {"mode": "compare"})
    assert state["range_text"] == "1–10 of 10"
    row = next(r for r in state["rows"] if r["question"] == "q3")
    assert row["terse: score"] == row["steps: score"] == 0.3
    assert row["terse: status"] == row["steps: status"] == "succeeded"


def test_a_click_opens_the_rows_run_view_beside_the_table(comm_log: list[Any]) -> None:
    df = batch_frame(10)
    view = nf.explore(df)
    failed_pos = int((df["status"] == "failed").to_numpy().argmax())
    shown: list[Any] = []
    view._open_shown = shown
    original = view._open
    view._open = lambda pos: shown.append(original(pos)) or shown[-1]
    for pos in (failed_pos, 0, failed_pos):  # three clicks: every one is handled (custom messages)
        view.table._handle_custom_msg({"type": "open", "pos": pos}, [])
    assert view.handled == 3 and view.table.selected == failed_pos
    assert [type(x).__name__ for x in shown[0:1]] == ["Run"]
    assert shown[0].nodes["answer"].error_type == "RuntimeError"
    view.table._handle_custom_msg({"type": "query", "status": "failed", "page": 0}, [])
    assert {r["status"] for r in view.table.rows} == {"failed"} and view.handled == 4


def test_answering_a_paused_row_in_the_explorer(comm_log: list[Any]) -> None:
    flow = nf.Flow("explore_pause")

    @flow.node
    async def review(topic: str) -> str:
        return await nf.ask(f"OK {topic}?", options=["yes", "no"])

    df = flow.batch([{"topic": "a"}, {"topic": "b"}], progress=False)
    view = nf.explore(df)
    assert view.table.rows[0]["__options"] == ["yes", "no"]
    view.table._handle_custom_msg({"type": "answer", "pos": 1, "answer": "no"}, [])
    assert list(df["status"]) == ["paused", "succeeded"] and df.loc[1, "review"] == "no"
    assert view.table.rows[1]["status"] == "succeeded" and "__options" not in view.table.rows[1]


def test_the_explorer_redacts_secret_text_in_outputs_errors_questions_and_plain_named_secrets(comm_log) -> None:
    flow = nf.Flow("explore_leaky")

    @flow.node
    def echo(hfToken: str, config: dict, openai: str) -> dict:
        return {"auth": f"Bearer {hfToken}", "kebab": config["db-password"], "plain": openai + "!"}

    @flow.node
    def fail(echo: dict, openai: str) -> int:
        raise PermissionError(f"invalid key {openai}")

    rows = [
        {"hfToken": "tok-camel-0001", "config": {"db-password": "pw-kebab-0002"}, "openai": nf.Secret("sk-plain-0003")}
        for _ in range(4)
    ]
    df = flow.batch(rows, progress=False, keep="all", outputs=["echo", "fail"])
    assert isinstance(df["openai"].iloc[0], nf.Secret)  # kept as itself in the frame, not turned into a plain str
    view = nf.explore(df)
    for pos in range(len(df)):
        widget_comm.frontend_sends(view.table, type="open", pos=pos)
    widget_comm.frontend_sends(view.table, type="query", status="failed", page=0)
    sent = repr(comm_log)
    assert "Bearer" in sent and "invalid key" in sent  # the leaky text was sent, redacted
    for secret in ("tok-camel-0001", "pw-kebab-0002", "sk-plain-0003"):
        assert secret not in sent


def test_a_paused_row_whose_options_quote_a_secret_shows_them_masked_and_a_click_answers_with_the_real_one(
    comm_log: list[Any],
) -> None:
    flow = nf.Flow("explore_pause_secret")

    @flow.node
    async def review(topic: str, api_key: str) -> str:
        return await nf.ask(f"OK {topic}?", options=["yes", f"no, not {api_key}"])

    df = flow.batch([{"topic": "a", "api_key": "sk-option-0007"}, {"topic": "b", "api_key": "sk-option-0007"}])
    view = nf.explore(df)
    assert view.table.rows[1]["__options"] == ["yes", "no, not ••••••"]
    view.table._handle_custom_msg({"type": "answer", "pos": 1, "answer": "no, not ••••••"}, [])
    assert list(df["status"]) == ["paused", "succeeded"] and df.loc[1, "review"] == "no, not sk-option-0007"
    assert "sk-option-0007" not in repr(comm_log)


def test_rows_whose_run_cannot_be_opened_are_marked_before_a_click(tmp_path: Any) -> None:
    assert not any("__blocked" in r for r in query(batch_frame(10), {})["rows"])  # by default every row opens
    rows = query(batch_frame(10, keep="failed"), {})["rows"]
    blocked = {r["status"]: r.get("__blocked") for r in rows}
    assert blocked["failed"] is None  # kept: it opens
    assert "keep='failed'" in blocked["succeeded"] and "store=" in blocked["succeeded"]
    budget = nf.config.keep_memory
    nf.config.keep_memory = 2_500  # a few packed runs, not twenty
    try:
        df = batch_frame(10)
    finally:
        nf.config.keep_memory = budget
    rows = query(df, {})["rows"]
    over = [r["__blocked"] for r in rows if "__blocked" in r]
    assert over and all("keep_memory" in why and "store=" in why for why in over)
    assert len(over) == (~df.nbflow.openable()).sum() < len(rows)
    snapshot = snapshot_state(df)["rows"]  # the static snapshot (saved notebook, nbconvert) marks them too
    assert sum("keep_memory" in r.get("__blocked", "") for r in snapshot) == len(over)
    stored = scored_flow().batch(
        [{"question": "q1", "api_key": "k"}], grid={"prompt": ["a"]}, store=tmp_path / "r.db", progress=False
    )
    assert "__blocked" not in query(stored, {})["rows"][0]  # with a store every row opens (read back from it)
    assert df.nbflow.run(int(next(r["__pos"] for r in rows if r["status"] == "failed"))) is not None


def test_compare_mode_takes_the_chosen_baseline() -> None:
    df = batch_frame(10)
    default = query(df, {"mode": "compare"})
    chosen = query(df, {"mode": "compare", "baseline": "terse"})
    assert default["query"]["baseline"] == "steps" and "steps: change" not in default["columns"]
    assert chosen["query"]["baseline"] == "terse" and "steps: change" in chosen["columns"]
    assert "terse: change" not in chosen["columns"] and "vs 'terse'" in chosen["note"]
