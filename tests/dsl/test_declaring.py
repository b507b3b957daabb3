"""Declaring nodes: wiring by parameter name, redefinition, removal, definition errors."""

import asyncio

import pytest

import nbflow as nf


def test_decorator_returns_the_function_unchanged_and_callable():
    flow = nf.Flow("f")

    def double(x: int) -> int:
        return 2 * x

    assert flow.node(double) is double
    assert double(4) == 8

    @flow.node(name="half")
    async def halve(double: int) -> float:
        return double / 2

    assert asyncio.run(halve(6)) == 3.0
    assert list(flow.nodes) == ["double", "half"]


def test_parameter_named_after_a_node_is_an_edge_others_are_inputs():
    flow = nf.Flow("f")

    @flow.node
    def answer(question: str, retrieve: list[str]) -> str:
        return f"{question}:{len(retrieve)}"

    @flow.node  # defined after its consumer: order of definition does not matter
    def retrieve(question: str, k: int = 3) -> list[str]:
        return [question] * k

    g = flow.graph
    assert g.nodes["answer"].upstream == ("retrieve",)
    assert set(flow.inputs) == {"question", "k"}
    assert flow.inputs["question"].required_by == ("answer", "retrieve")
    assert flow.inputs["k"].required_by == ()
    assert list(g.nodes) == ["retrieve", "answer"]  # topological
    assert flow.run(question="q", k=2)["answer"] == "q:2"
    assert flow.run(question="q")["answer"] == "q:3"  # the default applies


def test_explicit_inputs_mapping_overrides_the_wiring():
    flow = nf.Flow("f")

    @flow.node
    def a() -> int:
        return 1

    @flow.node
    def b() -> int:
        return 10

    @flow.node(inputs={"x": "a", "y": "b", "z": "zed"})
    def total(x: int, y: int, z: int) -> int:
        return x + y + z

    assert set(flow.inputs) == {"zed"}
    assert flow.run(zed=100)["total"] == 111


def test_redefining_a_node_replaces_it():
    flow = nf.Flow("f")

    @flow.node
    def greet(name: str) -> str:
        return "hello " + name

    @flow.node  # the same cell, re-run after an edit
    def greet(name: str) -> str:  # noqa: F811
        return "hi " + name

    assert len(flow) == 1
    assert flow.run(name="ada")["greet"] == "hi ada"


def test_remove_and_unknown_remove():
    flow = nf.Flow("f")

    @flow.node
    def a() -> int:
        return 1

    flow.remove("a")
    assert "a" not in flow
    with pytest.raises(nf.UnknownNodeError, match="'a' is not a node"):
        flow.remove("a")


def test_star_args_are_refused_with_the_fix():
    flow = nf.Flow("f")
    with pytest.raises(nf.FlowDefinitionError, match=r"node 'bad': parameter '\*args' is not supported"):

        @flow.node
        def bad(*args):
            return args

    with pytest.raises(nf.FlowDefinitionError, match=r"'\*\*kw'"):

        @flow.node
        def bad2(**kw):
            return kw


def test_positional_only_is_refused():
    flow = nf.Flow("f")
    with pytest.raises(nf.FlowDefinitionError, match="positional-only"):

        @flow.node
        def bad(x, /):
            return x


def test_bad_names_and_inputs_mapping_errors():
    flow = nf.Flow("f")
    with pytest.raises(nf.FlowDefinitionError, match="not a valid Python identifier"):
        flow.add(lambda: 1, name="my node")
    with pytest.raises(nf.FlowDefinitionError, match="a lambda has no usable name; pass name="):
        flow.add(lambda: 1)
    with pytest.raises(nf.FlowDefinitionError, match=r"inputs= names 'y'.*parameters are 'x'"):
        flow.add(lambda x: x, name="f1", inputs={"y": "z"})
    with pytest.raises(nf.FlowDefinitionError, match="needs a function"):
        flow.add(42)  # type: ignore[arg-type]
    with pytest.raises(nf.FlowDefinitionError, match="thread=True is for sync"):

        @flow.node(thread=True)
        async def f2() -> None:
            pass

    with pytest.raises(nf.FlowDefinitionError, match="non-empty name"):
        nf.Flow("")
    with pytest.raises(ValueError, match="concurrency must be a positive int"):
        nf.Flow("x", concurrency=0)


def test_flow_repr_lists_nodes():
    flow = nf.Flow("demo")
    flow.add(lambda: 1, name="one")
    assert repr(flow) == "<Flow 'demo': one>"
