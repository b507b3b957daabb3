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
