"""nf.ask(..., timeout=) expires (issue 12): the node takes its declared default or fails with
QuestionExpiredError, for a paused run in memory (it goes on by itself at the deadline) and for a
checkpointed run resumed after the deadline (counted from when it was asked, kept in the store)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import nbflow as nf
from tests.helpers.waiting import wait_for


def _review_flow(name: str, **ask: object) -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def draft(topic: str) -> str:
        return f"about {topic}"

    @flow.node
    async def review(draft: str) -> str:
        return await nf.ask("Approve?", data=draft, options=["approve", "reject"], **ask)

    @flow.node
    def publish(review: str) -> str:
        return f"published: {review}"

    return flow


def test_an_in_memory_paused_run_takes_the_default_by_itself_at_the_deadline() -> None:
    flow = _review_flow("ask_default_mem", timeout=0.5, default="reject")
    run = flow.run(topic="tea", show=False)
    assert run.status is nf.RunStatus.PAUSED
    q = run.pending["review#0"]
    assert q.timeout == 0.5 and q.default == "reject" and q.expires_at == pytest.approx(q.asked_at + 0.5)
    wait_for(lambda: run.status is nf.RunStatus.SUCCEEDED)
    assert run["publish"] == "published: reject" and run.answers == {"review#0": "reject"} and not run.pending


def test_without_a_default_the_node_fails_clearly_at_the_deadline() -> None:
    flow = _review_flow("ask_fail_mem", timeout=0.3)
    run = flow.run(topic="tea", show=False)
    assert run.status is nf.RunStatus.PAUSED
    wait_for(lambda: run.status.finished)
    assert run.status is nf.RunStatus.FAILED
    rec = run.nodes["review"]
    assert isinstance(rec.error, nf.QuestionExpiredError) and isinstance(rec.error, TimeoutError)
    assert "'review#0'" in str(rec.error) and "timeout=0.3s" in str(rec.error) and "default=" in str(rec.error)
    assert len(rec.attempts) == 2  # asked, then expired: never retried in a loop
    assert run.nodes["publish"].skip_reason == "upstream 'review' failed" and not run.pending


def test_an_answer_in_time_wins_and_the_timer_does_nothing() -> None:
    flow = _review_flow("ask_in_time", timeout=0.4, default="reject")
    run = flow.run(topic="tea", show=False)
    run.resume("approve")
    assert run["publish"] == "published: approve"
    time.sleep(0.6)  # past the deadline: nothing changes
    assert run["publish"] == "published: approve" and run.answers == {"review#0": "approve"}


def test_a_checkpointed_run_resumed_after_the_deadline_in_another_process(tmp_path: Path) -> None:
    """Asked in one process that then exits; resumed from the file in another after the deadline."""
    db = tmp_path / "runs.db"
    script = tmp_path / "flow.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            import nbflow as nf

            flow = nf.Flow("ask_expiry_restart")

            @flow.node
            async def review(topic: str) -> str:
                return await nf.ask("Approve?", options=["approve", "reject"], timeout=2, default="reject")

            if sys.argv[1] == "ask":
                run = flow.run(topic="tea", store={str(db)!r}, show=False)
                print(run.status.value, run.run_id)
            else:
                run = nf.load_run({str(db)!r}, sys.argv[2])
                q = run.pending["review#0"]
                print("expired" if q.expired() else "open", q.timeout)
                if sys.argv[1] == "late-answer":
                    try:
                        run.resume("approve")
                    except nf.ResumeConflictError as exc:
                        print("refused:", exc)
                run = run.resume()
                print(run.status.value, run["review"])
            """
        )
    )

    def child(*args: str) -> str:
        done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    status, run_id = child("ask").split()[-2:]
    assert status == "paused"
    wait = 2.2 - (time.time() - nf.load_run(db, run_id).pending["review#0"].asked_at)
    time.sleep(max(0.0, wait))  # the deadline passes while no process holds the run
    out = child("late-answer", run_id).splitlines()
    assert out[0] == "expired 2.0"
    assert out[1].startswith("refused:") and "expired" in out[1] and "default 'reject'" in out[1]
    assert out[-1] == "succeeded reject"
    back = nf.load_run(db, run_id)
    assert back.status is nf.RunStatus.SUCCEEDED and back.answers == {"review#0": "reject"}


def test_a_loaded_run_resumed_before_the_deadline_pauses_again_keeping_when_it_was_asked(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _review_flow("ask_reload_before", timeout=30)
    run = flow.run(topic="tea", show=False, store=db)
    asked = run.pending["review#0"].asked_at
    back = nf.load_run(db, run.run_id)
    back.resume()  # no answer, not expired: it asks again, counting from the first time
    assert back.status is nf.RunStatus.PAUSED and back.pending["review#0"].asked_at == asked
    back.cancel("no reviewer")
    assert nf.load_run(db, run.run_id).status is nf.RunStatus.CANCELLED


@pytest.mark.anyio
async def test_arun_on_a_running_loop_expires_on_that_loop() -> None:
    import asyncio

    flow = _review_flow("ask_expiry_arun", timeout=0.3, default="approve")
    run = await flow.arun(topic="tea", show=False)
    assert run.status is nf.RunStatus.PAUSED
    for _ in range(300):
        if run.status is nf.RunStatus.SUCCEEDED:
            break
        await asyncio.sleep(0.02)
    assert run["publish"] == "published: approve"


@pytest.mark.parametrize(
    ("ask", "error", "match"),
    [
        ({"timeout": 0}, nf.FlowDefinitionError, "positive number"),
        ({"timeout": float("nan")}, nf.FlowDefinitionError, "positive number"),
        ({"timeout": True}, nf.FlowDefinitionError, "positive number"),
        ({"default": "reject"}, nf.FlowDefinitionError, "needs timeout="),
        ({"timeout": 5, "default": "maybe"}, nf.AnswerError, "default='maybe'"),
    ],
)
def test_bad_timeout_or_default_fails_the_node_naming_it(ask: dict, error: type, match: str) -> None:
    flow = _review_flow(f"ask_bad_{len(ask)}_{match[:5]}", **ask)
    run = flow.run(topic="tea", show=False)
    assert run.status is nf.RunStatus.FAILED and not run.pending
    err = run.nodes["review"].error
    assert isinstance(err, error) and "'review'" in str(err)
    assert match in str(err)


def test_questions_pickled_before_timeouts_existed_still_load(monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    q = nf.Question(key="review#0", node="review", prompt="Approve?", options=("approve", "reject"))
    # What a checkpoint written by the previous version holds: the seven fields it had.
    monkeypatch.setattr(
        nf.Question,
        "__getstate__",
        lambda self: tuple(
            getattr(self, f) for f in ("key", "node", "prompt", "data", "options", "schema", "asked_at")
        ),
    )
    old_bytes = pickle.dumps(q)
    monkeypatch.undo()
    back = pickle.loads(old_bytes)
    assert back.timeout is None and back.default is nf.MISSING and not back.expired()
    assert back.key == "review#0" and back.options == ("approve", "reject") and back.asked_at == q.asked_at


def test_a_paused_run_whose_store_was_closed_is_left_for_a_later_resume(tmp_path: Path) -> None:
    """The timer of a run whose store object was closed (its owner is done with it) resumes nothing and warns
    nothing: the deadline is in the file, and a later ``nf.load_run(...).resume()`` takes the default."""
    db = tmp_path / "runs.db"
    flow = _review_flow("ask_closed_store", timeout=0.3, default="reject")
    run = flow.run(topic="tea", show=False, store=db)
    assert run.status is nf.RunStatus.PAUSED
    run.store.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        time.sleep(0.8)  # past the deadline: the timer fired
    assert run.status is nf.RunStatus.PAUSED and not caught
    from nbflow._store import checkpoint

    checkpoint._STORES.clear()  # (a fresh store object, as another process would open)
    back = nf.load_run(db, run.run_id)
    back.resume()
    assert back.status is nf.RunStatus.SUCCEEDED and back["publish"] == "published: reject"
