"""How much the live run view slows a run: a 1,000-node flow with and without a RunView.

The view is created as in a notebook (``flow.start`` + ``RunView``), with a comm that serialises every
message to JSON like the kernel does (the front end is the only thing missing). Two workloads:
trivial nodes (the worst case: ~2,000 events as fast as the engine can emit them) and nodes that
wait 1 ms (closer to real work). Prints the median times and the ratio; goal <= 1.1x.

"End to end" includes creating the view and its final redraw (a fixed ~3-4 ms for 1,000 nodes, was
~6-8 ms before session 5); "the run itself" is ``run.duration``, what the per-event work (coalesced
redraws) adds to the engine. A third line splits the view's own cost: creating it (its opening message
included), its redraws and the last one (drawn after the run ends, before ``await`` returns). The
1,000-node flow is shown as a table (no Graphviz); a picture's layout is made once per graph and shared.

Then what reaches the browser per run of a 120-node flow drawn as a picture (a ~1 s run): messages and bytes
after the opening message when every redraw sends every node's state (as before per-node deltas), and with
per-node deltas (only the nodes that changed), in the same run.

``--before REV`` also runs nbflow at an older commit of this repository in the same process (imported as
``nbflow_before``, as ``batch_ab.py`` does): each round runs, back to back and in alternating order, both trees
without and with their own view, so the machine's load hits them alike; each tree's ratio is its own.

``--shown``: the view as a notebook shows it (``view.show()``, what ``flow.arun`` does in a kernel): its static
snapshot (the HTML a saved notebook shows: header, problems, the graph, its table of nodes) is displayed beside it
and updated to the final state before ``await`` returns; both are serialised to JSON as the kernel would.

Run: ``python benchmarks/widget_overhead.py [repeats] [--only trivial|sleep_1ms] [--no-traffic] [--before REV]
[--shown]``
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any, ClassVar

import comm
import ipywidgets
from comm.base_comm import BaseComm

import nbflow as nf
from nbflow.widgets import RunView

N = 1000


class JsonComm(BaseComm):
    """A comm with no front end that still pays for serialising each message."""

    sent = 0
    messages = 0
    update_bytes = 0

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        size = len(json.dumps(data, default=str))
        JsonComm.sent += size
        if msg_type == "comm_msg":  # after the opening message (which carries the SVG once)
            JsonComm.messages += 1
            JsonComm.update_bytes += size


class WholeStateView(RunView):
    """The view as it was before per-node deltas: every redraw sends every node's state."""

    def _should_send_property(self, key: str, value: Any) -> bool:
        return bool(ipywidgets.DOMWidget._should_send_property(self, key, value))

    def send(self, content: Any, buffers: Any = None) -> None:
        if isinstance(content, dict) and content.get("kind") == "nodes":
            return
        super().send(content, buffers)


def timed_view(base: type[RunView]) -> Any:
    """``base`` (a RunView class), timing its creation and each redraw (what the benchmark splits the view's
    cost into)."""

    class TimedView(base):  # type: ignore[valid-type,misc]
        created: ClassVar[list[float]] = []
        drawn: ClassVar[list[float]] = []
        last: ClassVar[list[float]] = []

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            t0 = time.perf_counter()
            self._draws = 0.0
            super().__init__(*args, **kwargs)
            TimedView.created.append(time.perf_counter() - t0)

        def _redraw(self) -> None:
            t0 = time.perf_counter()
            super()._redraw()
            took = time.perf_counter() - t0
            self._draws += took
            self._last = took

        def close(self) -> None:
            TimedView.drawn.append(self._draws)
            TimedView.last.append(getattr(self, "_last", 0.0))
            super().close()

    return TimedView


TimedView = timed_view(RunView)


class _JsonDisplay:
    """A display handle that serialises each update like the kernel does (no front end)."""

    def update(self, bundle: Any, **keys: Any) -> None:
        JsonComm.sent += len(json.dumps(bundle, default=str))


def displayed(base: type[RunView]) -> Any:
    """``base`` as a notebook shows it (``view.show()``): its static snapshot displayed beside it (the HTML a
    saved notebook shows, one row per node), and updated to the final state before ``await`` returns."""

    class Displayed(timed_view(base)):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            t0 = time.perf_counter()
            super().__init__(*args, **kwargs)
            _JsonDisplay().update(self._snapshot_bundle())  # what IPython's display() sends
            self._snapshots.append(_JsonDisplay())
            Displayed.created[-1] = time.perf_counter() - t0

    return Displayed


def build(kind: str, n: int = N, width: int = 20, wait: float = 0.001, nf: Any = nf) -> Any:
    """A layered DAG: ``n`` nodes in layers of ``width``, each fed by two nodes of the layer above."""
    flow = nf.Flow(f"bench_{kind}_{n}")
    for i in range(n):
        layer, pos = divmod(i, width)
        if layer == 0:
            deps: dict[str, str] = {}
        else:
            deps = {"a": f"n{(layer - 1) * width + pos}", "b": f"n{(layer - 1) * width + (pos + 1) % width}"}
        params = ", ".join(deps)
        if kind == "trivial":
            src = f"def n{i}({params}):\n    return 1\n"
        else:
            src = f"async def n{i}({params}):\n    await asyncio.sleep({wait})\n    return 1\n"
        ns: dict[str, Any] = {"asyncio": asyncio}
        exec(src, ns)
        flow.add(ns[f"n{i}"], name=f"n{i}", inputs=deps, thread=False)
    return flow


async def once(flow: Any, view: bool, noop: bool = False, viewer: Any = None) -> tuple[float, float]:
    """(seconds from start to finish including the view's creation, seconds the run itself took)."""
    t0 = time.perf_counter()
    handle = flow.start(show=False, on_event=(lambda e: None) if noop else None)
    v = (viewer or TimedView)(handle) if view else None
    run = await handle
    total = time.perf_counter() - t0
    assert run.status.value == "succeeded", run
    if v is not None:
        assert f"{N} succeeded" in v.header
        v.close()
    return total, run.duration or 0.0


async def main(
    repeats: int,
    kinds: tuple[str, ...] = ("trivial", "sleep_1ms"),
    traffic_too: bool = True,
    before: Any = None,
    notebook: bool = False,
) -> None:
    comm.create_comm = lambda *a, **k: JsonComm(*a, **k)  # type: ignore[assignment]
    wrap = displayed if notebook else timed_view
    sides: list[tuple[str, Any, Any]] = [("now", nf, wrap(RunView))]
    if before is not None:
        sides.append(("before", before, wrap(before.widgets.RunView)))
    for kind in kinds:
        flows = {name: build(kind, nf=mod) for name, mod, _ in sides}
        for name, _, viewer in sides:
            await once(flows[name], False)
            await once(flows[name], True, viewer=viewer)  # warm up both paths
            viewer.created.clear()
            viewer.drawn.clear()
            viewer.last.clear()
        plain: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in sides}
        viewed: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in sides}
        for r in range(repeats):  # interleaved, so drift on a shared machine hits both alike
            for name, _, viewer in sides if r % 2 == 0 else sides[::-1]:
                plain[name].append(await once(flows[name], False))
                viewed[name].append(await once(flows[name], True, viewer=viewer))
        noop = [await once(flows["now"], False, noop=True) for _ in range(repeats)]
        for name, _, viewer in sides:
            tag = (f"{kind}" if name == "now" else f"{kind} [before]") + (" [shown]" if notebook else "")
            for i, what in ((0, "end to end (view created + drawn)"), (1, "the run itself (run.duration)")):
                a = statistics.median(p[i] for p in plain[name])
                b = statistics.median(v[i] for v in viewed[name])
                extra = ""
                if name == "now":
                    c = statistics.median(n[i] for n in noop)
                    extra = f" (a no-op subscriber alone: {c / a:.3f}x)"
                print(
                    f"{tag:18s} {what:34s}: without {a * 1000:7.1f} ms, with view {b * 1000:7.1f} ms, "
                    f"ratio {b / a:.3f}x{extra}"
                )
            print(
                f"{tag:18s} {'the view itself (median per run)':34s}: created in "
                f"{statistics.median(viewer.created) * 1000:.2f} ms, redrawn in "
                f"{statistics.median(viewer.drawn) * 1000:.2f} ms, of which the last "
                f"{statistics.median(viewer.last) * 1000:.2f} ms"
            )
    print(f"(bytes serialised for the front end in total: {JsonComm.sent:,}; load average {os.getloadavg()[0]:.2f})")
    if traffic_too:
        await traffic(repeats)


async def traffic(repeats: int, n: int = 120) -> None:
    """Messages and bytes one run sends to the browser after the opening message (which carries the SVG
    and every node's state once): whole node state per redraw vs per-node deltas. 120 nodes in 30 layers
    of 4 that wait 30 ms each: a run of ~1 s, redrawn every 0.25 s like a real one."""
    flow = build("sleep_30ms", n, width=4, wait=0.03)
    for cls, what in ((WholeStateView, "every node's state per redraw (before)"), (RunView, "per-node deltas")):
        counts, sizes, times = [], [], []
        for _ in range(repeats):
            JsonComm.sent = JsonComm.messages = JsonComm.update_bytes = 0
            t0 = time.perf_counter()
            handle = flow.start(show=False)
            view = cls(handle)
            assert view.svg, "drawn as a picture"
            run = await handle
            times.append(time.perf_counter() - t0)
            assert run.status is nf.RunStatus.SUCCEEDED and f"{n} succeeded" in view.header
            counts.append(JsonComm.messages)
            sizes.append(JsonComm.update_bytes)
            view.close()
        print(
            f"{n}-node picture, {what:40s}: {statistics.median(counts):4.0f} messages, "
            f"{statistics.median(sizes) / 1000:7.1f} kB per run after opening (median of {repeats}; "
            f"{statistics.median(times) * 1000:.0f} ms end to end)"
        )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repeats", nargs="?", type=int, default=7)
    parser.add_argument("--only", choices=("trivial", "sleep_1ms"), help="one workload only")
    parser.add_argument("--no-traffic", action="store_true", help="skip the browser-traffic comparison")
    parser.add_argument("--before", help="a git revision of this repository to run side by side (batch_ab.py)")
    parser.add_argument(
        "--shown",
        action="store_true",
        help="the view as a notebook shows it (view.show()): with its static snapshot, updated at the end",
    )
    args = parser.parse_args()
    kinds = (args.only,) if args.only else ("trivial", "sleep_1ms")
    print(f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        before = None
        if args.before:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from batch_ab import import_before

            before = import_before(args.before, pathlib.Path(tmp))
            import nbflow_before.widgets  # type: ignore[import-not-found]  # noqa: F401  (loads before.widgets)

            if before.widgets.RunView is RunView:
                raise SystemExit("the older tree imported the current widgets; extend batch_ab._REWRITES")
        asyncio.run(main(args.repeats, kinds, not args.no_traffic, before, args.shown))
