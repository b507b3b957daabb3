"""Run watchers (``Run._watch``), what the live view listens with: coalesced notices, no event objects.

The view itself is tested in tests/widgets; here the contract it relies on: a notice at the first node
change after the run is armed and none until it is armed again; the run's own events delivered as
events; nothing built for nodes when only watchers listen; subscribers unaffected; a sub-flow's
changes reach a watched parent; a broken watcher is dropped with a warning.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

import nbflow as nf
from nbflow._core import events as ev

pytestmark = pytest.mark.anyio


def chain(n: int, wait: bool = False) -> nf.Flow:
    flow = nf.Flow(f"chain{n}")

    @flow.node
    async def n0() -> int:
        return 0

    for i in range(1, n):

        async def step(x: int) -> int:
            if wait:
                await asyncio.sleep(0)
            return x + 1

        flow.add(step, name=f"n{i}", inputs={"x": f"n{i - 1}"})
    return flow


async def test_a_watcher_that_never_rearms_gets_one_notice_and_the_run_events() -> None:
    flow = chain(30)
    got: list[Any] = []
    handle = flow.start(show=False)
    handle.run._watch(got.append)
    run = await handle
    assert run.status is nf.RunStatus.SUCCEEDED
    kinds = [type(e).__name__ if e is not None else None for e in got]
    assert kinds == ["RunStarted", None, "RunFinished"]
    assert isinstance(got[-1], ev.RunFinished) and got[-1].status is nf.RunStatus.SUCCEEDED


async def test_a_watcher_that_rearms_at_each_notice_hears_every_change() -> None:
    flow = chain(10)
    notices: list[tuple[str, ...]] = []
    handle = flow.start(show=False)
    run = handle.run

    def watcher(event: Any) -> None:
        if event is None:  # read the records, then arm again: as the view does when it draws
            notices.append(tuple(r.status.value for r in run.nodes.values()))
            run._arm()

    run._watch(watcher)
    await handle
    assert len(notices) == 20  # each node started and succeeded: two changes per node
    assert notices[-1] == ("succeeded",) * 10
    assert notices[0][0] == "running"


async def test_no_node_event_is_built_when_only_a_watcher_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    for cls in (ev.NodeStarted, ev.NodeSucceeded):
        original = cls.__init__

        def counting(self: Any, *a: Any, _original: Any = original, **k: Any) -> None:
            built.append(type(self).__name__)
            _original(self, *a, **k)

        monkeypatch.setattr(cls, "__init__", counting)
    flow = chain(20)
    handle = flow.start(show=False)
    handle.run._watch(lambda e: None)
    await handle
    assert built == []
    seen: list[Any] = []
    run = await flow.arun(on_event=seen.append, show=False)  # a subscriber still gets every event
    assert run.status is nf.RunStatus.SUCCEEDED
    assert len(built) == 40 and sum(isinstance(e, ev.NodeEvent) for e in seen) == 40


async def test_a_subscriber_and_a_watcher_together_each_get_theirs_in_order() -> None:
    flow = chain(15, wait=True)
    seen: list[Any] = []
    notices = 0
    handle = flow.start(show=False, on_event=seen.append)
    run = handle.run

    def watcher(event: Any) -> None:
        nonlocal notices
        if event is None:
            notices += 1
            run._arm()

    run._watch(watcher)
    await handle
    expected = [("RunStarted", None)]
    for i in range(15):
        expected += [("NodeStarted", f"n{i}"), ("NodeSucceeded", f"n{i}")]
    assert [(type(e).__name__, getattr(e, "node", None)) for e in seen] == [*expected, ("RunFinished", None)]
    assert notices == 30


async def test_a_watched_parent_hears_its_sub_flow_nodes() -> None:
    inner = nf.Flow("inner")
    gate = asyncio.Event()

    @inner.node
    async def first(x: int) -> int:
        return x + 1

    @inner.node
    async def second(first: int) -> int:
        await gate.wait()
        return first * 2

    outer = nf.Flow("outer")

    @outer.node
    async def x() -> int:
        return 1

    outer.add(inner, name="sub")
    states: list[dict[str, str]] = []
    handle = outer.start(show=False)
    run = handle.run

    def watcher(event: Any) -> None:
        if event is None:
            states.append({p: r.status.value for p, r in run.walk()})
            run._arm()

    run._watch(watcher)
    for _ in range(50):
        await asyncio.sleep(0)
        if any(s.get("sub.second") == "running" for s in states):
            break
    assert any(s.get("sub.second") == "running" for s in states), states  # noticed from inside the sub-flow
    gate.set()
    done = await handle
    assert done.status is nf.RunStatus.SUCCEEDED and done["sub"]["second"] == 4


async def test_a_broken_watcher_is_dropped_with_a_warning_and_the_run_goes_on() -> None:
    flow = chain(5)
    handle = flow.start(show=False)

    def broken(event: Any) -> None:
        raise RuntimeError("watcher bug")

    handle.run._watch(broken)
    with pytest.warns(nf.NbflowWarning, match="watcher bug"):
        run = await handle
    assert run.status is nf.RunStatus.SUCCEEDED and run["n4"] == 4
    assert run._watchers == []


def test_watchers_are_not_pickled_with_the_run() -> None:
    run = chain(3).run(show=False)
    stop = run._watch(lambda e: None)
    copy = pickle.loads(pickle.dumps(run))
    assert copy._watchers == [] and copy._armed is False
    assert copy["n2"] == 2
    stop()
    assert run._watchers == [] and run._armed is False
