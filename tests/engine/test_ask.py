"""Human in the loop: ask, pause, resume, checkpoints that survive a killed process, conflicts."""

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading

import anyio
import pydantic
import pytest

import nbflow as nf
from nbflow._core.states import check_node_transition, check_run_transition


def review_flow(calls: list[str] | None = None) -> nf.Flow:
    calls = calls if calls is not None else []
    flow = nf.Flow("publish")

    @flow.node
    def draft(topic: str) -> str:
        calls.append("draft")
        return f"A post about {topic}"

    @flow.node
    async def review(draft: str) -> str:
        calls.append("review")
        return await nf.ask("Approve this draft?", data=draft, options=["approve", "reject"])

    @flow.node
    def publish(review: str, draft: str) -> str:
        calls.append("publish")
        return draft if review == "approve" else "(not published)"

    @flow.node
    async def side(topic: str) -> int:  # does not depend on the question: runs to completion
        await anyio.sleep(0.02)
        calls.append("side")
        return len(topic)

    return flow


def test_ask_pauses_the_node_then_the_run_and_resume_goes_on():
    calls: list[str] = []
    events: list[str] = []
    run = review_flow(calls).run(topic="cats", on_event=lambda e: events.append(type(e).__name__))
    assert run.status is nf.RunStatus.PAUSED
    assert run.nodes["review"].status is nf.NodeStatus.PAUSED
    assert run.nodes["publish"].status is nf.NodeStatus.PENDING
    assert run["side"] == 4  # the independent branch ran until the pause
    (q,) = run.pending.values()
    assert q.prompt == "Approve this draft?" and q.options == ("approve", "reject") and q.data == "A post about cats"
    assert run.pause_version == 1
    assert "NodePaused" in events and events[-1] == "RunPaused"

    done = run.resume("approve")
    assert done is run and run.status is nf.RunStatus.SUCCEEDED
    assert run["publish"] == "A post about cats" and run["review"] == "approve"
    assert calls.count("draft") == 1 and calls.count("side") == 1  # finished nodes did not run again
    assert calls.count("review") == 2  # the paused node re-runs; ask() then returns the answer
    assert run.pending == {} and run.answers == {"review#0": "approve"}


def test_resuming_twice_or_a_run_that_is_not_paused_is_a_conflict_and_changes_nothing():
    run = review_flow().run(topic="x")
    run.resume("reject")
    assert run["publish"] == "(not published)"
    with pytest.raises(nf.ResumeConflictError, match="is SUCCEEDED, not PAUSED"):
        run.resume("approve")
    assert run["publish"] == "(not published)"
    paused = review_flow().run(topic="y")
    with pytest.raises(nf.ResumeConflictError, match="pause version 7 was already resumed"):
        paused.resume("approve", version=7)
    assert paused.status is nf.RunStatus.PAUSED


def test_a_wrong_answer_is_refused_and_nothing_changes():
    run = review_flow().run(topic="x")
    with pytest.raises(nf.AnswerError, match="takes one of 'approve', 'reject', got 'maybe'"):
        run.resume("maybe")
    assert run.status is nf.RunStatus.PAUSED and "review#0" in run.pending


def test_racing_resumes_in_one_process_exactly_one_wins():
    run = review_flow().run(topic="race")
    results: list[str] = []
    barrier = threading.Barrier(4)

    def attempt():
        barrier.wait()
        try:
            run.resume("approve")
            results.append("won")
        except nf.ResumeConflictError:
            results.append("conflict")

    threads = [threading.Thread(target=attempt) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["conflict", "conflict", "conflict", "won"]
    assert run.status is nf.RunStatus.SUCCEEDED


class Edit(pydantic.BaseModel):
    approved: bool
    title: str


def test_a_typed_form_answer_is_validated():
    flow = nf.Flow("form")

    @flow.node
    async def review() -> str:
        edit = await nf.ask("Edit the title", schema=Edit)
        return edit.title if edit.approved else "-"

    run = flow.run()
    with pytest.raises(nf.AnswerError, match="does not fit Edit"):
        run.resume({"approved": "not a bool", "title": "x"})
    assert run.status is nf.RunStatus.PAUSED
    run.resume({"approved": True, "title": "New title"})
    assert run["review"] == "New title"


def test_several_questions_need_question_keys():
    flow = nf.Flow("two")

    @flow.node
    async def a() -> str:
        return await nf.ask("A?")

    @flow.node
    async def b() -> str:
        return await nf.ask("B?")

    run = flow.run()
    assert set(run.pending) == {"a#0", "b#0"}
    with pytest.raises(nf.ResumeConflictError, match="has 2 open questions"):
        run.resume("x")
    run.resume("answer a", question="a#0")
    assert run.status is nf.RunStatus.PAUSED and set(run.pending) == {"b#0"}  # b asked again
    with pytest.raises(nf.ResumeConflictError, match="'a#0' was already answered"):
        run.resume("again", question="a#0")
    run.resume("answer b")
    assert run.outputs == {"a": "answer a", "b": "answer b"}


def test_ask_outside_a_running_node_says_how_to_use_it():
    with pytest.raises(nf.RunnerError, match="only works inside an async node"):
        anyio.run(nf.ask, "hello?")


@pytest.mark.anyio
async def test_external_pause_lets_nodes_in_flight_finish_and_starts_nothing_new():
    flow = nf.Flow("ext")
    started: list[str] = []
    gate = anyio.Event()

    @flow.node
    async def first() -> int:
        started.append("first")
        await gate.wait()
        return 1

    @flow.node
    async def second(first: int) -> int:
        started.append("second")
        return first + 1

    handle = flow.start()
    with anyio.fail_after(5):
        while not started:
            await anyio.sleep(0.001)
    handle.pause()
    gate.set()
    run = await handle
    assert run.status is nf.RunStatus.PAUSED and run["first"] == 1
    assert run.nodes["second"].status is nf.NodeStatus.PENDING and started == ["first"]
    await run.aresume()
    assert run["second"] == 2 and run.status is nf.RunStatus.SUCCEEDED
    with pytest.raises(nf.ResumeConflictError, match="only a RUNNING run can be paused"):
        run.pause()


def test_a_pause_inside_a_map_item_keeps_finished_items():
    flow = nf.Flow("m")
    runs: list[int] = []

    @flow.map(over="xs")
    async def check(xs: int) -> int:
        runs.append(xs)
        if xs == 2:
            ok = await nf.ask(f"Is {xs} fine?", options=["yes", "no"])
            return xs if ok == "yes" else -xs
        return xs * 10

    run = flow.run(xs=[1, 2, 3])
    assert run.status is nf.RunStatus.PAUSED
    assert list(run.pending) == ["check[1]#0"]  # the item at index 1
    assert [i.status for i in run.nodes["check"].items] == [
        nf.NodeStatus.SUCCEEDED,
        nf.NodeStatus.PAUSED,
        nf.NodeStatus.SUCCEEDED,
    ]
    run.resume("no")
    assert run["check"] == [10, -2, 30]
    assert sorted(runs) == [1, 2, 2, 3]  # only the paused item ran again


def test_a_pause_inside_a_sub_flow():
    sub = nf.Flow("approval")
    sub.add(lambda text: text.upper(), name="prepare")

    @sub.node
    async def decide(prepare: str) -> str:
        return f"{prepare}: " + await nf.ask("OK?", options=["ok", "no"])

    parent = nf.Flow("outer")
    parent.add(sub, name="approve", inputs={"text": "doc"}, output="decide")
    parent.add(lambda approve: approve + "!", name="final")
    run = parent.run(doc="memo")
    assert run.status is nf.RunStatus.PAUSED
    assert list(run.pending) == ["approve.decide#0"]
    assert run.record("approve.prepare").status is nf.NodeStatus.SUCCEEDED
    run.resume("ok")
    assert run["final"] == "MEMO: ok!"


def test_a_resumed_sub_flow_keeps_its_policies():
    """A sub-flow resumed after a pause runs through the same path as a first run: its retry= holds."""
    sub = nf.Flow("approval", retry=nf.Retry(attempts=3, backoff=0))
    calls: list[int] = []

    @sub.node
    async def decide(text: str) -> str:
        return await nf.ask("OK?", options=["ok", "no"])

    @sub.node
    def publish(decide: str) -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("flaky")  # transient: retried by the sub-flow's policy
        return decide.upper()

    parent = nf.Flow("outer")
    parent.add(sub, name="approve", inputs={"text": "doc"}, output="publish")
    run = parent.run(doc="memo")
    assert run.status is nf.RunStatus.PAUSED
    run.resume("ok")
    assert run.status is nf.RunStatus.SUCCEEDED, run.summary()
    assert run["approve"] == "OK" and len(calls) == 3


def test_state_machines_refuse_illegal_transitions():
    with pytest.raises(nf.StateTransitionError, match="SUCCEEDED -> RUNNING"):
        check_run_transition("r", nf.RunStatus.SUCCEEDED, nf.RunStatus.RUNNING)
    with pytest.raises(nf.StateTransitionError, match="PAUSED -> SUCCEEDED"):
        check_run_transition("r", nf.RunStatus.PAUSED, nf.RunStatus.SUCCEEDED)
    with pytest.raises(nf.StateTransitionError, match="PENDING -> PAUSED"):
        check_node_transition("n", nf.NodeStatus.PENDING, nf.NodeStatus.PAUSED)
    check_run_transition("r", nf.RunStatus.PAUSED, nf.RunStatus.RUNNING)  # legal: no error
    check_node_transition("n", nf.NodeStatus.PAUSED, nf.NodeStatus.RUNNING)


# --- checkpoints -----------------------------------------------------------------------------------


def test_a_paused_run_is_stored_and_loaded_back(tmp_path):
    db = tmp_path / "runs.db"
    calls: list[str] = []
    run = review_flow(calls).run(topic="dogs", store=db)
    loaded = nf.load_run(db, run.run_id)
    assert loaded is not run and loaded.status is nf.RunStatus.PAUSED
    assert loaded["draft"] == "A post about dogs" and loaded["side"] == 4
    assert [q.prompt for q in loaded.pending.values()] == ["Approve this draft?"]
    loaded.resume("approve")
    assert loaded["publish"] == "A post about dogs"
    assert calls.count("draft") == 1
    again = nf.load_run(db, run.run_id)
    assert again.status is nf.RunStatus.SUCCEEDED and again["publish"] == "A post about dogs"
    with pytest.raises(nf.ResumeConflictError):
        run.resume("approve")  # the stale in-memory copy: the store says it was resumed


def test_racing_resumes_through_the_store_exactly_one_wins(tmp_path):
    db = tmp_path / "runs.db"
    run = review_flow().run(topic="race", store=db)
    copies = [nf.load_run(db, run.run_id) for _ in range(3)]
    results = []
    for copy in copies:
        try:
            copy.resume("approve")
            results.append("won")
        except nf.ResumeConflictError:
            results.append("conflict")
    assert results == ["won", "conflict", "conflict"]


KILL_SCRIPT = textwrap.dedent(
    """
    import os, sys, nbflow as nf
    db, log = sys.argv[1], sys.argv[2]
    flow = nf.Flow("killme")

    @flow.node
    def expensive(n: int) -> int:
        with open(log, "a") as fh:
            fh.write("expensive\\n")
        return n * 2

    @flow.node
    async def review(expensive: int) -> str:
        return await nf.ask(f"Accept {expensive}?", options=["yes", "no"])

    @flow.node
    def result(review: str, expensive: int) -> str:
        return f"{review}:{expensive}"

    if sys.argv[3] == "start":
        run = flow.run(n=21, store=db)
        print(run.run_id, run.status.name, flush=True)
        sys.stdin.readline()  # wait here until killed
    else:
        run = nf.load_run(db, sys.argv[4])
        print(run.status.name, run["expensive"], flush=True)
        run.resume("yes")
        print(run.status.name, run["result"], flush=True)
    """
)


def test_pause_kill_the_process_load_in_a_new_one_and_resume(tmp_path):
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT)
    db, log = tmp_path / "runs.db", tmp_path / "log.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen(
        [sys.executable, str(script), str(db), str(log), "start"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert first.stdout is not None
    run_id, status = first.stdout.readline().split()
    assert status == "PAUSED"
    first.kill()  # SIGKILL: no clean-up at all
    first.wait(10)
    second = subprocess.run(
        [sys.executable, str(script), str(db), str(log), "resume", run_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.split("\n")[:2] == ["PAUSED 42", "SUCCEEDED yes:42"]
    assert log.read_text() == "expensive\n"  # the finished node was not run again


def test_store_problems_are_clear_and_nothing_is_overwritten(tmp_path):
    with pytest.raises(nf.StoreError, match="does not exist"):
        nf.load_run(tmp_path / "missing.db", "abc")
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not sqlite" * 100)
    before = corrupt.read_bytes()
    with pytest.raises(nf.StoreError, match="not a readable nbflow store"):
        review_flow().run(topic="x", store=corrupt)
    assert corrupt.read_bytes() == before
    db = tmp_path / "runs.db"
    review_flow().run(topic="x", store=db)
    with pytest.raises(nf.StoreError, match="has no run 'nope'"):
        nf.load_run(db, "nope")


def test_a_locked_store_is_a_clear_error(tmp_path):
    db = tmp_path / "locked.db"
    store = nf.CheckpointStore(db, timeout=0.2)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(nf.StoreError, match="locked by another process"):
            review_flow().run(topic="x", store=store)
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_an_output_that_cannot_be_stored_is_an_error_at_pause_time_naming_the_node(tmp_path):
    flow = nf.Flow("unpicklable")

    @flow.node
    def handle() -> object:
        return threading.Lock()  # cannot be pickled

    @flow.node
    async def review(handle: object) -> str:
        return await nf.ask("go?")

    with pytest.raises(nf.StoreError, match=r"cannot store 'handle': lock: TypeError") as info:
        flow.run(store=tmp_path / "runs.db")
    del info


def test_secrets_are_never_stored(tmp_path):
    db = tmp_path / "runs.db"
    flow = nf.Flow("secretive")

    @flow.node
    async def call(api_key: str, token: str) -> str:
        await nf.ask("continue?")
        return f"used a key of length {len(api_key)}"

    run = flow.run(api_key=nf.Secret("sk-very-secret-123"), token="tok-plain-456", store=db)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"sk-very-secret-123" not in raw and b"tok-plain-456" not in raw
    assert repr(nf.Secret("x")) == "Secret('***')"
    loaded = nf.load_run(db, run.run_id)
    assert loaded.inputs["api_key"] is nf.REDACTED
    with pytest.raises(nf.RunnerError, match=r"inputs 'api_key', 'token' were secret and never stored"):
        loaded.resume("yes")
    assert loaded.status is nf.RunStatus.PAUSED
    fresh = nf.load_run(db, run.run_id, secrets={"api_key": nf.Secret("sk-very-secret-123"), "token": "t"})
    fresh.resume("yes")
    assert fresh["call"] == "used a key of length 18"


def test_a_node_with_retries_and_a_timeout_pauses_without_retrying_and_resumes():
    flow = nf.Flow("resilient_review", retry=nf.Retry(attempts=3, backoff=0))
    tries: list[int] = []

    @flow.node(timeout=5)
    async def review() -> str:
        tries.append(1)
        return await nf.ask("ok?", options=["yes", "no"])

    run = flow.run()
    assert run.status is nf.RunStatus.PAUSED and len(tries) == 1  # a pause is not a failure to retry
    run.resume("yes")
    assert run["review"] == "yes" and len(tries) == 2
