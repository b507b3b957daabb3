"""Property tests: random DAGs of sync/async nodes against a sequential reference evaluation."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

import nbflow as nf

MOD = 1_000_003


@dataclass
class NodeDef:
    ups: list[int]
    kind: str  # "async", "thread", "inline"
    fails: bool
    sleeps: bool


@st.composite
def dags(draw):
    n = draw(st.integers(1, 12))
    nodes = []
    for i in range(n):
        ups = sorted(draw(st.sets(st.integers(0, i - 1), max_size=min(i, 3)))) if i else []
        nodes.append(
            NodeDef(
                ups=ups,
                kind=draw(st.sampled_from(["async", "thread", "inline"])),
                fails=draw(st.booleans()) and draw(st.booleans()),  # ~25%
                sleeps=draw(st.booleans()),
            )
        )
    cap = draw(st.sampled_from([None, 1, 2, 3]))
    order = draw(st.permutations(range(n)))  # definition order must not matter
    return nodes, cap, order


def reference(nodes: list[NodeDef]) -> tuple[dict[int, int], set[int], set[int]]:
    outputs: dict[int, int] = {}
    failed: set[int] = set()
    skipped: set[int] = set()
    for i, nd in enumerate(nodes):
        if any(u in failed or u in skipped for u in nd.ups):
            skipped.add(i)
        elif nd.fails:
            failed.add(i)
        else:
            outputs[i] = (i * 7 + sum(outputs[u] * (k + 1) for k, u in enumerate(nd.ups))) % MOD
    return outputs, failed, skipped


class Probe:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tick = 0
        self.active = 0
        self.peak = 0
        self.started: dict[int, list[int]] = {}
        self.ended: dict[int, int] = {}

    def enter(self, i: int) -> None:
        with self.lock:
            self.tick += 1
            self.started.setdefault(i, []).append(self.tick)
            self.active += 1
            self.peak = max(self.peak, self.active)

    def leave(self, i: int) -> None:
        with self.lock:
            self.tick += 1
            self.ended[i] = self.tick
            self.active -= 1


def build(nodes: list[NodeDef], cap: int | None, order: list[int], probe: Probe) -> nf.Flow:
    flow = nf.Flow("prop", concurrency=cap)
    for i in order:
        nd = nodes[i]
        params = [f"p{k}" for k in range(len(nd.ups))]
        body = f"(i * 7 + {' + '.join(f'p{k} * {k + 1}' for k in range(len(params))) or '0'}) % MOD"
        ns = {"i": i, "MOD": MOD, "probe": probe, "fails": nd.fails, "anyio": anyio}
        if nd.kind == "async":
            src = f"async def f({', '.join(params)}):\n    probe.enter(i)\n"
            src += "    await anyio.sleep(0)\n" if nd.sleeps else ""
        else:
            src = f"def f({', '.join(params)}):\n    probe.enter(i)\n"
        src += "    try:\n"
        src += "        if fails:\n            raise ValueError(f'node {i} fails')\n"
        src += f"        return {body}\n    finally:\n        probe.leave(i)\n"
        exec(src, ns)
        flow.add(
            ns["f"],
            name=f"n{i}",
            inputs={f"p{k}": f"n{u}" for k, u in enumerate(nd.ups)},
            thread=nd.kind == "thread",
        )
    return flow


@settings(max_examples=60, deadline=None)
@given(dags())
def test_random_dags_match_the_sequential_reference(case):
    nodes, cap, order = case
    probe = Probe()
    flow = build(nodes, cap, order, probe)
    run = anyio.run(flow.arun)
    outputs, failed, skipped = reference(nodes)

    assert {int(n[1:]): v for n, v in run.outputs.items()} == outputs
    statuses = {int(n[1:]): r.status for n, r in run.nodes.items()}
    assert {i for i, s in statuses.items() if s is nf.NodeStatus.FAILED} == failed
    assert {i for i, s in statuses.items() if s is nf.NodeStatus.SKIPPED} == skipped
    # a failure skips exactly the failed nodes' descendants
    descendants = set()
    for f in failed:
        descendants |= {int(n[1:]) for n in flow.graph.descendants(f"n{f}")}
    assert skipped == descendants
    # each node that ran ran once, and only after all its upstreams had finished
    for i, starts in probe.started.items():
        assert len(starts) == 1
        for u in nodes[i].ups:
            assert probe.ended[u] < starts[0]
    assert set(probe.started) == set(outputs) | failed
    if cap is not None:
        assert probe.peak <= cap
    assert run.status is (nf.RunStatus.FAILED if failed else nf.RunStatus.SUCCEEDED)


# --- with routers and merges ---------------------------------------------------------------------


@dataclass
class CFNode:
    ups: list[int]
    router: int  # number of branches (0: not a router)
    guard: tuple[int, int] | None  # (router index, branch number)
    merge: list[int]  # alternatives for one extra parameter (empty: none)
    fails: bool


@st.composite
def cf_dags(draw):
    n = draw(st.integers(1, 12))
    nodes: list[CFNode] = []
    for i in range(n):
        data_nodes = [j for j in range(i) if not nodes[j].router]
        routers = [j for j in range(i) if nodes[j].router]
        ups = sorted(draw(st.sets(st.sampled_from(data_nodes), max_size=2))) if data_nodes else []
        is_router = draw(st.integers(0, 3)) == 0
        guard = None
        if routers and draw(st.booleans()):
            r = draw(st.sampled_from(routers))
            guard = (r, draw(st.integers(0, nodes[r].router - 1)))
        merge: list[int] = []
        if len(data_nodes) >= 2 and draw(st.integers(0, 2)) == 0:
            merge = draw(st.lists(st.sampled_from(data_nodes), min_size=2, max_size=3, unique=True))
        nodes.append(
            CFNode(
                ups=ups,
                router=draw(st.integers(2, 3)) if is_router else 0,
                guard=guard,
                merge=merge,
                fails=draw(st.integers(0, 5)) == 0,
            )
        )
    return nodes


def cf_value(i: int, ups: list[int], merged: int | None) -> int:
    return (i * 7 + sum(u * (k + 1) for k, u in enumerate(ups)) + (merged or 0) * 31) % MOD


def cf_reference(nodes: list[CFNode]) -> tuple[dict[int, object], set[int], set[int]]:
    """A sequential interpreter of routing/merge semantics: outputs, failed, skipped."""
    out: dict[int, object] = {}
    failed: set[int] = set()
    skipped: set[int] = set()
    for i, nd in enumerate(nodes):
        ok = True
        if nd.guard is not None:
            r, b = nd.guard
            ok = r in out and out[r] == f"b{b}"
        ok = ok and all(u in out for u in nd.ups)
        merged = None
        if ok and nd.merge:
            ran = [m for m in nd.merge if m in out]
            ok = bool(ran)
            merged = out[ran[0]] if ran else None
        if not ok:
            skipped.add(i)
        elif nd.fails:
            failed.add(i)
        else:
            v = cf_value(i, [out[u] for u in nd.ups], merged)  # type: ignore[misc]
            out[i] = f"b{v % nd.router}" if nd.router else v
    return out, failed, skipped


def cf_build(nodes: list[CFNode]) -> nf.Flow:
    flow = nf.Flow("cf")
    for i, nd in enumerate(nodes):
        params = [f"p{k}" for k in range(len(nd.ups))] + (["m"] if nd.merge else [])
        ns = {"i": i, "fails": nd.fails, "cf_value": cf_value, "nb": nd.router}
        ups = ", ".join(f"p{k}" for k in range(len(nd.ups)))
        body = f"cf_value(i, [{ups}], {'m' if nd.merge else 'None'})"
        result = f"f'b{{{body} % nb}}'" if nd.router else body
        src = f"def f({', '.join(params)}):\n    if fails:\n        raise ValueError(f'node {{i}}')\n"
        src += f"    return {result}\n"
        exec(src, ns)
        inputs: dict[str, object] = {f"p{k}": f"n{u}" for k, u in enumerate(nd.ups)}
        if nd.merge:
            inputs["m"] = nf.first_of(*(f"n{m}" for m in nd.merge))
        branch = f"n{nd.guard[0]}.b{nd.guard[1]}" if nd.guard else None
        if nd.router:
            flow.router(
                ns["f"],
                name=f"n{i}",
                inputs=inputs,
                thread=False,
                branch=branch,
                branches=[f"b{k}" for k in range(nd.router)],
            )
        else:
            flow.add(ns["f"], name=f"n{i}", inputs=inputs, thread=False, branch=branch)  # type: ignore[arg-type]
    return flow


@settings(max_examples=80, deadline=None)
@given(cf_dags())
def test_random_dags_with_routers_and_merges_match_the_reference_interpreter(nodes):
    flow = cf_build(nodes)
    run = flow.run()
    out, failed, skipped = cf_reference(nodes)
    assert {int(n[1:]): v for n, v in run.outputs.items()} == out
    st_ = {int(n[1:]): r.status for n, r in run.nodes.items()}
    assert {i for i, s in st_.items() if s is nf.NodeStatus.FAILED} == failed
    assert {i for i, s in st_.items() if s is nf.NodeStatus.SKIPPED} == skipped
    assert run.status is (nf.RunStatus.FAILED if failed else nf.RunStatus.SUCCEEDED)
