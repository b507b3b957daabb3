"""The run view follows a run through coalesced notices (``Run._watch``), not per-node events.

What a user sees must not change: live states while the run goes, the final state at the end, and
an ``on_event=`` subscriber beside the view still gets every event.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import nbflow as nf
from nbflow.widgets import RunView
from tests.helpers import widget_comm

pytestmark = pytest.mark.anyio


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def gated_chain(gates: list[asyncio.Event]) -> nf.Flow:
    flow = nf.Flow("notices")
    prev: str | None = None
    for i, gate in enumerate(gates):

        async def step(x: int = 0, gate: asyncio.Event = gate) -> int:
            await gate.wait()
            return x + 1

        flow.add(step, name=f"s{i}", inputs={"x": prev} if prev else {})
        prev = f"s{i}"
    return flow


async def test_the_view_shows_each_step_live_without_subscribing(comm_log: list[Any]) -> None:
    gates = [asyncio.Event() for _ in range(4)]
    seen: list[Any] = []
    handle = gated_chain(gates).start(show=False)
    view = RunView(handle, interval=0)
    run = handle.run
    assert run._subscribers == [] and len(run._watchers) == 1  # no event objects are built for the view
    for i, gate in enumerate(gates):
        for _ in range(50):
            await asyncio.sleep(0)
            if view.nodes.get(f"s{i}", [""])[0] == "running":
                break
        assert view.nodes[f"s{i}"][0] == "running", view.nodes  # the change reached the view while running
        assert all(view.nodes[f"s{j}"][0] == "succeeded" for j in range(i))
        assert f"{i} succeeded" in view.header or i == 0
        gate.set()
    done = await handle
    assert done.status is nf.RunStatus.SUCCEEDED
    assert {p: v[0] for p, v in view.nodes.items()} == {f"s{i}": "succeeded" for i in range(4)}
    assert "4 succeeded" in view.header
    assert run._watchers == []  # the view let go at the end
    # With a subscriber beside the view: both get what they listen for.
    gates = [asyncio.Event() for _ in range(3)]
    for g in gates:
        g.set()
    handle = gated_chain(gates).start(show=False, on_event=seen.append)
    view = RunView(handle, interval=0)
    done = await handle
    assert "3 succeeded" in view.header
    assert [type(e).__name__ for e in seen].count("NodeSucceeded") == 3
    assert type(seen[0]).__name__ == "RunStarted" and type(seen[-1]).__name__ == "RunFinished"
