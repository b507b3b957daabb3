"""Parameters read from the code object give what inspect.signature gives (build's fast path)."""

import functools
import inspect
import itertools

import pytest

import nbflow as nf
from nbflow._core.missing import MISSING


def _expected(func):
    return [
        (p.name, MISSING if p.default is p.empty else p.default, p.annotation)
        for p in inspect.signature(func).parameters.values()
    ]


def _spec(func, **kw):
    flow = nf.Flow("f")
    return flow.add(func, **kw)


def plain(a, b: int, c: str = "x", *, d: float = 1.5, e) -> int:
    return 0


async def coro(a: int, b=None):
    return a


def decorated(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize(
    "func", [plain, coro, lambda q, r=2: q, decorated(plain)], ids=["plain", "async", "lambda", "wraps"]
)
def test_same_parameters_as_inspect(func):
    spec = _spec(func, name="n")
    got = [(p.name, p.default, p.annotation) for p in spec.params]
    assert got == _expected(func)
    assert spec.is_async is inspect.iscoroutinefunction(func)


def test_partials_and_callable_objects_still_work():
    class Scorer:
        def __call__(self, text: str, k: int = 3) -> int:
            return k

    class AsyncScorer:
        async def __call__(self, text: str) -> int:
            return 1

    assert [p.name for p in _spec(functools.partial(plain, 1, 2), name="p").params] == ["c", "d", "e"]
    assert [p.name for p in _spec(Scorer(), name="s").params] == ["text", "k"]
    assert _spec(AsyncScorer(), name="a").is_async


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("def f(a, *rest): pass", r"'\*rest' is not supported"),
        ("def f(a, **kw): pass", r"'\*\*kw' is not supported"),
        ("def f(a, /, b): pass", "positional-only"),
    ],
)
def test_unsupported_parameters_are_refused_by_name(src, message):
    ns: dict = {}
    exec(src, ns)
    with pytest.raises(nf.FlowDefinitionError, match=message):
        _spec(ns["f"])


def test_a_long_cycle_is_reported_with_its_whole_path():
    flow = nf.Flow("ring")
    n = 5_000
    flow.add(lambda x: x, name="n0", inputs={"x": f"n{n - 1}"})
    for i in range(1, n):
        flow.add(lambda x: x, name=f"n{i}", inputs={"x": f"n{i - 1}"})
    with pytest.raises(nf.CycleError) as info:
        flow.graph  # noqa: B018
    cycle = info.value.cycle
    assert len(cycle) == n + 1 and cycle[0] == cycle[-1] and set(cycle) == {f"n{i}" for i in range(n)}
    for producer, consumer in itertools.pairwise(cycle):  # in data-flow order
        assert int(consumer[1:]) == (int(producer[1:]) + 1) % n


def test_hints_shared_between_nodes_of_one_module_are_still_checked_per_node():
    flow = nf.Flow("hints")

    @flow.node
    def a(x: "int") -> "int":
        return x

    @flow.node
    def b(a: "int") -> "str":
        return a  # an int where the hint says str: fails this node

    run = flow.run(x=1)
    assert run.nodes["b"].status is nf.NodeStatus.FAILED
    assert isinstance(run.nodes["b"].error, nf.TypeValidationError)
