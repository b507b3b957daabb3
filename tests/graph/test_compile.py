"""Everything that must fail before a single node runs."""

import itertools

import pytest

import nbflow as nf


def _flow_with_counter():
    calls = []
    flow = nf.Flow("f")

    @flow.node
    def a(x: int) -> int:
        calls.append("a")
        return x

    @flow.node
    def b(a: int) -> int:
        calls.append("b")
        return a

    return flow, calls


def test_cycle_error_carries_the_path_and_nothing_runs():
    flow = nf.Flow("f")
    ran = []

    @flow.node
    def start() -> int:
        ran.append("start")
        return 1

    @flow.node
    def a(c: int, start: int) -> int:
        return c

    @flow.node
    def b(a: int) -> int:
        return a

    @flow.node
    def c(b: int) -> int:
        return b

    with pytest.raises(nf.CycleError) as info:
        flow.run()
    cycle = info.value.cycle
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"a", "b", "c"} and len(cycle) == 4
    # consecutive pairs are real edges producer -> consumer
    for producer, consumer in itertools.pairwise(cycle):
        assert producer in {p.source for p in flow.nodes[consumer].params}
    assert " -> ".join(cycle) in str(info.value)
    assert ran == []
    assert isinstance(info.value, nf.GraphError) and isinstance(info.value, ValueError)


def test_self_loop_is_a_cycle():
    flow = nf.Flow("f")
    flow.add(lambda x: x, name="x")
    with pytest.raises(nf.CycleError) as info:
        flow.graph  # noqa: B018
    assert info.value.cycle == ("x", "x")


def test_missing_inputs_name_the_inputs_and_the_nodes_needing_them():
    flow, calls = _flow_with_counter()
    with pytest.raises(nf.MissingInputError) as info:
        flow.run()
    assert info.value.missing == {"x": ("a",)}
    assert "'x' (needed by 'a')" in str(info.value) and "Pass x=..." in str(info.value)
    assert calls == []


def test_missing_input_suggests_a_similarly_named_node():
    flow = nf.Flow("f")

    @flow.node
    def retrieve() -> list[str]:
        return []

    @flow.node
    def answer(retreive: list[str]) -> int:  # typo: becomes an input
        return len(retreive)

    with pytest.raises(nf.MissingInputError, match="a node is named 'retrieve'"):
        flow.run()


def test_unknown_inputs_are_refused_with_a_suggestion():
    flow, calls = _flow_with_counter()
    with pytest.raises(nf.UnknownInputError, match=r"'y'.*this flow takes: x") as info:
        flow.run(x=1, y=2)
    assert info.value.names == ("y",)
    with pytest.raises(nf.UnknownInputError, match=r"did you mean 'x'"):
        flow.run({"x": 1, "xx": 2})
    assert calls == []


def test_unknown_targets_and_overrides():
    flow, calls = _flow_with_counter()
    with pytest.raises(nf.UnknownNodeError, match=r"target 'bb' is not a node.*did you mean 'b'"):
        flow.run(x=1, targets=["bb"])
    with pytest.raises(nf.UnknownNodeError, match="override 'z'"):
        flow.run(x=1, overrides={"z": 1})
    assert calls == []


def test_input_type_mismatch_fails_before_running_naming_node_parameter_and_type():
    flow, calls = _flow_with_counter()
    with pytest.raises(nf.TypeValidationError) as info:
        flow.run(x="not a number")
    err = info.value
    assert (err.node, err.parameter, err.expected) == ("a", "x", "int")
    assert "node 'a', parameter 'x'" in str(err) and "expected int" in str(err)
    assert isinstance(err, TypeError)
    assert calls == []


def test_validation_coerces_like_pydantic_and_can_be_turned_off():
    flow = nf.Flow("f")

    @flow.node
    def a(x: int) -> int:
        return x * 2

    assert flow.run(x="21")["a"] == 42  # pydantic's lax mode
    loose = nf.Flow("g", validate=False)
    loose.add(a)
    assert loose.run(x="ab")["a"] == "abab"


def test_output_type_mismatch_fails_the_node_not_the_caller():
    flow = nf.Flow("f")

    @flow.node
    def a() -> int:
        return "nope"  # type: ignore[return-value]

    @flow.node
    def b(a: int) -> int:
        return a

    run = flow.run()
    assert run.status is nf.RunStatus.FAILED
    err = run.nodes["a"].error
    assert isinstance(err, nf.TypeValidationError)
    assert err.parameter == "return" and "node 'a' returned 'nope'" in str(err)
    assert run.nodes["b"].status is nf.NodeStatus.SKIPPED


def test_mismatch_between_nodes_names_the_consuming_parameter():
    flow = nf.Flow("f")

    @flow.node
    def a() -> str:
        return "abc"

    @flow.node
    def b(a: int) -> int:
        return a

    run = flow.run()
    err = run.nodes["b"].error
    assert isinstance(err, nf.TypeValidationError) and (err.node, err.parameter) == ("b", "a")


def test_type_checks_build_their_adapters_when_the_first_run_starts_not_at_compile():
    """Compiling makes the checks without building pydantic adapters; the run builds them before its first
    node starts; the checks refuse a wrong value as before (an arbitrary class by isinstance)."""
    from nbflow._graph import validate

    class Opaque:
        pass

    flow = nf.Flow("lazy_checks")

    @flow.node
    def a(x: "list[tuple[int, str]]", o: Opaque) -> dict[str, int]:
        return {"n": len(x)}

    validate._pending.clear()
    graph = flow.graph
    assert validate._pending == {list[tuple[int, str]], Opaque, dict[str, int]}
    run = flow.run(x=[(1, "a")], o=Opaque(), show=False)
    assert run.status is nf.RunStatus.SUCCEEDED and run["a"] == {"n": 1}
    assert not validate.pending()  # built when the run started
    with pytest.raises(nf.TypeValidationError) as info:
        flow.run(x=[("not an int", "a")], o=Opaque(), show=False)
    assert (info.value.node, info.value.parameter) == ("a", "x")
    with pytest.raises(nf.TypeValidationError) as info:
        flow.run(x=[], o="not an Opaque", show=False)
    assert (info.value.node, info.value.parameter) == ("a", "o")
    assert flow.graph is graph  # the same compiled graph: its checks were built in place


def test_forward_reference_hints_do_not_break_definition():
    flow = nf.Flow("f")

    @flow.node
    def a() -> "NotYetDefined":  # type: ignore[name-defined]  # noqa: F821
        return 1

    assert flow.run()["a"] == 1


@pytest.mark.parametrize("wire", ["first_of", "optional", "on_failure_of"])
def test_a_cycle_through_a_merge_optional_or_failure_handler_is_reported(wire):
    flow = nf.Flow("f")
    flow.add(lambda: 1, name="start")
    flow.add(lambda start, c: start, name="a", inputs={"c": nf.optional("c")})
    flow.add(lambda a: a, name="b")
    if wire == "first_of":
        flow.add(lambda v: v, name="c", inputs={"v": nf.first_of("start", "b")})
    elif wire == "optional":
        flow.add(lambda v: v, name="c", inputs={"v": nf.optional("b")})
    else:
        flow.add(lambda start: start, name="c", on_failure_of="b")
    with pytest.raises(nf.CycleError) as info:
        flow.graph  # noqa: B018
    cycle = info.value.cycle
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}, cycle


def test_unknown_merge_source_is_named_before_any_cycle_check():
    flow = nf.Flow("f")
    flow.add(lambda v: v, name="a", inputs={"v": nf.first_of("nope", "a")})
    with pytest.raises(nf.UnknownNodeError, match="nope"):
        flow.graph  # noqa: B018


def test_string_hints_are_resolved_per_module_and_again_at_each_compile():
    """A cell under ``from __future__ import annotations``: its string hints are checked, each node its own,
    and a class redefined between compiles is the one the next compile checks against."""
    cell = """
from __future__ import annotations
import nbflow as nf

class Doc:
    pass

flow = nf.Flow("strings")

@flow.node
def a(x: int) -> list[int]:
    return [x]

@flow.node
def b(a: list[int], doc: Doc) -> int:
    return len(a)

@flow.node
def c(b: int, later: NotYetDefined) -> str:  # noqa: F821  (unresolvable: its node's string hints are left out)
    return str(b)
"""
    ns: dict = {}
    exec(compile(cell, "<cell>", "exec", dont_inherit=True), ns)
    flow = ns["flow"]
    first_doc = ns["Doc"]()
    assert flow.run(x=1, doc=first_doc, later=None, show=False)["c"] == "1"
    with pytest.raises(nf.TypeValidationError) as info:
        flow.run(x="not a number", doc=first_doc, later=None, show=False)
    assert (info.value.node, info.value.parameter) == ("a", "x")
    with pytest.raises(nf.TypeValidationError) as info:
        flow.run(x=1, doc="not a Doc", later=None, show=False)
    assert (info.value.node, info.value.parameter) == ("b", "doc")
    # c's hints name a class that does not exist: none of its string hints is checked (as get_type_hints fails)
    assert flow.run(x=1, doc=first_doc, later=object(), show=False)["c"] == "1"

    exec(compile("class Doc:\n    pass", "<cell>", "exec", dont_inherit=True), ns)  # the cell re-run
    flow.remove("c")  # any change recompiles
    with pytest.raises(nf.TypeValidationError):
        flow.run(x=1, doc=first_doc, show=False)  # an instance of the old class is not a Doc any more
    assert flow.run(x=1, doc=ns["Doc"](), show=False)["b"] == 1
