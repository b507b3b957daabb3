"""A compiled flow's order: topological, ties broken by definition order, however the nodes were declared."""

import heapq
import random

import pytest

import nbflow as nf


def _reference_order(declared: list[str], upstream: dict[str, list[str]]) -> list[str]:
    """Kahn's algorithm taking, each time, the first node in definition order whose upstream nodes are done."""
    position = {n: i for i, n in enumerate(declared)}
    waiting = {n: len(set(upstream[n])) for n in declared}
    downstream: dict[str, list[str]] = {n: [] for n in declared}
    for n in declared:
        for u in set(upstream[n]):
            downstream[u].append(n)
    ready = [position[n] for n in declared if waiting[n] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        n = declared[heapq.heappop(ready)]
        out.append(n)
        for d in downstream[n]:
            waiting[d] -= 1
            if waiting[d] == 0:
                heapq.heappush(ready, position[d])
    return out


def _node(params: list[str]):
    namespace: dict = {}
    exec(f"def f({', '.join(params)}):\n    return 0", namespace)
    return namespace["f"]


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("shuffled", [False, True], ids=["in_order", "shuffled"])
def test_order_is_kahns_with_ties_in_definition_order(seed, shuffled):
    rng = random.Random(seed)
    n = rng.randint(1, 25)
    names = [f"n{i}" for i in range(n)]
    upstream = {m: sorted(rng.sample(names[:i], rng.randint(0, min(i, 3)))) for i, m in enumerate(names)}
    declared = names[:]
    if shuffled:
        rng.shuffle(declared)
    flow = nf.Flow("order")
    for m in declared:
        flow.add(_node([*upstream[m], "x"] if rng.random() < 0.3 else upstream[m]), name=m)
    assert list(flow.graph.nodes) == _reference_order(declared, upstream)


def test_a_cycle_whose_nodes_are_declared_in_order_but_one_is_still_reported():
    flow = nf.Flow("ring")
    flow.add(_node(["n2"]), name="n0")
    flow.add(_node(["n0"]), name="n1")
    flow.add(_node(["n1"]), name="n2")
    with pytest.raises(nf.CycleError) as err:
        flow.graph  # noqa: B018
    cycle = list(err.value.cycle)
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == ["n0", "n1", "n2"]
