"""A fresh run of a chain (``_Program.chain``) takes the chain path: no scheduler bookkeeping, its own
task runs the nodes one after the other. Everything a user observes must be what the general path
(the scheduler's ready queue and waiting counts) gives: statuses, outputs, inputs, errors, skip and
cancel reasons, the run's status and reason, and the events in order.

Each test runs the same flow both ways: ``general`` turns the chain path off for the run's program.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import nbflow as nf
from nbflow._engine import scheduler


@pytest.fixture(params=["chain", "general"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    made = scheduler._program
    taken: list[bool] = []

    def program(graph: Any, plan: Any) -> Any:
        prog = made(graph, plan)
        if request.param == "general":
            prog.chain = False
        taken.append(prog.chain)
        return prog

    monkeypatch.setattr(scheduler, "_program", program)
    yield request.param
    # Every flow below is a chain: the chain path was taken exactly when it was meant to be.
    assert taken and set(taken) == {request.param == "chain"}


def seen(run: nf.Run) -> dict[str, tuple[Any, ...]]:
    return {
        name: (
            rec.status,
            rec.output if rec.status is nf.NodeStatus.SUCCEEDED else None,
            dict(rec.inputs),
            len(rec.attempts),
            rec.error_type,
            rec.error_message,
            rec.skip_reason,
            rec.started_at is not None,
            rec.finished_at is not None,
        )
        for name, rec in run.nodes.items()
    }


def shape(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(type(e).__name__, getattr(e, "node", None)) for e in events]


def chain(fail_at: str | None = None, ask_at: str | None = None, sleep: float = 0.0) -> nf.Flow:
    flow = nf.Flow("chain_path")

    @flow.node
    def prepare(x: int, suffix: str = "!") -> str:  # a flow input and a default besides its upstream
        return f"{x}{suffix}"

    @flow.node
    async def call(prepare: str) -> str:
        if sleep:
            await asyncio.sleep(sleep)
        if fail_at == "call":
            raise ValueError(f"model refused {prepare}")
        if ask_at == "call":
            return f"{prepare}:{await nf.ask('ok?', options=['yes', 'no'])}"
        return prepare * 2

    @flow.node
    def score(call: str) -> int:
        return len(call)

    @flow.node
    async def report(score: int) -> dict[str, int]:
        return {"score": score}

    return flow


async def in_call(handle: Any) -> Any:
    """``handle`` once its run waits in ``call`` (its sleep)."""
    for _ in range(400):
        if handle.run.nodes["call"].status is nf.NodeStatus.RUNNING:
            return handle
        await asyncio.sleep(0.005)
    raise AssertionError(f"call never started: {seen(handle.run)}")


def test_a_chain_that_succeeds(path: str) -> None:
    events: list[Any] = []
    run = chain().run(x=7, on_event=events.append, show=False)
    assert run.status is nf.RunStatus.SUCCEEDED
    assert run["report"] == {"score": 4}
    assert seen(run)["call"][:3] == (nf.NodeStatus.SUCCEEDED, "7!7!", {"prepare": "7!"})
    expected = [("RunStarted", None)]
    for node in ("prepare", "call", "score", "report"):
        expected += [("NodeStarted", node), ("NodeSucceeded", node)]
    assert shape(events) == [*expected, ("RunFinished", None)]


def test_a_failure_skips_the_rest_of_the_chain_with_its_reasons(path: str) -> None:
    events: list[Any] = []
    run = chain(fail_at="call").run(x=1, on_event=events.append, show=False)
    assert run.status is nf.RunStatus.FAILED
    got = seen(run)
    assert got["call"][0] is nf.NodeStatus.FAILED and got["call"][4:6] == ("ValueError", "model refused 1!")
    assert got["score"][0] is got["report"][0] is nf.NodeStatus.SKIPPED
    assert got["score"][6] == got["report"][6] == "upstream 'call' failed"  # (the cause, through the skipped one)
    assert shape(events)[-3:] == [("NodeSkipped", "score"), ("NodeSkipped", "report"), ("RunFinished", None)]


def test_a_question_pauses_the_chain_and_an_answer_finishes_it(path: str) -> None:
    run = chain(ask_at="call").run(x=2, show=False)
    assert run.status is nf.RunStatus.PAUSED
    got = seen(run)
    assert got["call"][0] is nf.NodeStatus.PAUSED
    assert got["score"][0] is got["report"][0] is nf.NodeStatus.PENDING
    run.resume("yes")
    assert run.status is nf.RunStatus.SUCCEEDED and run["call"] == "2!:yes" and run["report"] == {"score": 6}


def test_a_pause_asked_from_outside_stops_the_chain_after_the_node_in_flight(path: str) -> None:
    async def go() -> nf.Run:
        handle = await in_call(chain(sleep=0.2).start(x=3, show=False))
        handle.pause()
        return await handle

    run = asyncio.run(go())
    assert run.status is nf.RunStatus.PAUSED
    got = seen(run)
    assert got["call"][:2] == (nf.NodeStatus.SUCCEEDED, "3!3!")  # the node in flight finished
    assert got["score"][0] is nf.NodeStatus.PENDING  # and no new node started
    run.resume()
    assert run.status is nf.RunStatus.SUCCEEDED and run["report"] == {"score": 4}


def test_cancelling_a_chain_cancels_the_node_in_flight_and_the_rest(path: str) -> None:
    events: list[Any] = []

    async def go() -> nf.Run:
        handle = await in_call(chain(sleep=5).start(x=4, on_event=events.append, show=False))
        handle.cancel()
        return await handle

    run = asyncio.run(go())
    assert run.status is nf.RunStatus.CANCELLED
    got = seen(run)
    assert got["prepare"][:2] == (nf.NodeStatus.SUCCEEDED, "4!")
    assert got["call"][0] is nf.NodeStatus.CANCELLED and got["call"][6] == "run cancelled while the node was running"
    for node in ("score", "report"):
        assert got[node][0] is nf.NodeStatus.CANCELLED and got[node][6] == "run cancelled before the node started"
    assert shape(events)[-4:] == [
        ("NodeCancelled", "call"),
        ("NodeCancelled", "score"),
        ("NodeCancelled", "report"),
        ("RunFinished", None),
    ]


def test_a_batch_of_chains_gives_the_same_frame(path: str) -> None:
    frame = chain(fail_at=None).batch(pd.DataFrame({"x": [1, 22, 333]}), grid={"suffix": ["!", "?"]}, progress=False)
    assert list(frame["status"]) == ["succeeded"] * 6
    assert sorted(frame["report"].map(lambda r: r["score"])) == [4, 4, 6, 6, 8, 8]
    failing = chain(fail_at="call").batch(pd.DataFrame({"x": [5]}), progress=False)
    assert list(failing["status"]) == ["failed"] and list(failing["error_node"]) == ["call"]
    run = failing.nbflow.run(0)
    assert run.nodes["report"].status is nf.NodeStatus.SKIPPED
