"""How much the live run view slows a run: a 1,000-node flow with and without a RunView.

The view is created as in a notebook (``flow.start`` + ``RunView``), with a comm that serialises every
message to JSON like the kernel does (the front end is the only thing missing). Two workloads:
trivial nodes (the worst case: ~2,000 events as fast as the engine can emit them) and nodes that
wait 1 ms (closer to real work). Prints the median times and the ratio; goal <= 1.1x.

"End to end" includes creating the view and its final redraw (a fixed ~5-10 ms for 1,000 nodes);
"the run itself" is ``run.duration``, what the per-event work (coalesced redraws) adds to the engine.

Run: ``python benchmarks/widget_overhead.py [repeats]``
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any

import comm
from comm.base_comm import BaseComm

import nbflow as nf
from nbflow.widgets import RunView

N = 1000


class JsonComm(BaseComm):
    """A comm with no front end that still pays for serialising each message."""

    sent = 0

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        JsonComm.sent += len(json.dumps(data, default=str))


def build(kind: str) -> nf.Flow:
    """A layered DAG: 1,000 nodes in layers of 20, each fed by two nodes of the layer above."""
    flow = nf.Flow(f"bench_{kind}")
    width = 20
    for i in range(N):
        layer, pos = divmod(i, width)
        if layer == 0:
            deps: dict[str, str] = {}
        else:
            deps = {"a": f"n{(layer - 1) * width + pos}", "b": f"n{(layer - 1) * width + (pos + 1) % width}"}
        params = ", ".join(deps)
        if kind == "trivial":
            src = f"def n{i}({params}):\n    return 1\n"
        else:
            src = f"async def n{i}({params}):\n    await asyncio.sleep(0.001)\n    return 1\n"
        ns: dict[str, Any] = {"asyncio": asyncio}
        exec(src, ns)
        flow.add(ns[f"n{i}"], name=f"n{i}", inputs=deps, thread=False)
    return flow


async def once(flow: nf.Flow, view: bool, noop: bool = False) -> tuple[float, float]:
    """(seconds from start to finish including the view's creation, seconds the run itself took)."""
    t0 = time.perf_counter()
    handle = flow.start(show=False, on_event=(lambda e: None) if noop else None)
    v = RunView(handle) if view else None
    run = await handle
    total = time.perf_counter() - t0
    assert run.status is nf.RunStatus.SUCCEEDED, run
    if v is not None:
        assert f"{N} succeeded" in v.header
        v.close()
    return total, run.duration or 0.0


async def main(repeats: int) -> None:
    comm.create_comm = lambda *a, **k: JsonComm(*a, **k)  # type: ignore[assignment]
    for kind in ("trivial", "sleep_1ms"):
        flow = build(kind)
        await once(flow, False)
        await once(flow, True)  # warm up both paths
        plain: list[tuple[float, float]] = []
        viewed: list[tuple[float, float]] = []
        for _ in range(repeats):  # interleaved, so drift on a shared machine hits both alike
            plain.append(await once(flow, False))
            viewed.append(await once(flow, True))
        noop = [await once(flow, False, noop=True) for _ in range(repeats)]
        for i, what in ((0, "end to end (view created + drawn)"), (1, "the run itself (run.duration)")):
            a = statistics.median(p[i] for p in plain)
            b = statistics.median(v[i] for v in viewed)
            c = statistics.median(n[i] for n in noop)
            print(
                f"{kind:9s} {what:34s}: without {a * 1000:7.1f} ms, with view {b * 1000:7.1f} ms, "
                f"ratio {b / a:.3f}x (a no-op subscriber alone: {c / a:.3f}x)"
            )
    print(f"(bytes serialised for the front end in total: {JsonComm.sent:,})")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
