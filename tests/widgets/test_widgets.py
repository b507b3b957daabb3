"""The run view without a browser: a recording comm stands in for the front end."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from typing import Any

import anyio
import pytest

import nbflow as nf
from nbflow._show.draw import STATE_COLORS
from nbflow.widgets import RunView
from tests.helpers import widget_comm
from tests.helpers.widget_comm import frontend_sets, updates

pytestmark = pytest.mark.anyio

_NODE = re.compile(r'<g id="node-([\w.]+)" class="node nbflow-node nbflow-(\w+)[^"]*">[\s\S]*?<path fill="([^"]+)"')


def states(html: str) -> dict[str, tuple[str, str]]:
    """node -> (state class, fill colour) as drawn in the SVG."""
    return {m.group(1): (m.group(2), m.group(3)) for m in _NODE.finditer(html)}


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
    assert states(view.graph.value)["a"] == ("running", STATE_COLORS[nf.NodeStatus.RUNNING][0])
    assert states(view.graph.value)["b"][0] == "pending"
    gate.set()
    run = await handle
    assert run.status is nf.RunStatus.FAILED
    drawn = states(view.graph.value)
    assert drawn["a"] == ("succeeded", STATE_COLORS[nf.NodeStatus.SUCCEEDED][0])
    assert drawn["b"] == ("failed", STATE_COLORS[nf.NodeStatus.FAILED][0])
    assert drawn["c"] == ("skipped", STATE_COLORS[nf.NodeStatus.SKIPPED][0])
    # the same picture was sent to the front end
    sent = [u["value"] for u in updates(comm_log, view.graph.comm.comm_id) if "value" in u]
    assert states(sent[-1]) == drawn
    assert any(states(v).get("a", ("",))[0] == "running" for v in sent)
    assert "FAILED" in view.header.value and "1 failed" in view.header.value
    assert "ValueError: bad" in view.problems.value
    assert "upstream &#x27;b&#x27; failed" in view.problems.value  # skipped nodes say why


async def test_inspector_shows_outputs_richly_and_the_traceback(comm_log: list[Any]) -> None:
    run = failing_flow().run(n=4, show=False)
    view = RunView(run)
    assert view.selected == "report"  # the first failure is shown without asking
    text = view.inspector.value
    assert "Traceback (most recent call last)" in text
    assert "in report" in text and "ValueError: cannot report 4 rows" in text
    assert "attempts" in text and "stats" in text  # inputs listed
    view.select("table")
    assert "<table" in view.inspector.value and "square" in view.inspector.value
    assert "DataFrame 4×2" in view.inspector.value
    view.select("stats")
    assert "&quot;total&quot;: 14" in view.inspector.value  # pretty JSON
    view.select("publish")
    assert "skipped" in view.inspector.value and "upstream" in view.inspector.value
    assert view.selector.value == "publish"
    assert [label for label, _ in view.selector.options] == [
        "✓ table — succeeded",
        "✓ stats — succeeded",
        "✗ report — failed",
        "– publish — skipped",
    ]


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
    assert "&quot;score&quot;: 0.5" in view.inspector.value
    view.select("long_text")
    assert 'class="nbflow-scroll"' in view.inspector.value and "str, 25,000 chars" in view.inspector.value
    view.select("figure")
    assert '<img src="data:image/png;base64,' in view.inspector.value


async def test_clicking_a_node_in_the_graph_selects_it(comm_log: list[Any]) -> None:
    view = RunView(failing_flow().run(n=2, show=False))
    assert "nbflow-pick" in view._pick._dom_classes and "onclick=" in view.graph.value
    frontend_sets(view._pick, value="stats|1700000000")  # what the SVG's click handler writes
    assert view.selected == "stats" and view.selector.value == "stats"
    assert "&quot;rows&quot;: 2" in view.inspector.value
    assert "nbflow-selected" in re.search(r'<g id="node-stats" class="([^"]*)"', view.graph.value).group(1)
    frontend_sets(view.selector, index=0)  # picking in the dropdown
    assert view.selected == "table"
    frontend_sets(view._pick, value="no_such_node|1")  # ignored
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
    assert "50 succeeded" in view.header.value


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
    assert view.cancel_button.layout.display != "none"
    for _ in range(500):
        await anyio.sleep(0.001)
        if handle.run.nodes["slow"].status is nf.NodeStatus.RUNNING:
            break
    view.cancel_button.click()
    assert view.cancel_button.disabled and view.cancel_button.description == "Cancelling…"
    run = await handle
    assert run.status is nf.RunStatus.CANCELLED
    assert run["fast"] == 1  # finished outputs kept
    assert view.cancel_button.layout.display == "none"
    assert states(view.graph.value)["slow"][0] == "cancelled"
    assert "CANCELLED" in view.header.value
    # a finished run or a foreground run has no Cancel button
    assert RunView(run).cancel_button.layout.display == "none"


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
    inspected = view.inspector.value
    assert "••••••" in inspected and "77" in inspected  # max_tokens is not a secret
    view.select("fail")
    everything = json.dumps(comm_log)
    for secret in ("sk-live-1234", "tok-9999", "hunter22"):
        assert secret not in everything
    assert "login failed with ••••••" in view.inspector.value


def test_without_dot_the_graph_is_a_table(monkeypatch: pytest.MonkeyPatch, comm_log: list[Any]) -> None:
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: None if cmd == "dot" else real_which(cmd, *a, **k))
    view = RunView(failing_flow().run(n=3, show=False))
    assert "<svg" not in view.graph.value and "<table" in view.graph.value
    rows = dict(
        re.findall(
            r'<tr class="nbflow-node" id="node-(\w+)"[^>]*><td><span class="nbflow-chip nbflow-chip-(\w+)',
            view.graph.value,
        )
    )
    assert rows == {"table": "succeeded", "stats": "succeeded", "report": "failed", "publish": "skipped"}
    assert "cannot report 3 rows" in view.graph.value
    frontend_sets(view._pick, value="stats|1")  # rows are clickable too
    assert view.selected == "stats"


def test_big_graphs_are_tables_with_the_problems_first(comm_log: list[Any]) -> None:
    flow = nf.Flow("wide")
    for i in range(200):
        flow.add(lambda: 1, name=f"n{i}", thread=False)

    @flow.node(thread=False)
    def broken() -> int:
        raise KeyError("x")

    view = RunView(flow.run(show=False))
    assert "<svg" not in view.graph.value
    first = re.search(r'id="node-(\w+)"', view.graph.value).group(1)
    assert first == "broken"
    assert "more nodes" in view.graph.value and len(view.selector.options) == 201


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

        import nbflow._notebook

        self.shown: list[Any] = []
        self.count = 1
        monkeypatch.setattr(nbflow._notebook, "in_kernel", lambda: True)
        monkeypatch.setattr(nbflow._notebook, "_execution_count", lambda: self.count)
        monkeypatch.setattr(IPython.display, "display", lambda obj: self.shown.append(obj))


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch, comm_log: list[Any]) -> FakeKernel:
    return FakeKernel(monkeypatch)


async def test_runs_show_the_live_view_in_a_kernel(kernel: FakeKernel) -> None:
    flow = failing_flow()
    run = flow.run(n=2)  # a loop is running: this is the worker-thread path of a notebook cell
    (view,) = kernel.shown
    assert isinstance(view, RunView) and view.run is run
    assert states(view.graph.value)["report"][0] == "failed"  # the final redraw came from the worker thread
    assert run._repr_mimebundle_() == {"text/plain": repr(run)}  # not drawn twice in the same cell
    kernel.count += 1
    bundle = run._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == "<nbflow run view: flow 'inspect', 4 nodes>"
    await flow.arun(n=2)
    handle = flow.start(n=2)
    await handle
    assert len(kernel.shown) == 3 and kernel.shown[2].handle is handle
    assert "application/vnd.jupyter.widget-view+json" in (await_bundle := handle._repr_mimebundle_()) or await_bundle


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
    assert "99,800 more items not shown" in view.inspector.value and "list, 100,000 items" in view.inspector.value
    view.select("broken")
    assert "cannot show node broken: RuntimeError: no repr" in view.inspector.value
    assert "FAILED" not in view.header.value


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
    drawn = states(view.graph.value)
    assert drawn["summ.clean"][0] == "succeeded" and drawn["summ.summary"][0] == "failed"
    assert drawn["summ"][0] == "failed"
    assert "summ.summary" in [value for _, value in view.selector.options]
    frontend_sets(view._pick, value="summ.clean|1")
    assert view.selected == "summ.clean" and "hello" in view.inspector.value
    view.select("summ.summary")
    assert "too short" in view.inspector.value and "Traceback" in view.inspector.value


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
    text = view.inspector.value
    assert "<b>items</b> (4, 1 failed)" in text
    assert "ValueError: exploded item" in text and "traceback of item 2" in text
    view.select("refine")
    assert "<b>iterations</b> (3, 0 failed)" in view.inspector.value


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
    assert states(view.graph.value)["slow"][0] == "running"  # no waiting for the next event
    assert [cb.__name__ for _, cb in t.scheduled] == ["_tick"]
    t.scheduled.pop()[1]()  # a second later: the header is refreshed and the next tick scheduled
    assert [cb.__name__ for _, cb in t.scheduled] == ["_tick"]
    gate.set()
    await handle
    due, t.scheduled = t.scheduled, []
    for _, cb in due:
        cb()
    assert t.scheduled == []  # the run is over: the ticking stops
    assert "SUCCEEDED" in view.header.value


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
    assert "PAUSED" in view.header.value
    (box,) = view.questions.children
    assert "Publish this draft?" in box.children[0].value and "Why bees matter" in box.children[0].value
    approve, reject = box.children[1].children
    assert (approve.description, reject.description) == ("approve", "reject")
    approve.click()
    assert approve.disabled and reject.disabled
    await view._answer_task
    assert run.status is nf.RunStatus.SUCCEEDED and run["publish"] == "approve: Why bees matter"
    assert "SUCCEEDED" in view.header.value and view.questions.children == ()
    assert states(view.graph.value)["publish"][0] == "succeeded"


async def test_a_free_text_question_reports_a_bad_answer_and_allows_another(comm_log: list[Any]) -> None:
    flow = nf.Flow("form")

    @flow.node
    async def amount() -> int:
        return await nf.ask("How many?", schema=int)

    run = await flow.arun(show=False)
    view = RunView(run)
    (box,) = view.questions.children
    text, send = box.children[1].children
    text.value = "many"
    send.click()
    with pytest.raises(nf.AnswerError):
        await view._answer_task
    assert "AnswerError" in box.children[2].value and not send.disabled
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
        for m in re.finditer(r'<g id="node-(\w+)"[\s\S]*?>(succeeded[^<]*)</text>', view.graph.value)
    }
    assert texts == {"source": "succeeded (cached)", "sink": "succeeded"}
