"""Paused batch rows whose question expires (``nf.ask(..., timeout=)``) go on by themselves at the deadline,
as a single paused run does: the frame (and the store's rows and runs) are updated as ``flow.answer``
updates them; a row answered in time is not touched by the timer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import nbflow as nf
from tests.helpers.waiting import wait_for


def _flow(name: str, **ask: object) -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    async def review(topic: str) -> str:
        if topic.startswith("auto"):
            return "approve"
        return await nf.ask(f"Publish {topic}?", options=["approve", "reject"], **ask)

    @flow.node
    def publish(review: str, topic: str) -> str:
        return topic.upper() if review == "approve" else "(rejected)"

    return flow


@pytest.mark.parametrize("stored", [False, True])
def test_expired_rows_take_the_default_by_themselves_and_a_row_answered_in_time_keeps_its_answer(
    tmp_path: Path, stored: bool
) -> None:
    flow = _flow(f"batch_expiry_{stored}", timeout=2.5, default="reject")
    flow.batch([{"topic": "auto-0"}], progress=False)  # (warm: a process's first batch imports pandas)
    db = tmp_path / "runs.db" if stored else None
    df = flow.batch([{"topic": t} for t in ("auto-1", "tea", "coffee", "cake")], store=db, keep="all", progress=False)
    assert list(df["status"]) == ["succeeded", "paused", "paused", "paused"]
    flow.answer(df, {1: "approve"})  # in time
    assert df.loc[1, "publish"] == "TEA"
    wait_for(lambda: df.attrs["counts"] == {"succeeded": 4})  # (set once the rows are updated)
    assert list(df["status"]) == ["succeeded"] * 4
    assert list(df["publish"]) == ["AUTO-1", "TEA", "(rejected)", "(rejected)"]
    assert df["question_prompt"].isna().all()
    assert df.nbflow.run(2).answers == {"review#0": "reject"}
    if stored:  # (the frame is updated first, then the store)

        def saved() -> list[str]:
            with nf.BatchStore(db) as store:
                return list(store.load(df.attrs["batch_id"])["publish"])

        wait_for(lambda: saved() == list(df["publish"]))
        assert nf.load_run(db, df.loc[3, "run_id"])["publish"] == "(rejected)"


def test_without_a_default_an_expired_row_fails_naming_the_question() -> None:
    flow = _flow("batch_expiry_fail", timeout=0.3)
    df = flow.batch([{"topic": "tea"}], progress=False)
    assert df.loc[0, "status"] == "paused"
    wait_for(lambda: df.attrs["counts"] == {"failed": 1})  # (set once the row is updated)
    assert df.loc[0, "error_type"] == "QuestionExpiredError" and df.loc[0, "error_node"] == "review"
    assert "Publish tea?" in df.loc[0, "error_message"]
    with pytest.raises(nf.BatchError, match="not 'paused'"):
        flow.answer(df, {0: "approve"})  # decided: nothing left to answer


@pytest.mark.anyio
async def test_an_awaited_batch_expires_its_rows_on_the_running_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []
    flow = nf.Flow("batch_expiry_loop")

    @flow.node
    async def review(topic: str) -> str:
        loops.append(asyncio.get_running_loop())
        return await nf.ask(f"Publish {topic}?", options=["approve", "reject"], timeout=0.3, default="reject")

    @flow.node
    def publish(review: str) -> str:
        return "(rejected)" if review == "reject" else "published"

    df = await flow.abatch([{"topic": "tea"}, {"topic": "cake"}], keep="all", progress=False)
    assert list(df["status"]) == ["paused", "paused"]
    loop = asyncio.get_running_loop()
    for _ in range(1500):
        if (df["status"] == "succeeded").all():
            break
        await asyncio.sleep(0.02)  # the loop stays free: the resume runs on it
    assert list(df["publish"]) == ["(rejected)", "(rejected)"]
    assert df.nbflow.run(0).nodes["review"].status is nf.NodeStatus.SUCCEEDED
    assert len(loops) == 4 and all(seen is loop for seen in loops)  # asked, then resumed, on this loop
