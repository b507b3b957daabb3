"""A resource's dotted line goes to the node that uses it, not to a node of its own."""

from __future__ import annotations

import re

import pytest

import nbflow as nf
from nbflow._show.draw import has_dot


@pytest.mark.skipif(not has_dot(), reason="needs Graphviz's dot")
def test_a_resource_line_ends_at_its_node_and_draws_no_extra_node() -> None:
    flow = nf.Flow("res_edges")

    @flow.resource
    def llm() -> object:
        return object()

    @flow.node
    def other(topic: str, llm: object) -> str:
        return topic

    svg = flow._repr_mimebundle_()["image/svg+xml"]
    titles = re.findall(r"<title>([^<]*)</title>", svg)
    assert "node-other" not in titles  # no phantom node named after the SVG id
    assert "resource__llm&#45;&gt;other" in titles or "resource__llm->other" in titles
