"""The engine's lean path (plain nodes without policies, ``_engine/lean.py``) records what the full path does.

A flow with a per-node policy takes the policy path (``call_node`` / ``call_with_policy``) for every
node; the same flow without it takes the lean path. Everything a user observes must be the same:
statuses, outputs, inputs, attempts, errors and tracebacks, skip reasons, and the events in order.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

import nbflow as nf


def mixed_flow(policy: bool) -> nf.Flow:
    """Async and sync nodes; one waits, one fails, one hands back a coroutine, one raises its own CancelledError."""
    flow = nf.Flow("lean")
    # A retry policy that never retries: the flow takes the policy path, and behaves the same.
    extra: dict[str, Any] = {"retry": nf.Retry(attempts=2, on=lambda exc: False)} if policy else {}

    @flow.node(**extra)
    async def quick(x: int) -> int:
        return x + 1

    @flow.node(**extra)
    async def waits(quick: int) -> int:
        await asyncio.sleep(0.01)
        await asyncio.sleep(0)  # a bare yield (None) is a wait too
        return quick * 2

    @flow.node(thread=False, **extra)
    def sync_inline(waits: int) -> int:
        return waits + 3

    @flow.node(**extra)
    def sync_default(quick: int) -> str:
        return f"q{quick}"

    @flow.node(thread=False, **extra)
    def hands_back(quick: int) -> Any:
        async def later() -> int:
            await asyncio.sleep(0)
            return quick * 10

        return later()

    @flow.node(**extra)
    async def fails(sync_inline: int) -> int:
        raise ValueError(f"bad {sync_inline}")

    @flow.node(**extra)
    def after_failure(fails: int) -> int:
        return fails

    @flow.node(**extra)
    async def own_cancel(quick: int) -> int:
        raise asyncio.CancelledError("mine")

    @flow.node(**extra)
    async def checked(quick: int) -> int:
        return "not a number"  # type: ignore[return-value]

    return flow


def observed(run: nf.Run) -> dict[str, tuple[Any, ...]]:
    out = {}
    for name, rec in run.nodes.items():
        out[name] = (
            rec.status,
            rec.output if rec.status is nf.NodeStatus.SUCCEEDED else None,
            dict(rec.inputs),
            len(rec.attempts),
            [a.number for a in rec.attempts],
            all(a.finished_at is not None and a.finished_at >= a.started_at for a in rec.attempts),
            rec.error_type,
            rec.error_message,
            # (the policy path's traceback of an escaped CancelledError ends at its own re-raise: not compared)
            rec.traceback.splitlines()[-1:] if rec.traceback and rec.error_type != "NodeEscaped" else None,
            rec.skip_reason,
            rec.started_at is not None and rec.finished_at is not None and rec.finished_at >= rec.started_at,
        )
    return out


def shape(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(type(e).__name__, getattr(e, "node", None)) for e in events]


def test_the_lean_path_records_and_emits_what_the_policy_path_does() -> None:
    runs, events = {}, {}
    for policy in (False, True):
        seen: list[Any] = []
        runs[policy] = mixed_flow(policy).run(x=1, on_event=seen.append, show=False)
        events[policy] = seen
    lean, full = observed(runs[False]), observed(runs[True])
    assert lean == full
    assert runs[False].status is runs[True].status is nf.RunStatus.FAILED
    assert lean["waits"][:2] == (nf.NodeStatus.SUCCEEDED, 4)
    assert lean["hands_back"][:2] == (nf.NodeStatus.SUCCEEDED, 20)
    assert lean["fails"][6] == "ValueError" and lean["after_failure"][0] is nf.NodeStatus.SKIPPED
    assert lean["own_cancel"][6] == "NodeEscaped"
    assert lean["checked"][6] == "TypeValidationError"
    # The same events; their order can differ only where branches interleave, so compare per node.
    for policy in (False, True):
        assert shape(events[policy])[0] == ("RunStarted", None) and shape(events[policy])[-1] == ("RunFinished", None)
    per_node: dict[bool, dict[str, list[str]]] = {}
    for policy in (False, True):
        per_node[policy] = {}
        for kind, node in shape(events[policy]):
            if node is not None:
                per_node[policy].setdefault(node, []).append(kind)
    assert per_node[False] == per_node[True]
    assert per_node[False]["waits"] == ["NodeStarted", "NodeSucceeded"]


def test_a_chain_of_lean_nodes_emits_its_events_in_order_and_records_every_attempt() -> None:
    flow = nf.Flow("chain")

    @flow.node
    async def n0() -> int:
        return 0

    prev = "n0"
    for i in range(1, 50):

        async def step(x: int) -> int:
            return x + 1

        flow.add(step, name=f"n{i}", inputs={"x": prev})
        prev = f"n{i}"
    seen: list[Any] = []
    run = flow.run(on_event=seen.append, show=False)
    assert run[prev] == 49
    expected = [("RunStarted", None)]
    for i in range(50):
        expected += [("NodeStarted", f"n{i}"), ("NodeSucceeded", f"n{i}")]
    assert shape(seen) == [*expected, ("RunFinished", None)]
    for i, rec in enumerate(run.nodes.values()):
        assert rec.attempts[0].number == 1 and len(rec.attempts) == 1
        assert rec.attempts[0].started_at == rec.started_at and rec.attempts[0].finished_at == rec.finished_at
        assert rec.inputs == ({} if i == 0 else {"x": i - 1})


def test_subscribing_mid_run_gets_the_later_events_in_order() -> None:
    flow = nf.Flow("mid")
    late: list[Any] = []

    @flow.node
    async def a() -> int:
        return 1

    @flow.node
    async def b(a: int) -> int:
        run = flow.last_run
        assert run is not None
        run.subscribe(late.append)  # from inside the run: every later event, in order
        return a + 1

    @flow.node
    async def c(b: int) -> int:
        await asyncio.sleep(0)
        return b + 1

    run = flow.run(show=False)
    assert run["c"] == 3
    assert shape(late) == [("NodeSucceeded", "b"), ("NodeStarted", "c"), ("NodeSucceeded", "c"), ("RunFinished", None)]


def test_a_real_cancellation_of_a_waiting_lean_node_cancels_it() -> None:
    flow = nf.Flow("cancel")

    @flow.node
    async def slow() -> int:
        await asyncio.sleep(5)
        return 1

    run = flow.run(timeout=0.1, show=False)
    assert run.status is nf.RunStatus.CANCELLED
    assert run.nodes["slow"].status is nf.NodeStatus.CANCELLED
    assert "deadline" in (run.nodes["slow"].skip_reason or "")


@pytest.mark.parametrize("check", [True, False])
def test_check_mutation_still_guards_lean_nodes(check: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nf.config, "check_mutation", check)
    flow = nf.Flow("mutate")

    @flow.node
    async def data() -> list[int]:
        return [1, 2]

    @flow.node
    async def changes(data: list[int]) -> int:
        data.append(3)
        return len(data)

    run = flow.run(show=False)
    rec = run.nodes["changes"]
    if check:
        assert rec.status is nf.NodeStatus.FAILED and rec.error_type == "InputMutationError"
    else:
        assert rec.status is nf.NodeStatus.SUCCEEDED


@pytest.mark.skipif(
    sys.version_info < (3, 12),
    reason="inspect.markcoroutinefunction is 3.12+; before it every async node returns a coroutine",
)
def test_an_async_node_returning_another_awaitable_is_awaited() -> None:
    import functools
    import inspect

    class Ready:
        def __await__(self) -> Any:
            yield from asyncio.sleep(0).__await__()
            return 41

    def make(x: int) -> Ready:
        return Ready()

    marked = functools.partial(inspect.markcoroutinefunction(make))  # type: ignore[attr-defined]
    flow = nf.Flow("awaitable")
    flow.add(marked, name="val", inputs={"x": "x"})

    @flow.node
    async def plus(val: int) -> int:
        return val + 1

    run = flow.run(x=1, show=False)
    assert run.status is nf.RunStatus.SUCCEEDED, run.summary()
    assert run["plus"] == 42
