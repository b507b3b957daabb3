"""A router's edges to its branches: taken ones solid and violet, not-taken ones thin, grey and dashed, in the
static picture (``nf.show``'s SVG), the run view's laid-out picture and its saved snapshot (with a legend)."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest

import nbflow as nf
from nbflow._show.draw import has_dot, to_dot
from nbflow.widgets import RunView
from tests.helpers import widget_comm

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(not has_dot(), reason="needs Graphviz's dot")]

EDGE = re.compile(r'<g id="branch__(\w+)" class="edge nbflow(?:&#45;|-)branch([^"]*)">([\s\S]*?)</g>')


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def routing() -> nf.Flow:
    flow = nf.Flow("routing")

    @flow.router(branches=["billing", "tech"])
    def route(category: str) -> str:
        return category

    @flow.node(branch="route.billing")
    def billing(category: str) -> str:
        return "b"

    @flow.node(branch="route.tech")
    def tech(category: str) -> str:
        return "t"

    return flow


def edges(svg: str) -> dict[str, tuple[str, str]]:
    return {name: (cls.replace("&#45;", "-"), body) for name, cls, body in EDGE.findall(svg)}


def test_the_static_picture_draws_the_branch_not_taken_dashed_and_grey() -> None:
    flow = routing()
    run = flow.run(category="tech", show=False)
    found = edges(to_dot(flow.graph, run).pipe(format="svg", encoding="utf-8"))
    assert found["tech"][0] == " nbflow-taken" and 'stroke="#7048e8" stroke-width="2"' in found["tech"][1]
    assert "stroke-dasharray" not in found["tech"][1]
    assert found["billing"][0] == " nbflow-not-taken" and 'stroke="#adb5bd" stroke-dasharray' in found["billing"][1]
    before = edges(to_dot(flow.graph).pipe(format="svg", encoding="utf-8"))  # no run: nothing decided
    assert {cls for cls, _ in before.values()} == {""}


async def test_the_snapshot_marks_each_branch_and_says_so_in_a_legend(comm_log: list[Any]) -> None:
    flow = routing()
    run = await flow.arun(category="billing", show=False)
    html = RunView(run).snapshot_html()
    data = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert data is not None
    found = edges(base64.b64decode(data.group(1)).decode())
    assert found["billing"][0] == " nbflow-taken" and "stroke-dasharray" not in found["billing"][1]
    assert found["tech"][0] == " nbflow-not-taken" and 'stroke="#adb5bd" stroke-dasharray' in found["tech"][1]
    assert "branch taken" in html and "branch not taken" in html
    assert "overflow:auto" not in html.split("nbflow-snap-graph")[0][-200:]  # the picture is in no scroll box
    plain = nf.Flow("plain")

    @plain.node
    def echo(x: int) -> int:
        return x

    assert "branch not taken" not in RunView(await plain.arun(x=1, show=False)).snapshot_html()
