"""The run view without a browser: a recording comm stands in for the front end."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import nbflow as nf
from nbflow._show.draw import STATE_COLORS
from nbflow.widgets import RunView
from tests.helpers import widget_comm
from tests.helpers.widget_comm import customs, folded_nodes, frontend_sends, frontend_sets, updates

pytestmark = pytest.mark.anyio

_NODE = re.compile(r'<g id="node-([\w.]+)" class="node nbflow-node nbflow-(\w+)[^"]*">[\s\S]*?<path fill="([^"]+)"')


def states(html: str) -> dict[str, tuple[str, str]]:
    """node -> (state class, fill colour) as drawn in the SVG."""
    return {m.group(1): (m.group(2), m.group(3)) for m in _NODE.finditer(html)}


def snapshot_svg(html: str) -> str:
    """The SVG inside a snapshot's graph image (a base64 ``data:`` URL)."""
    import base64

    found = re.search(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", html)
    assert found is not None, html[:300]
    return base64.b64decode(found.group(1)).decode("utf-8")


class FakeTime:
    """An injected clock plus a recorder for scheduled callbacks (nothing runs by itself)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.scheduled: list[tuple[float, Any]] = []

    def clock(self) -> float:
        return self.now

    def later(self, delay: float, callback: Any) -> None:
        self.scheduled.append((delay, callback))


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def failing_flow() -> nf.Flow:
    flow = nf.Flow("inspect")

    @flow.node
    def table(n: int) -> Any:
        import pandas as pd

        return pd.DataFrame({"x": range(n), "square": [i * i for i in range(n)]})

    @flow.node
    def stats(table: Any) -> dict:
        return {"rows": len(table), "total": int(table["square"].sum())}

    @flow.node
    def report(stats: dict) -> str:
        raise ValueError(f"cannot report {stats['rows']} rows")

    @flow.node
    def publish(report: str) -> str:
        return report

    return flow


async def test_colours_follow_events_and_reach_the_front_end(comm_log: list[Any]) -> None:
    flow = nf.Flow("live")
    gate = anyio.Event()

    @flow.node
    async def a() -> int:
        await gate.wait()
        return 1

    @flow.node(thread=False)
    def b(a: int) -> int:
        raise ValueError("bad")

    @flow.node
    def c(b: int) -> int:
        return b

    handle = flow.start(show=False)
    view = RunView(handle, interval=0)
    for _ in range(20):
        await anyio.sleep(0)
    assert states(view.graph_html())["a"] == ("running", STATE_COLORS[nf.NodeStatus.RUNNING][0])
    assert states(view.graph_html())["b"][0] == "pending"
    gate.set()
    run = await handle
    assert run.status is nf.RunStatus.FAILED
    drawn = states(view.graph_html())
    assert drawn["a"] == ("succeeded", STATE_COLORS[nf.NodeStatus.SUCCEEDED][0])
    assert drawn["b"] == ("failed", STATE_COLORS[nf.NodeStatus.FAILED][0])
    assert drawn["c"] == ("skipped", STATE_COLORS[nf.NodeStatus.SKIPPED][0])
    # the same picture was sent to the front end
    sent = folded_nodes(comm_log, view.comm.comm_id)
    assert {name: v[0] for name, v in sent[-1].items()} == {name: v[0] for name, v in drawn.items()}
    assert any(v.get("a", ("",))[0] == "running" for v in sent)
    assert sent[-1] == view.nodes
    # the SVG was sent once (laid out once), never redrawn
    assert sum(1 for cid, t, d in comm_log if cid == view.comm.comm_id and d and d.get("state", {}).get("svg")) == 1
    assert "FAILED" in view.header and "1 failed" in view.header
    # the failure is listed once at the top (its type; the message is in the inspector, shown once)
    assert 'data-node="b"' in view.problems and "ValueError" in view.problems
    assert "upstream &#x27;b&#x27; failed" in view.problems  # skipped nodes say why
    assert view.inspector.count("ValueError: bad") == 1  # the message once: not again at the traceback's end


async def test_node_states_go_out_as_per_node_deltas(comm_log: list[Any]) -> None:
    """After the opening state, each redraw sends only the nodes that changed, numbered; a resync sends all."""
    flow = nf.Flow("chain")
    gates = [anyio.Event() for _ in range(6)]

    def first(gate: anyio.Event) -> Any:
        async def node() -> int:
            await gate.wait()
            return 1

        return node

    def then(gate: anyio.Event) -> Any:
        async def node(x: int) -> int:
            await gate.wait()
            return x

        return node

    for i in range(6):
        if i == 0:
            flow.add(first(gates[0]), name="n0", thread=False)
        else:
            flow.add(then(gates[i]), name=f"n{i}", inputs={"x": f"n{i - 1}"}, thread=False)
    handle = flow.start(show=False)
    view = RunView(handle, interval=0)
    cid = view.comm.comm_id
    for gate in gates:  # one node finishes at a time: each delta is that node and the next one
        for _ in range(30):
            await anyio.sleep(0)
        gate.set()
    await handle
    deltas = [m for m in customs(comm_log, cid) if m.get("kind") == "nodes"]
    assert len(deltas) >= 5 and all(len(m["delta"]) <= 2 for m in deltas), deltas
    assert [m["seq"] for m in deltas] == list(range(deltas[0]["seq"], deltas[0]["seq"] + len(deltas)))
    # the whole state goes out with the opening message, and once more at the end (as a state update: the
    # browser's model and a saved notebook's widget state have the final picture); never in between
    opened = [d["state"] for c, t, d in comm_log if c == cid and t == "comm_open"]
    assert opened and "nodes" in opened[0]
    whole = [u for u in updates(comm_log, cid) if "nodes" in u]
    assert len(whole) == 1 and whole[0]["nodes_seq"] >= deltas[-1]["seq"] and whole[0]["nodes"] == view.nodes
    # folded in order, the deltas give the final picture
    assert folded_nodes(comm_log, cid)[-1] == view.nodes
    assert {v[0] for v in view.nodes.values()} == {"succeeded"}
    # a front end that missed deltas asks once and gets the whole state; an up-to-date one gets nothing
    before = len(customs(comm_log, cid))
    frontend_sends(view, kind="resync", seq=view.nodes_seq)
    assert len(customs(comm_log, cid)) == before
    frontend_sends(view, kind="resync", seq=0)
    (full,) = customs(comm_log, cid)[before:]
    assert full == {"kind": "nodes", "seq": view.nodes_seq, "full": view.nodes}


async def test_inspector_shows_outputs_richly_and_the_traceback(comm_log: list[Any]) -> None:
    run = failing_flow().run(n=4, show=False)
    view = RunView(run)
    assert view.selected == "report"  # the first failure is shown without asking
    text = view.inspector
    assert "Traceback (most recent call last)" in text
    assert "in report" in text and "ValueError: cannot report 4 rows" in text
    assert "inputs" in text and "stats" in text  # inputs listed
    assert "attempts" not in text  # one attempt: no attempts table
    view.select("table")
    assert "<table" in view.inspector and "square" in view.inspector
    assert "DataFrame 4×2" in view.inspector
    view.select("stats")
    assert "&quot;total&quot;: 14" in view.inspector  # pretty JSON
    view.select("publish")
    assert "skipped" in view.inspector and "upstream" in view.inspector
    assert view.selected == "publish"
    # the selector's entries are sent once; the browser labels them from the node states and the symbols
    assert view.options == ["table", "stats", "report", "publish"]
    assert {name: view.symbols[view.nodes[name][0]] for name in view.options} == {
        "table": "✓",
        "stats": "✓",
        "report": "✗",
        "publish": "–",
    }


async def test_inspector_renders_models_long_text_and_images(comm_log: list[Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pydantic

    class Answer(pydantic.BaseModel):
        text: str
        score: float

    flow = nf.Flow("kinds")

    @flow.node
    def model() -> Answer:
        return Answer(text="hi", score=0.5)

    @flow.node
    def long_text() -> str:
        return "line\n" * 5000

    @flow.node(thread=False)
    def figure() -> Any:
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.plot([1, 2, 3])
        plt.close(fig)
        return fig

    view = RunView(flow.run(show=False))
    view.select("model")
    assert "&quot;score&quot;: 0.5" in view.inspector
    view.select("long_text")
    assert 'class="nbflow-scroll"' in view.inspector and "str, 25,000 chars" in view.inspector
    view.select("figure")
    assert '<img src="data:image/png;base64,' in view.inspector


async def test_clicking_a_node_in_the_graph_selects_it(comm_log: list[Any]) -> None:
    view = RunView(failing_flow().run(n=2, show=False))
    frontend_sends(view, kind="select", node="stats")  # what the SVG's click handler sends
    assert view.selected == "stats"
    assert "&quot;rows&quot;: 2" in view.inspector
    assert "nbflow-selected" in re.search(r'<g id="node-stats" class="([^"]*)"', view.graph_html()).group(1)
    frontend_sends(view, kind="select", node="table", how="selector")  # picking in the selector
    assert view.selected == "table"
    frontend_sets(view, selected="stats")  # a state change from the browser is not how picks travel: ignored
    assert "DataFrame 2×2" in view.inspector
    frontend_sends(view, kind="select", node="no_such_node")  # ignored
    assert view.selected == "table"


async def test_redraws_are_throttled(comm_log: list[Any]) -> None:
    flow = nf.Flow("many")
    for i in range(50):
        flow.add(lambda: 1, name=f"n{i}", thread=False)
    t = FakeTime()
    handle = flow.start(show=False)
    view = RunView(handle, clock=t.clock, later=t.later, interval=1.0)
    await handle  # 100+ events, all within one tick of the fake clock
    assert view.redraws == 1  # only the final one, on RunFinished (the first is deferred by one interval)
    trailing = [cb for _, cb in t.scheduled if getattr(cb, "__name__", "") == "_trailing"]
    assert len(trailing) == 1  # one trailing redraw was scheduled, not one per event
    assert "50 succeeded" in view.header


def test_throttle_draws_at_most_once_per_interval() -> None:
    from nbflow.widgets.throttle import Throttle

    now = 0.0
    due: list[tuple[float, Any]] = []
    drawn: list[float] = []
    th = Throttle(lambda: drawn.append(now), 0.25, clock=lambda: now, later=lambda d, cb: due.append((now + d, cb)))
    for step in range(1, 101):  # an event every 10 ms for 1 s
        now = step * 0.01
        for item in [d for d in due if d[0] <= now]:
            due.remove(item)
            item[1]()
        th.poke()
    assert len(drawn) == 4  # at 0.25, 0.5, 0.75 and 1.0 s
    assert all(b - a >= 0.25 - 1e-9 for a, b in itertools.pairwise(drawn))
    now = 1.5
    for _, cb in due:  # the event at 1.0 s came after that draw: a trailing draw shows it
        cb()
    assert drawn[-1] == 1.5 and len(drawn) == 5
    now = 3.0
    th.poke()
    assert drawn[-1] == 3.0  # after a quiet spell an event is drawn at once


async def test_cancel_button_cancels_a_background_run(comm_log: list[Any]) -> None:
    flow = nf.Flow("slow")

    @flow.node(thread=False)
    def fast() -> int:
        return 1

    @flow.node
    async def slow(fast: int) -> int:
        await anyio.sleep(60)
        return fast

    handle = flow.start(show=False)
    view = RunView(handle, interval=0)
    assert view.cancellable
    for _ in range(500):
        await anyio.sleep(0.001)
        if handle.run.nodes["slow"].status is nf.NodeStatus.RUNNING:
            break
    frontend_sends(view, kind="cancel")  # the Cancel button
    assert view.cancelling
    run = await handle
    assert run.status is nf.RunStatus.CANCELLED
    assert run["fast"] == 1  # finished outputs kept
    assert not view.cancellable
    assert states(view.graph_html())["slow"][0] == "cancelled"
    assert "CANCELLED" in view.header
    # a finished run or a foreground run has no Cancel button
    assert not RunView(run).cancellable


async def test_secrets_are_never_sent_to_the_front_end(comm_log: list[Any]) -> None:
    flow = nf.Flow("llm")

    @flow.node
    def call(prompt: str, api_key: str, max_tokens: int, settings: dict) -> dict:
        return {"prompt": prompt, "headers": {"Authorization": f"Bearer {api_key}"}, "echo": api_key}

    @flow.node
    def fail(call: dict, db_password: str) -> None:
        raise RuntimeError(f"login failed with {db_password}")

    run = flow.run(
        prompt="hi", api_key="sk-live-1234", max_tokens=77, settings={"token": "tok-9999"}, db_password="hunter22"
    )
    view = RunView(run)
    view.select("call")
    inspected = view.inspector
    assert "••••••" in inspected and "77" in inspected  # max_tokens is not a secret
    view.select("fail")
    everything = json.dumps(comm_log)
    for secret in ("sk-live-1234", "tok-9999", "hunter22"):
        assert secret not in everything
    assert "login failed with ••••••" in view.inspector
    # nor to a saved notebook: the static snapshot (its table, and the graph image's tooltips)
    import base64

    fresh = RunView(run)  # a view whose inspector never looked at the nodes
    snapshot = fresh.snapshot_html()
    image = re.search(r"base64,([A-Za-z0-9+/=]+)", snapshot)
    assert image is not None
    svg = base64.b64decode(image.group(1)).decode("utf-8")
    assert "login failed with" in svg  # the tooltip is there ...
    for secret in ("sk-live-1234", "tok-9999", "hunter22"):
        assert secret not in snapshot and secret not in svg  # ... redacted
    frontend_sends(fresh, kind="timeline")
    assert "hunter22" not in json.dumps(comm_log)


def test_without_dot_the_graph_is_a_table(monkeypatch: pytest.MonkeyPatch, comm_log: list[Any]) -> None:
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: None if cmd == "dot" else real_which(cmd, *a, **k))
    view = RunView(failing_flow().run(n=3, show=False))
    assert "<svg" not in view.graph_html() and "<table" in view.graph_html()
    rows = dict(
        re.findall(
            r'<tr class="nbflow-node" id="node-(\w+)"[^>]*><td><span class="nbflow-chip nbflow-chip-(\w+)',
            view.graph_html(),
        )
    )
    assert rows == {"table": "succeeded", "stats": "succeeded", "report": "failed", "publish": "skipped"}
    assert "cannot report 3 rows" in view.graph_html()
    frontend_sends(view, kind="select", node="stats")  # rows are clickable too
    assert view.selected == "stats"


def nested_flow(inner: int = 30) -> nf.Flow:
    """A parent with two sub-flows of ``inner`` nodes each (the second fails in its last node)."""

    def chain(title: str, fail: bool) -> nf.Flow:
        sub = nf.Flow(title)
        sub.add(lambda text: text, name="s0", thread=False)
        for i in range(1, inner):
            if fail and i == inner - 1:

                def broken(x: str) -> str:
                    raise ValueError("inner failure")

                sub.add(broken, name=f"s{i}", inputs={"x": f"s{i - 1}"}, thread=False)
            else:
                sub.add(lambda x: x, name=f"s{i}", inputs={"x": f"s{i - 1}"}, thread=False)
        return sub

    flow = nf.Flow("nested")

    @flow.node(thread=False)
    def doc() -> str:
        return "text"

    flow.add(chain("clean", False), name="clean", inputs={"text": "doc"}, output=f"s{inner - 1}")
    flow.add(chain("judge", True), name="judge", inputs={"text": "clean"}, output=f"s{inner - 1}")
    return flow


def test_big_graphs_fold_their_subflows_and_each_opens_on_demand(comm_log: list[Any]) -> None:
    """Sub-flows fold into one node each when the whole graph is too big to read; one opens on demand."""
    run = nested_flow(30).run(show=False)  # 63 nodes in all
    view = RunView(run, max_svg_nodes=40)
    assert view.subflows == ["clean", "judge"] and view.collapsed == ["clean", "judge"]
    drawn = states(view.graph_html())
    assert set(drawn) == {"doc", "clean", "judge"}  # a picture, not the table: the sub-flows are one node each
    assert drawn["judge"][0] == "failed" and drawn["clean"][0] == "succeeded"
    assert "[▸ sub&#45;flow &#39;clean&#39;: 30 nodes]" in view.svg  # the folded node says what it holds
    assert len(view.options) == 63  # every node can still be picked (and searched)
    assert view.nodes["judge.s29"][0] == "failed"  # inner states are known to the browser all the same
    # open one sub-flow from the browser: laid out again with its nodes (one new SVG), the other stays folded
    svgs = sum(1 for c, t, d in comm_log if c == view.comm.comm_id and d and d.get("state", {}).get("svg"))
    frontend_sends(view, kind="fold", node="judge", folded=False)
    assert view.collapsed == ["clean"]
    drawn = states(view.graph_html())
    assert "judge.s29" in drawn and drawn["judge.s29"][0] == "failed" and "clean.s3" not in drawn
    assert sum(1 for c, t, d in comm_log if c == view.comm.comm_id and d and d.get("state", {}).get("svg")) == svgs + 1
    # opening the second too would show 63 > 40 nodes: refused, the picture stays readable
    frontend_sends(view, kind="fold", node="clean", folded=False)
    assert view.collapsed == ["clean"]
    view.fold("judge")  # folded again, from Python
    assert view.collapsed == ["clean", "judge"] and "judge.s29" not in states(view.graph_html())
    # picking an inner node (selector, search, problems) opens the sub-flow around it
    frontend_sends(view, kind="select", node="judge.s29")
    assert view.selected == "judge.s29" and view.collapsed == ["clean"]
    with pytest.raises(nf.NbflowError, match="'doc' of flow 'nested' is not a sub-flow"):
        view.fold("doc")
    with pytest.raises(nf.UnknownNodeError):
        view.fold("nowhere")


def test_a_flow_defined_again_reuses_its_layout(comm_log: list[Any]) -> None:
    """Running a definition cell again makes a new Flow of the same shape: its picture is not laid out again
    (``dot`` costs 25-100 ms, most of a warm run's first paint). Another shape is laid out anew."""
    from nbflow.widgets.graph_pane import SvgTemplate

    first = RunView(failing_flow().run(n=1, show=False))
    again = failing_flow()
    again.name = "renamed"
    second = RunView(again.run(n=1, show=False))
    assert second._template is first._template and second.svg == first.svg
    assert "<title>inspect</title>" not in first.svg  # the name is not in the shared picture
    other = nf.Flow("other")
    other.add(lambda: 1, name="solo", thread=False)
    assert RunView(other.run(show=False))._template is not first._template
    assert SvgTemplate.layout(other.graph) is SvgTemplate.layout(other.graph)


def test_small_nested_graphs_are_drawn_open(comm_log: list[Any]) -> None:
    view = RunView(nested_flow(3).run(show=False))
    assert view.collapsed == [] and view.subflows == ["clean", "judge"]
    assert {"clean.s0", "judge.s2", "doc"} <= set(states(view.graph_html()))


def test_big_graphs_are_tables_with_the_problems_first(comm_log: list[Any]) -> None:
    flow = nf.Flow("wide")
    for i in range(200):
        flow.add(lambda: 1, name=f"n{i}", thread=False)

    @flow.node(thread=False)
    def broken() -> int:
        raise KeyError("x")

    view = RunView(flow.run(show=False))
    assert "<svg" not in view.graph_html()
    first = re.search(r'id="node-(\w+)"', view.graph_html()).group(1)
    assert first == "broken"
    assert "more nodes" in view.graph_html() and len(view.options) == 201
    # The line names a way to reach the others that a saved snapshot (no selector) still has.
    assert re.search(r"… 141 more nodes \(each one: the selector, or <code>run\.nodes</code>\)", view.graph_html())
    # The live table (each redraw) too; a run with nothing urgent keeps the flow's order.
    assert re.search(r'id="node-(\w+)"', view.table).group(1) == "broken"
    flow.remove("broken")
    calm = RunView(flow.run(show=False))
    assert re.findall(r'id="node-(\w+)"', calm.table)[:3] == ["n0", "n1", "n2"]
    assert calm.problems == ""


def test_outside_a_kernel_nothing_imports_ipywidgets() -> None:
    code = (
        "import sys, nbflow as nf\n"
        "f = nf.Flow('x')\n"
        "@f.node\n"
        "def a() -> int:\n    return 1\n"
        "run = f.run()\n"
        "b = run._repr_mimebundle_()\n"
        "assert 'text/plain' in b, b\n"
        "bad = [m for m in ('ipywidgets', 'IPython') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class FakeKernel:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import IPython.display

        import nbflow._flow.flow
        import nbflow._notebook

        self.shown: list[Any] = []
        self.snapshots: list[Any] = []
        self.bundles: list[Any] = []
        self.count = 1
        monkeypatch.setattr(nbflow._notebook, "in_kernel", lambda: True)
        nbflow._flow.flow._load_engine()  # a run asks the engine's in_kernel before importing the notebook layer
        monkeypatch.setattr(nbflow._flow.flow, "in_kernel", lambda: True)
        monkeypatch.setattr(nbflow._notebook, "_execution_count", lambda: self.count)
        monkeypatch.setattr(IPython.display, "display", self.display)

    def display(self, obj: Any, raw: bool = False, display_id: Any = None) -> Any:
        if raw:  # the static snapshot shown beside the widget
            self.snapshots.append(obj)
            return _Handle(self.snapshots)
        self.shown.append(obj)
        if hasattr(obj, "_repr_mimebundle_"):  # as IPython's display formatter does
            self.bundles.append(obj._repr_mimebundle_())
        return None


class _Handle:
    def __init__(self, snapshots: list[Any]) -> None:
        self.snapshots = snapshots

    def update(self, obj: Any, raw: bool = False) -> None:
        self.snapshots.append(obj)


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch, comm_log: list[Any]) -> FakeKernel:
    return FakeKernel(monkeypatch)


async def test_runs_show_the_live_view_in_a_kernel(kernel: FakeKernel) -> None:
    flow = failing_flow()
    run = flow.run(n=2)  # a loop is running: this is the worker-thread path of a notebook cell
    (view,) = kernel.shown
    assert isinstance(view, RunView) and view.run is run
    assert states(view.graph_html())["report"][0] == "failed"  # the final redraw came from the worker thread
    # the static snapshot beside the widget was updated to the final state (what a saved notebook shows)
    final = kernel.snapshots[-1]
    assert "FAILED" in final["text/html"] and states(snapshot_svg(final["text/html"]))["report"][0] == "failed"
    assert final["text/plain"] == "<nbflow run snapshot: flow 'inspect', 4 nodes>"
    assert run._repr_mimebundle_() == {"text/plain": repr(run)}  # not drawn twice in the same cell
    kernel.count += 1
    bundle = run._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == "<nbflow run view: flow 'inspect', 4 nodes>"
    await flow.arun(n=2)
    handle = flow.start(n=2)
    await handle
    assert len(kernel.shown) == 3 and kernel.shown[2].run is handle.run
    assert kernel.shown[2].handle is None  # a final run's view lets its handle go
    assert "application/vnd.jupyter.widget-view+json" in (await_bundle := handle._repr_mimebundle_()) or await_bundle


async def test_every_display_of_a_run_carries_its_snapshot(kernel: FakeKernel) -> None:
    """A run shown again later (``run`` or a ``RunView`` as a cell's value) puts its snapshot out first, too."""
    flow = failing_flow()
    run = flow.run(n=2)
    assert len(kernel.snapshots) == 2  # the live view's snapshot, then its final update
    kernel.count += 1  # a later cell: `run` on its last line
    bundle = run._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    again = kernel.snapshots[-1]
    assert len(kernel.snapshots) == 3 and "FAILED" in again["text/html"]
    assert states(snapshot_svg(again["text/html"]))["report"][0] == "failed"
    # a view made by hand and left as a cell's value (notebooks/05_inspect does so)
    view = RunView(run)
    view.select("table")
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    snap = kernel.snapshots[-1]["text/html"]
    assert len(kernel.snapshots) == 4 and f"nbflow-snap-{view.snapshot_id}" in snap
    # ... and the snapshot hides the widget's text-only output below it ("model not found" once reopened)
    assert f".jp-OutputArea-child:has(.nbflow-snap-{view.snapshot_id}) + .jp-OutputArea-child" in snap
    view.close()


async def test_each_snapshot_of_a_live_run_follows_it_to_the_end(kernel: FakeKernel) -> None:
    flow = nf.Flow("gated")
    gate = anyio.Event()

    @flow.node
    async def wait() -> int:
        await gate.wait()
        return 1

    handle = flow.start()
    await anyio.sleep(0.05)
    kernel.count += 1
    handle._repr_mimebundle_()  # shown a second time while running
    assert [("RUNNING" in s["text/html"] or "PENDING" in s["text/html"]) for s in kernel.snapshots] == [True, True]
    gate.set()
    await handle
    with anyio.fail_after(5):
        while sum("SUCCEEDED" in s["text/html"] for s in kernel.snapshots) < 2:
            await anyio.sleep(0.02)  # both views updated their own snapshot to the final state


async def test_show_false_and_the_global_switch(kernel: FakeKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    flow = failing_flow()
    flow.run(n=1, show=False)
    await flow.arun(n=1, show=False)
    assert kernel.shown == []
    monkeypatch.setattr(nf.config, "show", False)
    flow.run(n=1)
    assert kernel.shown == []
    flow.run(n=1, show=True)
    assert len(kernel.shown) == 1
    monkeypatch.setattr(nf.config, "widgets", False)
    kernel.count += 1
    assert "image/svg+xml" in flow.last_run._repr_mimebundle_()


def test_text_progress_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    flow = failing_flow()
    flow.run(n=1)
    assert capsys.readouterr().err == ""
    flow.run(n=1, show=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[nbflow] inspect: node 'report' failed: ValueError: cannot report 1 rows")
    assert "FAILED in" in err[-1] and "1 failed" in err[-1]


async def test_huge_or_broken_outputs_do_not_break_the_view(comm_log: list[Any]) -> None:
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    flow = nf.Flow("odd")

    @flow.node
    def big() -> list[int]:
        return list(range(100_000))

    @flow.node
    def broken() -> Any:
        return Broken()

    view = RunView(flow.run(show=False))
    view.select("big")
    assert "99,800 more items not shown" in view.inspector and "list, 100,000 items" in view.inspector
    view.select("broken")
    assert "cannot show node broken: RuntimeError: no repr" in view.inspector
    assert "FAILED" not in view.header


async def test_sub_flow_nodes_are_drawn_selectable_and_inspectable(comm_log: list[Any]) -> None:
    inner = nf.Flow("summarize")

    @inner.node
    def clean(text: str) -> str:
        return text.strip()

    @inner.node
    def summary(clean: str) -> str:
        raise ValueError(f"too short: {clean!r}")

    parent = nf.Flow("parent")

    @parent.node
    def doc() -> str:
        return "  hello  "

    parent.add(inner, name="summ", inputs={"text": "doc"}, output="summary")
    view = RunView(parent.run(show=False))
    assert view.selected == "summ.summary"  # the innermost failure, with the real traceback
    drawn = states(view.graph_html())
    assert drawn["summ.clean"][0] == "succeeded" and drawn["summ.summary"][0] == "failed"
    assert drawn["summ"][0] == "failed"
    assert "summ.summary" in view.options
    frontend_sends(view, kind="select", node="summ.clean")
    assert view.selected == "summ.clean" and "hello" in view.inspector
    view.select("summ.summary")
    assert "too short" in view.inspector and "Traceback" in view.inspector


async def test_map_items_and_loop_iterations_are_listed(comm_log: list[Any]) -> None:
    flow = nf.Flow("ctl")

    @flow.node
    def docs() -> list[str]:
        return ["a", "bb", "boom", "dddd"]

    @flow.map(over="docs", errors="continue")
    def lengths(docs: str) -> int:
        if docs == "boom":
            raise ValueError("exploded item")
        return len(docs)

    @flow.loop(feed="draft", max_iterations=3)
    def refine(draft: int) -> int:
        return draft + 1

    @flow.node
    def draft() -> int:
        return 0

    view = RunView(flow.run(show=False))
    view.select("lengths")
    text = view.inspector
    assert "<b>items</b> (4, 1 failed)" in text
    assert "ValueError: exploded item" in text and "traceback of item 2" in text
    view.select("refine")
    assert "<b>iterations</b> (3, 0 failed)" in view.inspector


async def test_a_view_opened_mid_run_draws_at_once_and_ticks(comm_log: list[Any]) -> None:
    flow = nf.Flow("mid")
    gate = anyio.Event()

    @flow.node
    async def slow() -> int:
        await gate.wait()
        return 1

    handle = flow.start(show=False)
    for _ in range(20):
        await anyio.sleep(0)
    t = FakeTime()
    view = RunView(handle, clock=t.clock, later=t.later)
    assert states(view.graph_html())["slow"][0] == "running"  # no waiting for the next event
    assert [cb.__name__ for _, cb in t.scheduled] == ["_tick"]
    t.scheduled.pop()[1]()  # a second later: the header is refreshed and the next tick scheduled
    assert [cb.__name__ for _, cb in t.scheduled] == ["_tick"]
    gate.set()
    await handle
    due, t.scheduled = t.scheduled, []
    for _, cb in due:
        cb()
    assert t.scheduled == []  # the run is over: the ticking stops
    assert "SUCCEEDED" in view.header


def test_config_refuses_bad_values() -> None:
    with pytest.raises(nf.ConfigError, match="must be True or False"):
        nf.config.show = "no"  # type: ignore[assignment]
    with pytest.raises(nf.ConfigError, match=r"redraw_interval .* \(0, 60\]"):
        nf.config.redraw_interval = 0
    with pytest.raises(AttributeError):
        nf.config.shw = False  # type: ignore[attr-defined]
    assert nf.config.show is True and nf.config.redraw_interval == 0.25


async def test_a_paused_run_shows_its_question_and_the_answer_buttons_resume_it(comm_log: list[Any]) -> None:
    flow = nf.Flow("publishing")

    @flow.node
    def draft(topic: str) -> str:
        return f"Why {topic} matter"

    @flow.node
    async def review(draft: str) -> str:
        return await nf.ask("Publish this draft?", data=draft, options=["approve", "reject"])

    @flow.node
    def publish(review: str, draft: str) -> str:
        return f"{review}: {draft}"

    run = await flow.arun(topic="bees", show=False)
    assert run.status is nf.RunStatus.PAUSED
    view = RunView(run)
    assert "PAUSED" in view.header
    (card,) = view.questions
    assert card["prompt"] == "Publish this draft?" and "Why bees matter" in card["data"]
    assert card["options"] == ["approve", "reject"] and view.selected == "review"
    frontend_sends(view, kind="answer", key=card["key"], value="approve", comment="fine by me", how="the button")
    assert "resuming" in view.answer_status[card["key"]]
    await view._answer_task
    assert run.status is nf.RunStatus.SUCCEEDED and run["publish"] == "approve: Why bees matter"
    assert "SUCCEEDED" in view.header and view.questions == [] and view.answer_status == {}
    view.select("review")  # the answered question stays in the node's history; a resume is not a retry
    assert "answered &#x27;approve&#x27; by the button" in view.inspector and "comment: fine by me" in view.inspector
    assert "attempts" not in view.inspector and view.nodes["review"][1] == "succeeded"
    assert states(view.graph_html())["publish"][0] == "succeeded"


async def test_a_free_text_question_reports_a_bad_answer_and_allows_another(comm_log: list[Any]) -> None:
    flow = nf.Flow("form")

    @flow.node
    async def amount() -> int:
        return await nf.ask("How many?", schema=int)

    run = await flow.arun(show=False)
    view = RunView(run)
    (card,) = view.questions
    assert card["options"] == []  # a text box
    frontend_sends(view, kind="answer", key=card["key"], value="many", comment="", how="typing")
    with pytest.raises(nf.AnswerError):
        await view._answer_task
    assert "AnswerError" in view.answer_status[card["key"]]
    assert "answered" not in view.inspector  # a refused answer is not in the history
    assert run.status is nf.RunStatus.PAUSED


async def test_the_graph_says_which_nodes_came_from_the_cache(comm_log: list[Any]) -> None:
    flow = nf.Flow("cached_view", cache=True)

    @flow.node
    def source(n: int) -> int:
        return n

    @flow.node(cache=False)
    def sink(source: int) -> int:
        return source + 1

    flow.run(n=1, show=False)
    view = RunView(flow.run(n=1, show=False))
    texts = {
        m.group(1): m.group(2)
        for m in re.finditer(r'<g id="node-(\w+)"[\s\S]*?>(succeeded[^<]*)</text>', view.graph_html())
    }
    assert texts == {"source": "succeeded (cached)", "sink": "succeeded"}


async def test_a_final_run_is_held_weakly_and_deleting_it_frees_its_outputs(comm_log: list[Any]) -> None:
    import gc
    import weakref

    flow = nf.Flow("big")

    @flow.node
    def blob() -> bytearray:
        return bytearray(10_000_000)

    run = flow.run(show=False)
    view = RunView(run)
    view.select("blob")
    assert "bytearray" in view.inspector
    gone = weakref.ref(run)
    flow.run(show=False)  # flow.last_run now points to this one
    del run
    gc.collect()
    assert gone() is None  # the view did not keep the run (nor its 10 MB output) alive
    assert view.run is None
    frontend_sends(view, kind="select", node="blob")  # a click still works: it says why nothing is shown
    assert "no longer in the kernel" in view.inspector
    assert states(view.graph_html())["blob"][0] == "succeeded"  # the picture keeps the final state
    assert "SUCCEEDED" in view.snapshot_html()


async def test_branches_not_taken_are_not_problems_and_cancelled_runs_are_not_done(comm_log: list[Any]) -> None:
    flow = nf.Flow("routes")

    @flow.router(branches=["a", "b"])
    def route(x: int) -> str:
        return "a"

    @flow.node(branch="route.a")
    def on_a(x: int) -> int:
        return x

    @flow.node(branch="route.b")
    def on_b(x: int) -> int:
        return x

    view = RunView(flow.run(x=1, show=False))
    assert "on_b" not in view.problems and view.problems == ""
    assert view.nodes["on_b"][0] == "skipped"
    assert "3/3 done" in view.header

    slow = nf.Flow("slow_cancel")

    @slow.node
    async def first() -> int:
        return 1

    @slow.node
    async def wait(first: int) -> int:
        await anyio.sleep(60)
        return first

    @slow.node
    async def after(wait: int) -> int:
        return wait

    handle = slow.start(show=False)
    cview = RunView(handle, interval=0)
    for _ in range(500):
        await anyio.sleep(0.001)
        if handle.run.nodes["wait"].status is nf.NodeStatus.RUNNING:
            break
    frontend_sends(cview, kind="cancel")
    await handle
    assert "CANCELLED" in cview.header and "done" not in cview.header  # not "3/3 done"
    assert "cancelled" in cview.problems


def test_tracebacks_name_cells_like_ipython_and_dim_library_frames() -> None:
    from nbflow.widgets.tracebacks import traceback_html

    text = (
        "Traceback (most recent call last):\n"
        '  File "/tmp/ipykernel_1/123.py", line 12, in report\n'
        "    raise ValueError(x)\n"
        '  File "/usr/lib/python3/site-packages/pandas/core/frame.py", line 3, in f\n'
        "    pass\n"
        "ValueError: boom\n"
        "second line"
    )
    out = traceback_html(text, {"/tmp/ipykernel_1/123.py": 5})
    assert "Cell In[5], line 12" in out and "/tmp/ipykernel_1/123.py" not in out
    assert 'nbflow-tb-frame nbflow-tb-lib">  File' in out  # the library frame is dimmed
    assert "ValueError: boom\nsecond line" in out  # line breaks kept


def test_library_frames_are_named_from_their_package_not_the_machine() -> None:
    import asyncio
    import sysconfig

    from nbflow.widgets.tracebacks import traceback_html

    engine = Path(nf.__file__).parent / "_engine" / "policy.py"
    stdlib = Path(asyncio.__file__).parent / "tasks.py"
    text = (
        "Traceback (most recent call last):\n"
        f'  File "{engine}", line 138, in _attempt\n'
        f'  File "{stdlib}", line 649, in sleep\n'
        '  File "/home/me/project/helpers.py", line 3, in f\n'
        "TimeoutError"
    )
    out = traceback_html(text, {})
    assert '"nbflow/_engine/policy.py"' in out and '"asyncio/tasks.py"' in out
    assert str(engine.parent.parent.parent) not in out and sysconfig.get_paths()["stdlib"] not in out
    assert '"/home/me/project/helpers.py"' in out  # the user's own files keep their path


async def test_the_timeline_lists_attempts_and_waits(comm_log: list[Any]) -> None:
    flow = nf.Flow("flaky")
    calls = []

    @flow.node(retry=nf.Retry(attempts=3, backoff=0.01))
    def shaky() -> int:
        calls.append(1)
        if len(calls) < 2:
            raise ConnectionError("try again")
        return 1

    view = RunView(flow.run(show=False))
    frontend_sends(view, kind="timeline")  # the Timeline tab was opened
    (row,) = view.timeline["rows"]
    kinds = [bar[2] for bar in row["bars"]]
    assert kinds == ["failed", "wait", "ran"] and row["node"] == "shaky"
    assert view.nodes["shaky"][1] == "succeeded ×2"  # a real retry is still shown as one


async def test_re_running_a_cell_closes_the_views_of_its_previous_execution(
    kernel: FakeKernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    import IPython

    parent = {"metadata": {"cellId": "cell-1"}, "header": {"msg_id": "exec-1"}}
    shell = types.SimpleNamespace(kernel=types.SimpleNamespace(get_parent=lambda: parent), execution_count=1)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    flow = failing_flow()
    flow.run(n=1)
    flow.run(n=2)  # the same execution: both views stay
    first, second = kernel.shown
    assert first.comm is not None and second.comm is not None
    parent["header"] = {"msg_id": "exec-2"}  # the cell is run again: its old outputs are gone
    flow.run(n=3)
    assert first.comm is None and second.comm is None  # closed: comms and state freed
    assert kernel.shown[2].comm is not None
    parent["metadata"] = {"cellId": "cell-2"}
    parent["header"] = {"msg_id": "exec-3"}
    flow.run(n=4)  # another cell does not close this one's view
    assert kernel.shown[2].comm is not None


async def test_question_options_quoting_a_secret_are_masked_and_a_click_on_one_answers_with_the_real_option(
    comm_log: list[Any],
) -> None:
    flow = nf.Flow("secret_options")

    @flow.node
    async def pick(hf_token: str) -> str:
        return await nf.ask(f"use {hf_token}?", options=["yes", f"no, not {hf_token}"])

    run = await flow.arun(hf_token="hf_option_secret_01", show=False)
    view = RunView(run)
    (card,) = view.questions
    assert card["options"] == ["yes", "no, not ••••••"] and "hf_option_secret_01" not in card["prompt"]
    frontend_sends(view, kind="answer", key=card["key"], value="no, not ••••••", comment="", how="the button")
    assert "hf_option_secret_01" not in view.answer_status[card["key"]]
    await view._answer_task
    assert run.status is nf.RunStatus.SUCCEEDED and run["pick"] == "no, not hf_option_secret_01"
    assert "hf_option_secret_01" not in repr(comm_log)
