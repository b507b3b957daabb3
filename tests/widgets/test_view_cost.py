"""What makes the live view cheap (issue 14), pinned by behaviour: the view shows the same, secrets stay out.

- Opening a view sends one message: its header, CSS class and the selector's node paths (one a line) go
  with the widget's opening message. Each view keeps a ``Layout`` of its own: sizing one never sizes another.
- The last redraw of a big run reads every node's state from the run's columns: records are made only for
  what is shown (the table's rows, the selected node), and the table is the one the records give.
- Secrets fed between nodes are collected from the columns, with a check over the whole column first;
  every kind of value that can carry one makes it look node by node, as before.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbflow as nf
from nbflow._record.run import NodeColumns
from nbflow.widgets import RunView
from nbflow.widgets.graph_pane import table_html
from nbflow.widgets.run_view import SNAPSHOT_ROWS, _holds_no_secret
from tests.helpers import widget_comm
from tests.helpers.widget_comm import updates

pytestmark = pytest.mark.anyio


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def opened(log: list[Any], comm_id: str) -> dict[str, Any]:
    found = [d["state"] for cid, t, d in log if cid == comm_id and t == "comm_open"]
    assert len(found) == 1
    return dict(found[0])


async def test_a_view_opens_with_one_message_and_has_a_layout_of_its_own(comm_log: list[Any]) -> None:
    flow = nf.Flow("opening")
    gate = anyio.Event()

    @flow.node
    async def first() -> int:
        await gate.wait()
        return 1

    @flow.node(thread=False)
    def second(first: int) -> int:
        return first + 1

    handle = flow.start(show=False)
    view = RunView(handle)  # the run has not started yet: only its header is drawn now
    state = opened(comm_log, view.comm.comm_id)
    assert "PENDING" in state["header"] and "opening" in state["header"] and state["header"] == view.header
    assert list(state["_dom_classes"]) == ["nbflow-runview"] and view._dom_classes == ("nbflow-runview",)
    assert state["options"] == "first\nsecond" and view.options == ["first", "second"]
    assert updates(comm_log, view.comm.comm_id) == []  # nothing right after the opening message
    gate.set()
    assert (await handle).status is nf.RunStatus.SUCCEEDED
    assert "SUCCEEDED" in view.header and "2/2 done" in view.header
    # sizing one view in place leaves another alone
    other = RunView(flow.run(show=False))
    assert other.layout is not view.layout
    other.layout.width = "400px"
    assert view.layout.width is None


def wide_flow(n: int = 200, fail: bool = False, skip: bool = False) -> nf.Flow:
    """``n`` trivial nodes (a table, not a picture), a sub-flow, and optionally a failure or a branch not taken."""
    flow = nf.Flow("wide")
    for i in range(n):
        flow.add(lambda: 1, name=f"n{i}", thread=False)
    sub = nf.Flow("inner")
    sub.add(lambda text: text, name="s0", thread=False)
    sub.add(lambda s0: s0 + "!", name="s1", thread=False)
    flow.add(sub, name="sub", inputs={"text": "word"}, output="s1")
    if fail:

        @flow.node(thread=False)
        def broken(n3: int) -> int:
            raise KeyError("broken on purpose")

        @flow.node(thread=False)
        def after(broken: int) -> int:
            return broken

    if skip:

        @flow.router(branches=["left", "right"])
        def route(n5: int) -> str:
            return "left"

        flow.add(lambda n6: n6, name="routed", branch="route.right", thread=False)
    return flow


@pytest.mark.parametrize(
    "case", ["calm", "failed", "skipped", "targets"], ids=["calm", "a failure", "a skip", "nodes not in the run"]
)
async def test_the_last_redraw_reads_the_columns_and_draws_the_table_the_records_give(
    comm_log: list[Any], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    flow = wide_flow(fail=case == "failed", skip=case == "skipped")
    made: list[int] = []
    rec = NodeColumns.rec

    def counted(self: NodeColumns, i: int) -> Any:
        made.append(i)
        return rec(self, i)

    handle = flow.start(word="hi", show=False, targets=["n7", "sub"] if case == "targets" else None)
    view = RunView(handle, interval=60)  # (however loaded the machine: the last redraw is the only one)
    draw = view._throttle._draw

    def counting_draw() -> None:  # (the engine makes records of its own: count the redraw's only)
        made.clear()
        monkeypatch.setattr(NodeColumns, "rec", counted)
        try:
            draw()
        finally:
            monkeypatch.setattr(NodeColumns, "rec", rec)

    view._throttle._draw = counting_draw
    run = await handle
    assert view.redraws == 1
    # records were made only for what is shown: the table's 60 rows, the selected node (a run with a failed
    # node walks every record, as before, to list the failures in the run's order)
    assert made and (len(made) <= 70 or case == "failed"), len(made)
    # the same table, header and problems as made from every node's record
    assert view.table == table_html(view._paths, view._record, view.selected or None, view._redact)
    assert view.table.count('class="nbflow-node"') == 60
    first = view.table.split('id="node-', 2)[1].split('"', 1)[0]
    assert first == {"calm": "n0", "failed": "broken", "skipped": "routed", "targets": "n7"}[case]
    if case == "targets":  # the nodes not in the run come last
        assert view.table.index('id="node-n7"') < view.table.index('id="node-n0"')
    if case == "failed":
        assert view.selected == "broken" and "KeyError" in view.problems and "broken on purpose" in view.inspector
        assert "1 skipped" in view.header
    else:
        assert view.selected == next(reversed(run.nodes)) and view.problems == ""
        assert run.status is nf.RunStatus.SUCCEEDED and f"{len(run.nodes)}/{len(run.nodes)} done" in view.header


def test_a_column_holds_no_secret_only_when_no_value_can_carry_one() -> None:
    assert _holds_no_secret([None, {}, {"a": 1, "b": 2.5, "c": None, "d": True, "e": 1j}, {"prompt": "hello"}])
    assert _holds_no_secret([])
    for carrier in (
        {"api_key": "sk-plain-text"},  # a secret-looking name
        {"HF_TOKEN": 5},  # (whatever the value: the node-by-node look decides)
        {"x": nf.Secret("sk-marked-secret")},  # a marked secret under any name
        {"x": ["sk-in-a-list"]},  # containers are looked into
        {"x": {"token": "sk-in-a-dict"}},
        {"x": ("sk-in-a-tuple",)},
        {"x": object()},  # anything else (a pydantic SecretStr ...)
    ):
        assert not _holds_no_secret([{"a": 1}, carrier]), carrier

    class Inputs(dict):  # not a plain dict: looked at node by node
        pass

    assert not _holds_no_secret([Inputs(a=1)])


@pytest.mark.parametrize("how", ["by name", "marked", "in a list", "inside a sub-flow"])
async def test_a_secret_fed_between_nodes_of_a_big_run_never_reaches_the_browser(comm_log: list[Any], how: str) -> None:
    """A secret only a node's inputs reveal (not the flow's inputs), echoed by another node's error: the
    last redraw collects it from the columns, so the table, problems and snapshot show it masked."""
    key = "sk-fed-between-nodes-4321"
    flow = wide_flow(180)

    @flow.node(thread=False)
    def issue() -> Any:
        return {"marked": nf.Secret(key), "in a list": [nf.Secret(key)]}.get(how, key)

    def use(value: Any) -> str:
        return f"used {value[0] if isinstance(value, list) else value}"

    if how == "inside a sub-flow":  # only the sub-run's column says it: a secret-looking name in there
        inner = nf.Flow("login")
        inner.add(lambda text: text, name="grab", thread=False)
        inner.add(lambda token: f"used {token}", name="use", inputs={"token": "grab"}, thread=False)
        flow.add(inner, name="signin", inputs={"text": "issue"}, output="use")
        flow.add(lambda signin: signin, name="use", thread=False)
    elif how == "by name":
        flow.add(lambda api_key: f"used {api_key}", name="use", inputs={"api_key": "issue"}, thread=False)
    else:
        flow.add(use, name="use", inputs={"value": "issue"}, thread=False)

    @flow.node(thread=False)
    def echo(use: str) -> None:
        raise RuntimeError(f"rejected: {use}")

    handle = flow.start(word="hi", show=False)
    view = RunView(handle)
    run = await handle
    assert run.status is nf.RunStatus.FAILED and "<table" in view.table
    assert "rejected" in view.table and "rejected" in view.problems
    sent = json.dumps(comm_log, default=str)
    assert key not in sent and key not in view.snapshot_html()
    assert "rejected: used ••••••" in view.table


@given(
    st.one_of(
        st.integers(min_value=-(10**200), max_value=10**200),
        st.floats(allow_nan=True, allow_infinity=True),
        st.complex_numbers(allow_nan=True),
        st.booleans(),
        st.none(),
    )
)
@settings(max_examples=300, deadline=None)
def test_a_plain_number_is_shown_as_pprint_shows_it(value: Any) -> None:
    """The inspector shows a number, bool or None as ``pprint.pformat`` does (now its ``repr``, cheaper)."""
    import pprint

    from nbflow.widgets.render import _pre, describe, render_value
    from nbflow.widgets.style import esc

    expected = f'<div class="nbflow-muted">{esc(describe(value))}</div>' + _pre(pprint.pformat(value, width=100), str)
    assert render_value(value) == expected


async def test_the_snapshot_of_a_big_run_lists_its_first_nodes_and_problems_and_its_table_is_the_records_one(
    comm_log: list[Any],
) -> None:
    """The static snapshot (what a saved notebook shows) when displayed, before the first redraw, and at the end:
    its graph is the table the records give (the order decided from the columns), and it lists the first
    ``SNAPSHOT_ROWS`` nodes and every failed or cancelled one (``tests/widgets/test_snapshot_rows.py``)."""
    flow = wide_flow(fail=True)
    handle = flow.start(word="hi", show=False)
    view = RunView(handle, interval=60)
    assert view.table == ""  # displayed before any redraw: the snapshot draws the table itself
    records_table = table_html(view._paths, view._record, view.selected or None, view._redact)
    assert view.graph_html() == records_table
    pending = view.snapshot_html()
    assert records_table in pending
    run = await handle
    final = view.snapshot_html()
    for i, (path, rec) in enumerate(run.walk()):
        row = f'<td style="padding:1px 8px"><b>{path}</b></td>'  # (the summary's row; the table has its own)
        problem = rec.status in (nf.NodeStatus.FAILED, nf.NodeStatus.CANCELLED)
        assert final.count(row) == (i < SNAPSHOT_ROWS or problem), path
        assert pending.count(row) == (i < SNAPSHOT_ROWS), path  # (every node pending; a sub-run's once it ran)
    assert [p for p, r in run.walk() if r.status is nf.NodeStatus.FAILED] == ["broken"]
    assert view.table in final and "broken on purpose" in final and len(run.nodes) == 203
    # a run of part of the flow, displayed before it starts: its own nodes first, the others after
    some = RunView(flow.start(word="hi", show=False, targets=["n150"]), interval=60)
    assert some.table == "" and some.graph_html().split('id="node-', 2)[1].startswith('n150"')
    assert some.graph_html() == table_html(some._paths, some._record, some.selected or None, some._redact)
    await some.handle


@given(
    st.one_of(
        st.integers(min_value=-(10**400), max_value=10**400),
        st.floats(allow_nan=True, allow_infinity=True),
        st.complex_numbers(allow_nan=True),
        st.booleans(),
        st.none(),
        st.text(max_size=400),
    ),
    st.sampled_from(["x", "prompt", "api_key", "max_tokens"]),
    st.sampled_from([50, 120, 300]),
)
@settings(max_examples=400, deadline=None)
def test_a_plain_value_is_described_and_shortened_as_the_general_rules_do(value: Any, name: str, limit: int) -> None:
    """``describe`` and ``short_value`` take a shortcut for numbers, bools, None and str: the same text."""
    from nbflow.widgets.redact import Redactor
    from nbflow.widgets.render import MASK, _describe, _short_value, describe, short_value
    from nbflow.widgets.style import esc

    redact = Redactor(["secret-text-1234"])
    assert describe(value) == _describe(value)
    general = esc(MASK) if name == "api_key" else _short_value(value, redact, limit)
    assert short_value(name, value, redact, limit) == general
    assert "secret-text-1234" not in short_value(name, f"a secret-text-1234 b {value!r}", redact, limit)


@pytest.mark.parametrize("fail", [False, True], ids=["calm", "a failure"])
async def test_the_snapshot_rows_read_from_the_columns_are_the_records_rows(
    comm_log: list[Any], monkeypatch: pytest.MonkeyPatch, fail: bool
) -> None:
    """The snapshot's row per node, read from the run's columns for plain nodes, is the one the records give:
    displayed before the run starts and at its end, with outputs, times, failures and skips."""
    from nbflow._record.run import Run

    flow = nf.Flow("plain_rows")
    for i in range(40):
        flow.add(lambda: 0.5, name=f"n{i}", thread=False)

    @flow.node(thread=False)
    def text(n1: float) -> str:
        return f"<b>{n1}</b> & more"

    if fail:

        @flow.node(thread=False)
        def broken(text: str) -> int:
            raise ValueError(f"cannot use {text}")

        flow.add(lambda broken: broken, name="after", thread=False)

    def through_records(run: Run) -> Any:
        return iter(run.nodes.values())  # every node as its record: the general rows

    handle = flow.start(show=False)
    view = RunView(handle, interval=60, max_svg_nodes=10)  # a table (a picture reads every record's attempts)
    snapshots = [view.snapshot_html()]
    await handle
    snapshots.append(view.snapshot_html())
    assert "0.500" not in snapshots[1] and "&lt;b&gt;0.5&lt;/b&gt; &amp; more" in snapshots[1]
    assert ("cannot use" in snapshots[1]) is fail and ("s</td>" in snapshots[1])  # a time per node that ran
    monkeypatch.setattr(Run, "_plain_nodes", through_records)
    handle = flow.start(show=False)
    again = RunView(handle, interval=60, max_svg_nodes=10)
    again.snapshot_id = view.snapshot_id
    general = [again.snapshot_html()]
    run = await handle
    # the same run's rows both ways (times differ between runs: compare this run's)
    monkeypatch.undo()
    assert general[0].replace(again._run_id, view._run_id) == snapshots[0]
    assert sum(type(item) is tuple for item in run._plain_nodes()) >= 38  # most rows come from the columns
    fast = again.snapshot_html()
    monkeypatch.setattr(Run, "_plain_nodes", through_records)
    assert again.snapshot_html() == fast and run.status is (nf.RunStatus.FAILED if fail else nf.RunStatus.SUCCEEDED)
