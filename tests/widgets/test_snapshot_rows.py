"""The static snapshot's table of nodes (what a saved notebook keeps) stays small for big runs.

A run of up to ``SNAPSHOT_ROWS`` nodes lists every node, as before. A bigger run lists the first
``SNAPSHOT_ROWS`` nodes in plan order, then every failed, cancelled, paused or running node (a problem is
never cut), then one line counting the nodes left out by state and saying where to see them.
"""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest

import nbflow as nf
from nbflow.widgets import RunView
from nbflow.widgets.run_view import SNAPSHOT_ROWS
from tests.helpers import widget_comm

pytestmark = pytest.mark.anyio

ROW = re.compile(r'<tr><td style="padding:1px 8px">.*?</td><td style="padding:1px 8px"><b>([^<]*)</b>')
MORE = re.compile(r"… ([\d,]+) more nodes? \(([^;()]*); every failed")


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def listed(html: str) -> list[str]:
    """The node paths of the snapshot's table rows, in order."""
    return ROW.findall(html)


def left_out(html: str) -> dict[str, int] | None:
    """The "… N more nodes (…)" line's counts by state, None without the line (checked against its total)."""
    found = MORE.findall(html)
    if not found:
        return None
    assert len(found) == 1
    total, states = found[0]
    counts = {state: int(n.replace(",", "")) for n, state in (part.split(" ") for part in states.split(", "))}
    assert sum(counts.values()) == int(total.replace(",", ""))
    return counts


def plain(n: int) -> nf.Flow:
    flow = nf.Flow(f"plain_{n}")
    for i in range(n):
        flow.add(lambda: 1, name=f"n{i}", thread=False)
    return flow


async def started(flow: nf.Flow, running: int) -> tuple[Any, RunView]:
    """The flow started with a view, once ``running`` of its nodes are running."""
    handle = flow.start(show=False)
    view = RunView(handle, interval=60)
    with anyio.fail_after(10):
        while handle.run.counts().get("running", 0) < running:
            await anyio.sleep(0.01)
    return handle, view


@pytest.mark.parametrize("n", [3, SNAPSHOT_ROWS], ids=["3 nodes", "the bound"])
async def test_a_run_up_to_the_bound_lists_every_node_and_no_more_line(comm_log: list[Any], n: int) -> None:
    run = await plain(n).arun(show=False)
    html = RunView(run).snapshot_html()
    assert listed(html) == [f"n{i}" for i in range(n)] and left_out(html) is None and "more node" not in html


async def test_a_big_run_lists_the_first_nodes_and_counts_the_rest(comm_log: list[Any]) -> None:
    n = SNAPSHOT_ROWS * 3
    flow = plain(n)
    handle = flow.start(show=False)
    view = RunView(handle, interval=60)
    pending = view.snapshot_html()  # displayed before the run starts: every node pending
    assert listed(pending) == [f"n{i}" for i in range(SNAPSHOT_ROWS)]
    assert left_out(pending) == {"pending": n - SNAPSHOT_ROWS}
    await handle
    final = view.snapshot_html()
    assert listed(final) == [f"n{i}" for i in range(SNAPSHOT_ROWS)]
    assert left_out(final) == {"succeeded": n - SNAPSHOT_ROWS}
    assert "run.nodes" in final and "run.to_frame()" in final
    # one more than the bound: one node left out, said in the singular
    one = RunView(await plain(SNAPSHOT_ROWS + 1).arun(show=False)).snapshot_html()
    assert len(listed(one)) == SNAPSHOT_ROWS and "… 1 more node (1 succeeded;" in one


async def test_problems_past_the_bound_are_never_cut_and_the_counts_add_up(comm_log: list[Any]) -> None:
    """Failures, and the nodes cancelled and skipped because of them, far past the bound: every failed and
    cancelled node is listed (in plan order), the skipped and succeeded ones are counted."""
    n = SNAPSHOT_ROWS + 250
    flow = plain(n)
    for i in range(SNAPSHOT_ROWS + 10, n, 2):  # 120 failures past the bound (every second node there)

        def boom(i: int = i) -> int:
            raise ValueError(f"node {i} broke")

        flow.add(boom, name=f"bad{i}", inputs={}, thread=False)
        flow.add(lambda x: x, name=f"down{i}", inputs={"x": f"bad{i}"}, thread=False)  # skipped: upstream failed
    run = await flow.arun(show=False)
    html = RunView(run).snapshot_html()
    rows = listed(html)
    failed = [p for p, r in run.walk() if r.status is nf.NodeStatus.FAILED]
    past = [p for i, (p, r) in enumerate(run.walk()) if i >= SNAPSHOT_ROWS and r.status.value in _PROBLEMS]
    first = [p for p, r in list(run.walk())[:SNAPSHOT_ROWS] if r.status.value not in _PROBLEMS]
    problems = [p for p, r in run.walk() if r.status.value in _PROBLEMS]
    assert past and set(past) <= set(problems)
    # problems first (above the picture, seen without scrolling), then the first nodes in the flow's order
    assert len(failed) == 120 and rows == problems + first
    assert set(failed) <= set(rows) and "node 398 broke" in html  # with its error
    counts = run.counts()
    shown: dict[str, int] = {}
    for p in rows:
        state = run.nodes[p].status.value
        shown[state] = shown.get(state, 0) + 1
    assert left_out(html) == {s: c - shown.get(s, 0) for s, c in counts.items() if c - shown.get(s, 0)}
    assert not (left_out(html) or {}).keys() & _PROBLEMS and (left_out(html) or {}).get("skipped") == 120


_PROBLEMS = {"failed", "cancelled", "paused", "running"}


async def test_cancelled_nodes_past_the_bound_are_listed(comm_log: list[Any]) -> None:
    flow = plain(SNAPSHOT_ROWS + 10)
    for i in range(3):

        @flow.node(name=f"wait{i}")
        async def wait() -> int:
            await anyio.sleep_forever()
            return 1

    handle, view = await started(flow, running=3)
    handle.cancel()
    run = await handle
    html = view.snapshot_html()
    assert [run.nodes[f"wait{i}"].status for i in range(3)] == [nf.NodeStatus.CANCELLED] * 3
    assert listed(html)[:3] == ["wait0", "wait1", "wait2"] and left_out(html) == {"succeeded": 10}  # listed first


async def test_a_running_node_past_the_bound_is_listed_while_it_runs(comm_log: list[Any]) -> None:
    gate = anyio.Event()
    flow = plain(SNAPSHOT_ROWS + 20)

    @flow.node
    async def slow() -> int:
        await gate.wait()
        return 1

    handle, view = await started(flow, running=1)
    assert "slow" in listed(view.snapshot_html())
    gate.set()
    await handle
    final = view.snapshot_html()
    assert "slow" not in listed(final) and left_out(final) == {"succeeded": 21}


async def test_a_paused_node_past_the_bound_is_listed(comm_log: list[Any]) -> None:
    flow = plain(SNAPSHOT_ROWS + 5)

    @flow.node
    async def review() -> str:
        return str(await nf.ask("Publish?", options=["yes", "no"]))

    run = await flow.arun(show=False)
    assert run.nodes["review"].status is nf.NodeStatus.PAUSED
    html = RunView(run).snapshot_html()
    assert listed(html)[0] == "review" and left_out(html) == {"succeeded": 5}  # listed first


async def test_secrets_past_the_bound_stay_redacted_in_the_snapshot(comm_log: list[Any]) -> None:
    flow = plain(SNAPSHOT_ROWS + 5)

    @flow.node(thread=False, on_error="continue")
    def call(api_key: str) -> str:
        raise RuntimeError(f"bad key {api_key}")

    @flow.node(thread=False)
    def echo(api_key: str) -> str:
        return f"key={api_key}"

    run = await flow.arun(api_key="sk-live-snap-5678", show=False)
    html = RunView(run).snapshot_html()
    assert "call" in listed(html) and "RuntimeError" in html and "sk-live-snap-5678" not in html
    assert run.nodes["call"].status is nf.NodeStatus.FAILED
