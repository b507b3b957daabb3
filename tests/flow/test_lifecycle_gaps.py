"""Lifecycle gaps of issue 12: cancelling a paused run, routers taking no branch, the skip reason of a
failed router's branches, and sub-flow cycles."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbflow as nf


def _review_flow(name: str) -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def draft(topic: str) -> str:
        return f"about {topic}"

    @flow.node
    async def review(draft: str) -> str:
        return await nf.ask("ok?", options=["yes", "no"])

    @flow.node
    def publish(review: str) -> str:
        return review

    return flow


def test_a_paused_run_can_be_cancelled_and_the_store_says_so(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _review_flow("cancel_paused")
    run = flow.run(topic="tea", store=db, show=False)
    assert run.status is nf.RunStatus.PAUSED
    run.cancel("nobody will review it")
    assert run.status is nf.RunStatus.CANCELLED and run.reason == "nobody will review it"
    assert run.nodes["review"].status is nf.NodeStatus.CANCELLED and not run.pending
    assert run["draft"] == "about tea"
    back = nf.load_run(db, run.run_id)
    assert back.status is nf.RunStatus.CANCELLED and not back.pending
    assert back.nodes["publish"].status is nf.NodeStatus.CANCELLED and back.reason == "nobody will review it"
    with pytest.raises(nf.ResumeConflictError):
        back.resume("yes")


def test_flow_cancel_by_id_wins_over_a_stale_resume(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _review_flow("cancel_by_id")
    run = flow.run(topic="tea", store=db, show=False)
    stale = nf.load_run(db, run.run_id)
    flow.cancel(run.run_id, store=db)
    with pytest.raises(nf.ResumeConflictError):
        stale.resume("yes")  # the store no longer has it paused
    assert nf.load_run(db, run.run_id).status is nf.RunStatus.CANCELLED


def test_a_running_run_cannot_be_cancelled_as_paused() -> None:
    flow = _review_flow("cancel_done")
    run = flow.run(topic="x", show=False)
    run.resume("yes")
    with pytest.raises(nf.ResumeConflictError, match="only a PAUSED run"):
        run.cancel()


def test_a_router_returning_no_branch_skips_them_all() -> None:
    flow = nf.Flow("route_none")

    @flow.router(branches=["a", "b"])
    def route(x: int) -> list:
        return []

    flow.add(lambda route: 1, name="on_a", branch="route.a")
    flow.add(lambda route: 2, name="on_b", branch="route.b")
    run = flow.run(x=1, show=False)
    assert run.status is nf.RunStatus.SUCCEEDED
    assert run.nodes["on_a"].skip_reason == "branch 'a' of 'route' not taken"
    assert run.nodes["on_b"].status is nf.NodeStatus.SKIPPED


def test_branches_of_a_failed_router_with_a_handler_say_the_handler_runs() -> None:
    flow = nf.Flow("route_fails")

    @flow.router(branches=["a"])
    def classifier(x: int) -> str:
        raise ValueError("model down")

    flow.add(lambda classifier: 1, name="on_a", branch="classifier.a")
    flow.add(lambda classifier: "fallback", name="handler", on_failure_of="classifier")
    run = flow.run(x=1, show=False)
    assert run["handler"] == "fallback"
    assert run.nodes["on_a"].skip_reason == "upstream 'classifier' failed; its failure handler 'handler' runs instead"


def test_sub_flows_containing_each_other_are_a_cycle_error() -> None:
    a, b, c = nf.Flow("cyc_a"), nf.Flow("cyc_b"), nf.Flow("cyc_c")
    a.add(lambda: 1, name="one")
    b.add(a, name="inner_a")
    c.add(b, name="inner_b")
    with pytest.raises(nf.CycleError, match="cyc_a -> cyc_c -> cyc_b -> cyc_a"):
        a.add(c, name="inner_c")
