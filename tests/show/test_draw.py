"""The graph view: SVG structure (not bytes), colours by state, text fallback without Graphviz."""

import html
import re
import warnings

import pytest

import nbflow as nf
import nbflow._show.draw as view


def _flow():
    flow = nf.Flow("viz")

    @flow.node
    def retrieve(question: str) -> list[str]:
        """Find documents."""
        return [question]

    @flow.node(inputs={"docs": "retrieve"})
    def answer(question: str, docs: list[str]) -> str:
        raise RuntimeError("llm down")

    @flow.node
    def post(answer: str) -> str:
        return answer

    return flow


def _fill_of(svg: str, node: str) -> str:
    svg = html.unescape(svg)  # Graphviz writes '-' in ids as '&#45;'
    group = re.search(rf'<g id="node-{node}" class="node nbflow-node[^"]*">(.*?)</g>', svg, re.S)
    assert group, f"node {node} not in svg"
    return re.search(r'fill="(#[0-9a-f]{6})"', group.group(1)).group(1)


def test_flow_renders_as_svg_with_inputs_apart_and_labelled_edges():
    flow = _flow()
    bundle = flow._repr_mimebundle_()
    svg = html.unescape(bundle["image/svg+xml"])
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg
    for node in ("retrieve", "answer", "post"):
        assert f'id="node-{node}"' in svg
    assert 'id="input-question"' in svg and "cluster_inputs" in svg
    assert ">docs<" in svg  # the renamed parameter labels its edge
    assert "flow 'viz'" in bundle["text/plain"]
    dot = flow.to_dot()
    assert "retrieve -> answer" in dot.source


def test_run_is_coloured_by_state():
    flow = _flow()
    run = flow.run(question="q")
    svg = html.unescape(run._repr_mimebundle_()["image/svg+xml"])
    assert _fill_of(svg, "retrieve") == view.STATE_COLORS[nf.NodeStatus.SUCCEEDED][0]
    assert _fill_of(svg, "answer") == view.STATE_COLORS[nf.NodeStatus.FAILED][0]
    assert _fill_of(svg, "post") == view.STATE_COLORS[nf.NodeStatus.SKIPPED][0]
    assert "nbflow-failed" in svg
    assert "RuntimeError: llm down" in svg  # the tooltip


def test_without_dot_a_warning_says_how_to_install_and_text_is_shown(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr(view, "_warned", False)
    flow = _flow()
    with pytest.warns(nf.NbflowWarning, match="apt-get install graphviz"):
        bundle = flow._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    assert "answer <- <question>, retrieve" in bundle["text/plain"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        run_bundle = flow.run(question="q")._repr_mimebundle_()
    assert "'answer' FAILED" in run_bundle["text/plain"]


def test_a_flow_with_a_cycle_still_displays_the_problem():
    flow = nf.Flow("loop")
    flow.add(lambda b: b, name="a")
    flow.add(lambda a: a, name="b")
    bundle = flow._repr_mimebundle_()
    assert "cannot draw: the flow has a cycle" in bundle["text/plain"]
