"""The specs a declaration builds (by a fast path) are the frozen dataclasses their __init__ would make."""

import dataclasses
import inspect
import pickle

import pytest

import nbflow as nf


def _flow():
    flow = nf.Flow("specs")
    sub = nf.Flow("sub")

    @sub.node
    def inner(q: int) -> int:
        return q

    @flow.node
    def a(x: int, y: str = "y") -> int:
        return x

    @flow.node(inputs={"v": "a"}, thread=False, retry=2, timeout=None)
    def b(v: int, *, w: float = 1.0) -> float:
        return v * w

    @flow.router(branches=["left", "right"])
    def route(a: int) -> str:
        return "left"

    @flow.node(branch="route.left", inputs={"m": nf.first_of("a", "b"), "o": nf.optional("b")})
    async def left(m: int, o: float) -> int:
        return m

    @flow.map(over="items", concurrency=2)
    def each(items: int) -> int:
        return items

    @flow.loop(feed="text", until=lambda t: True, max_iterations=3)
    def refine(text: str) -> str:
        return text

    @flow.node(outputs=("first", "second"))
    def pair(a: int) -> tuple[int, int]:
        return a, a

    flow.add(sub, name="child", inputs={"q": "a"})
    return flow


def _same_through_init(spec):
    """The spec built again by the dataclass's own __init__ from every field (unset slot: AttributeError)."""
    again = dataclasses.replace(spec)
    assert again == spec and repr(again) == repr(spec)
    for f in dataclasses.fields(spec):
        assert getattr(again, f.name) is getattr(spec, f.name)
    return again


def test_every_declared_spec_equals_one_built_by_its_init():
    flow = _flow()
    assert set(flow.nodes) >= {"a", "b", "route", "left", "each", "refine", "pair", "first", "second", "child"}
    for spec in flow.nodes.values():
        _same_through_init(spec)
        for param in spec.params:
            assert hash(_same_through_init(param)) == hash(param)
    left = flow.nodes["left"]
    assert [(p.name, p.source, p.alternatives, p.optional) for p in left.params] == [
        ("m", "a", ("a", "b"), False),
        ("o", "b", (), True),
    ]
    assert left.branch == ("route", "left") and left.is_async and not left.thread
    assert flow.nodes["each"].map is not None and flow.nodes["refine"].loop is not None
    assert flow.nodes["b"].params[1].default == 1.0 and not flow.nodes["b"].thread
    assert flow.nodes["a"].auto_thread and flow.nodes["a"].thread


def test_declared_specs_stay_read_only_and_pickle():
    flow = _flow()
    spec = flow.nodes["a"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.params[0].source = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(spec.params)) == spec.params
    assert flow.run(x=1, items=[1, 2], text="t").status == "succeeded"


def test_the_no_options_path_of_flow_node_checks_every_option() -> None:
    """``@flow.node`` with nothing set skips ``add``'s option handling: every keyword option of ``Flow.node``
    must be tested there against its default, or a new option given to ``@flow.node(...)`` would be dropped."""
    source = inspect.getsource(nf.Flow.node)
    fast = source[source.index("if (  # `@flow.node` with nothing set") : source.index("self._add_plain(func)")]
    for param in inspect.signature(nf.Flow.node).parameters.values():
        if param.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        expected = f"{param.name} is None" if param.default is None else f"{param.name} == {param.default!r}"
        assert expected.replace("'", '"') in fast, f"@flow.node's no-options path does not check {param.name}"
