"""Memory of a 1,000-node fan-out: peak RSS and traced Python memory, against a hand-written ``asyncio.gather``.

The DAG: a source, N async nodes that each wait 1 ms, and a sink taking all N (``io_fanout.py``'s shape).
Each figure comes from a fresh process (peak RSS is a process's high-water mark):

- ``asyncio``: the hand-written DAG as ``asyncio.gather`` of coroutines (the process imports asyncio).
- ``nbflow``: the same DAG as a flow, defined and run in a fresh process; ``novalidate``: the same with
  ``validate=False`` (no validator is made, so pydantic is never imported: ~14 MB of RSS).
- ``floor``: nbflow running a one-node flow: the process with everything a run imports (the engine,
  anyio, pydantic for the validators) and no fan-out. No run can go below it.

Printed: each process's peak RSS, the whole-process ratio nbflow / asyncio, and the fan-out's own share
(peak RSS minus the process's RSS before the DAG was made: nbflow after its one-node run, asyncio after
``import asyncio``). With ``--traced``, tracemalloc figures of one process: the hand-written DAG's peak,
and the flow's definition, compiled graph, run peak (all nodes in flight) and what the finished run keeps.

    python benchmarks/fanout_memory.py [--nodes 1000] [--repeat 3] [--traced] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # io_fanout: the same DAG and baseline

WAIT = 0.001


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def fan_flow(n: int, validate: bool = True) -> Any:
    from io_fanout import async_flow  # (imports nbflow: not before the process measures what it had)

    return async_flow(n, WAIT, validate)


async def baseline(n: int) -> int:
    from io_fanout import baseline_async

    return await baseline_async(n, WAIT)


def _one_node_run() -> None:
    import nbflow as nf

    flow = nf.Flow("floor")

    async def one() -> int:
        return 1

    flow.add(one, name="one")
    assert asyncio.run(flow.arun()).status is nf.RunStatus.SUCCEEDED


def child(kind: str, n: int) -> dict[str, float]:
    """One measurement in this (fresh) process."""
    if kind == "asyncio":
        before = _rss_mb()
        assert asyncio.run(baseline(n)) == n
    elif kind == "floor":
        before = _rss_mb()
        _one_node_run()
    else:  # nbflow: the fan-out's own share is measured after a one-node run loaded what a run imports
        if kind == "nbflow-warm":
            _one_node_run()
        before = _rss_mb()
        run = asyncio.run(fan_flow(n, validate=kind != "novalidate").arun())
        assert run["sink"] == n, run
    return {"before_mb": before, "peak_mb": _peak_mb()}


def traced(n: int) -> dict[str, float]:
    import gc
    import tracemalloc

    _one_node_run()
    gc.collect()
    tracemalloc.start()
    asyncio.run(baseline(n))
    base_peak = tracemalloc.get_traced_memory()[1]
    gc.collect()
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    flow = fan_flow(n)
    defined = tracemalloc.get_traced_memory()[0]
    flow.graph  # noqa: B018
    compiled = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    run = asyncio.run(flow.arun())
    after, peak = tracemalloc.get_traced_memory()
    assert run["sink"] == n
    tracemalloc.stop()
    kb = 1024
    return {
        "asyncio_peak_kb": base_peak / kb,
        "flow_defined_kb": (defined - start) / kb,
        "graph_compiled_kb": (compiled - defined) / kb,
        "run_peak_kb": (peak - compiled) / kb,
        "run_kept_kb": (after - compiled) / kb,
    }


def _spawn(kind: str, n: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--nodes", str(n)], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per kind (interleaved; median)")
    parser.add_argument("--traced", action="store_true", help="also tracemalloc figures (one process)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(traced(args.nodes) if args.child == "traced" else child(args.child, args.nodes)))
        return 0
    kinds = ("asyncio", "nbflow", "nbflow-warm", "floor", "novalidate")
    samples: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for _ in range(args.repeat):
        for kind in kinds:
            samples[kind].append(_spawn(kind, args.nodes))

    def med(kind: str, key: str) -> float:
        return statistics.median(s[key] for s in samples[kind])

    fig = {
        "asyncio_peak_mb": med("asyncio", "peak_mb"),
        "nbflow_peak_mb": med("nbflow", "peak_mb"),
        "floor_peak_mb": med("floor", "peak_mb"),
        "novalidate_peak_mb": med("novalidate", "peak_mb"),
        "asyncio_own_mb": statistics.median(s["peak_mb"] - s["before_mb"] for s in samples["asyncio"]),
        "nbflow_own_mb": statistics.median(s["peak_mb"] - s["before_mb"] for s in samples["nbflow-warm"]),
    }
    fig["ratio"] = fig["nbflow_peak_mb"] / fig["asyncio_peak_mb"]
    fig["floor_ratio"] = fig["floor_peak_mb"] / fig["asyncio_peak_mb"]
    fig["novalidate_ratio"] = fig["novalidate_peak_mb"] / fig["asyncio_peak_mb"]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.nodes}-node fan-out, median of {args.repeat} fresh processes")
    print(
        f"peak RSS: asyncio {fig['asyncio_peak_mb']:.1f} MB, nbflow {fig['nbflow_peak_mb']:.1f} MB, "
        f"nbflow's floor (a one-node run) {fig['floor_peak_mb']:.1f} MB, "
        f"nbflow with validate=False {fig['novalidate_peak_mb']:.1f} MB"
    )
    print(
        f"the fan-out's own share of the peak: asyncio {fig['asyncio_own_mb']:.1f} MB, "
        f"nbflow {fig['nbflow_own_mb']:.1f} MB"
    )
    if args.traced:
        out = subprocess.run(
            [sys.executable, __file__, "--child", "traced", "--nodes", str(args.nodes)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        t = json.loads(out.strip().splitlines()[-1])
        fig.update(t)
        print(
            f"traced: asyncio peak {t['asyncio_peak_kb']:.0f} KB; nbflow: flow defined {t['flow_defined_kb']:.0f} KB, "
            f"graph {t['graph_compiled_kb']:.0f} KB, run peak {t['run_peak_kb']:.0f} KB "
            f"({t['run_peak_kb'] / t['asyncio_peak_kb']:.2f}x asyncio's), run kept {t['run_kept_kb']:.0f} KB"
        )
    print(
        f"summary: peak RSS nbflow / asyncio {fig['ratio']:.2f}x (floor: a one-node run alone is "
        f"{fig['floor_ratio']:.2f}x); with validate=False (no pydantic) {fig['novalidate_ratio']:.2f}x"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fig, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
