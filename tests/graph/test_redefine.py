"""A cell that redefines nodes of a compiled flow: the graph is made again from the last one, and it is the
graph a full compile makes (order, edges, checks, inputs, policies), or a full compile when it cannot be."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbflow as nf

HINTS = ["int", "str", "float", "list[int]", None]


def make_node(name: str, params: list[tuple[str, str | None, bool]], ret: str | None, body: str = "1") -> Any:
    """A plain function ``name`` with those parameters (name, hint, has a default) and return hint."""
    args = []
    for pname, hint, default in params:
        args.append(f"{pname}{': ' + hint if hint else ''}{' = None' if default else ''}")
    args.sort(key=lambda a: "=" in a)  # parameters with defaults last
    src = f"def {name}({', '.join(args)}){' -> ' + ret if ret else ''}:\n    return {body}\n"
    ns: dict[str, Any] = {}
    exec(compile(src, "<cell>", "exec", dont_inherit=True), ns)
    return ns[name]


def shape(flow: nf.Flow) -> dict[str, Any]:
    """Everything a compiled graph says, in comparable form (the checks by parameter and hint)."""
    graph = flow.graph
    policies = flow._resolved_policies()
    return {
        "order": list(graph.nodes),
        "nodes": {
            n: (
                g.spec,
                g.deps,
                g.upstream,
                g.downstream,
                [(p, c.hint) for p, c in g.checks],
                None if g.check_return is None else g.check_return.hint,
                g.simple,
                g.branches,
                g.plain,
                g.call_mode is None,
            )
            for n, g in graph.nodes.items()
        },
        "inputs": dict(graph.inputs),
        "policies": (dict(policies.nodes), dict(policies.handler_of), dict(policies.handles)),
    }


def fresh(flow: nf.Flow) -> nf.Flow:
    """The same nodes declared once each, in the flow's definition order: compiled in full."""
    again = nf.Flow(flow.name, validate=flow.validate)
    for name, spec in flow.nodes.items():
        again._specs[name] = spec
    again._changed()
    return again


@st.composite
def edits(draw):
    n = draw(st.integers(2, 14))
    nodes = []
    for i in range(n):
        ups = sorted(draw(st.sets(st.integers(0, i - 1), max_size=min(i, 3)))) if i else []
        inputs = draw(st.lists(st.sampled_from(["x", "y"]), max_size=2, unique=True))
        nodes.append(
            {
                "ups": ups,
                "inputs": inputs,
                "defaults": draw(st.booleans()),
                "hints": [draw(st.sampled_from(HINTS)) for _ in range(len(ups) + len(inputs))],
                "ret": draw(st.sampled_from(HINTS)),
                "retry": draw(st.sampled_from([None, None, 3])),
            }
        )
    order = draw(st.permutations(range(n)))
    redefs = draw(
        st.lists(
            st.tuples(
                st.integers(0, n - 1),
                st.sampled_from(HINTS),  # a new return hint
                st.sampled_from(["same", "same", "rewire", "retry"]),
            ),
            min_size=1,
            max_size=4,
        )
    )
    return nodes, order, redefs, draw(st.booleans())


def declare(flow: nf.Flow, i: int, nd: dict[str, Any], ret: str | None, rewire: bool = False, retry: Any = None):
    params = [(f"n{u}", h, False) for u, h in zip(nd["ups"], nd["hints"], strict=False)]
    params += [(x, h, nd["defaults"]) for x, h in zip(nd["inputs"], nd["hints"][len(nd["ups"]) :], strict=False)]
    if rewire:
        params.append(("z", "int", False))  # a new input: the wiring changed
    flow.add(make_node(f"n{i}", params, ret), retry=retry)


@settings(max_examples=120, deadline=None)
@given(edits())
def test_a_redefinition_compiles_to_what_a_full_compile_makes(case):
    nodes, order, redefs, validate = case
    flow = nf.Flow("f", validate=validate)
    for i in order:
        declare(flow, i, nodes[i], nodes[i]["ret"], retry=nodes[i]["retry"])
    flow.graph  # noqa: B018
    for i, ret, how in redefs:
        declare(flow, i, nodes[i], ret, rewire=how == "rewire", retry=3 if how == "retry" else nodes[i]["retry"])
        assert shape(flow) == shape(fresh(flow))


def chain(n: int) -> nf.Flow:
    flow = nf.Flow("chain")
    flow.add(make_node("n0", [("x", "int", False)], "int", "x"))
    for i in range(1, n):
        flow.add(make_node(f"n{i}", [(f"n{i - 1}", "int", False)], "int", f"n{i - 1} + 1"))
    return flow


def test_redefining_a_node_makes_only_it_and_its_neighbours_again():
    flow = chain(50)
    before = flow.graph
    flow.add(make_node("n20", [("n19", "int", False)], "int", "n19 + 100"))  # the cell re-run, body changed
    after = flow.graph
    assert after is not before
    kept = [n for n in after.nodes if after.nodes[n] is before.nodes[n]]
    assert sorted(set(after.nodes) - set(kept)) == ["n19", "n20"]  # n19: its edge to n20 made again
    assert after.nodes["n20"].spec is flow.nodes["n20"]
    assert flow.run(x=0, show=False)["n49"] == 49 + 99
    # a new return hint: the node downstream is checked again (it was skipped as validated on the way out)
    flow.add(make_node("n20", [("n19", "int", False)], "str", "'n' + str(n19)"))
    assert [p for p, _ in flow.graph.nodes["n21"].checks] == ["n20"]
    run = flow.run(x=0, show=False)
    error = run.nodes["n21"].error
    assert isinstance(error, nf.TypeValidationError) and (error.node, error.parameter) == ("n21", "n20")


def test_a_redefinition_that_rewires_is_checked_as_before():
    flow = chain(5)
    flow.graph  # noqa: B018
    flow.add(make_node("n2", [("n4", "int", False)], "int"))  # now n2 <- n4 <- n3 <- n2: a cycle
    with pytest.raises(nf.CycleError) as info:
        flow.graph  # noqa: B018
    assert set(info.value.cycle) == {"n2", "n3", "n4"}
    flow.add(make_node("n2", [("n1", "int", False), ("nope", "int", False)], "int", "n1 + 1"))
    with pytest.raises(nf.MissingInputError, match="nope"):
        flow.run(x=0, show=False)
    assert flow.run(x=0, nope=1, show=False)["n4"] == 4


def test_a_hint_name_rebound_between_compiles_is_resolved_again():
    ns: dict[str, Any] = {}
    cell = """
from __future__ import annotations
import nbflow as nf
class Doc:
    pass
flow = nf.Flow("docs")
@flow.node
def a(doc: Doc) -> int:
    return 1
@flow.node
def b(a: int) -> int:
    return a
"""
    exec(compile(cell, "<cell>", "exec", dont_inherit=True), ns)
    flow, old_doc = ns["flow"], ns["Doc"]()
    assert flow.run(doc=old_doc, show=False)["b"] == 1
    exec(compile("class Doc:\n    pass", "<cell>", "exec", dont_inherit=True), ns)  # the class's cell re-run
    exec(
        compile("@flow.node\ndef b(a: int) -> int:\n    return a + 1", "<cell>", "exec", dont_inherit=True), ns
    )  # and b's: a's "Doc" now names the new class, though a was not declared again
    with pytest.raises(nf.TypeValidationError) as info:  # an input: checked before anything runs
        flow.run(doc=old_doc, show=False)
    assert (info.value.node, info.value.parameter) == ("a", "doc")
    assert flow.run(doc=ns["Doc"](), show=False)["b"] == 2
