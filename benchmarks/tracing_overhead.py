"""What OpenTelemetry tracing costs: off (the default) against a run path without the hook, and on.

Workload: many runs of a small flow (3 async nodes, x + 1), where a per-run cost would show most,
and a batch of rows. Measured in the same process, repetitions interleaved, medians reported:

* ``no hook``: the hand-written run path: plan, record and execute exactly as ``flow.arun`` does,
  minus the tracing check (built from the same private steps ``arun`` uses);
* ``off``: ``await flow.arun(...)`` with ``nf.config.trace = None`` (the default);
* ``on``: ``flow.arun(..., trace=provider)``, an OpenTelemetry SDK provider exporting to memory.

    python benchmarks/tracing_overhead.py [--runs 2000] [--rows 2000] [--repeat 7] [--json out.json]

Reports µs per run and the ratios off/no-hook (what tracing costs when it is off: ~1.00) and on/off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nbflow as nf
from nbflow._flow.flow import _check_concurrency
from nbflow._graph.graph import validate_inputs
from nbflow._notebook import auto_show
from nbflow._record.run import Run


def make_flow() -> nf.Flow:
    flow = nf.Flow("bench")

    @flow.node
    async def a(x: int) -> int:
        return x + 1

    @flow.node
    async def b(a: int) -> int:
        return a + 1

    @flow.node
    async def c(b: int) -> int:
        return b + 1

    return flow


async def no_hook(flow: nf.Flow, n: int) -> None:
    """``flow.arun(x=i, show=False)`` step by step as it is written, minus the tracing check."""
    for i in range(n):
        _check_concurrency(None)
        flow._check_deadline(None, None, "arun")
        merged: dict[str, Any] = {}
        merged.update({"x": i})
        overrides: dict[str, Any] = {}
        graph = flow.graph
        plan = graph.plan(merged, None, overrides)
        validate_inputs(graph, plan, merged)
        run = Run(flow.name, uuid.uuid4().hex[:12], merged, plan.nodes)
        run.graph = graph
        run._flow = flow
        run.targets = None
        flow.last_run = run
        auto_show(run, None, False)
        await flow._execute(graph, plan, run, merged, overrides, None, None)
        assert run.nodes["c"].output == i + 3


async def off(flow: nf.Flow, n: int) -> None:
    for i in range(n):
        run = await flow.arun(x=i, show=False)
        assert run.nodes["c"].output == i + 3


def traced(provider: TracerProvider) -> Any:
    async def on(flow: nf.Flow, n: int) -> None:
        for i in range(n):
            run = await flow.arun(x=i, show=False, trace=provider)
            assert run.nodes["c"].output == i + 3

    return on


def timed(fn: Any, flow: nf.Flow, n: int) -> float:
    t0 = time.perf_counter()
    asyncio.run(fn(flow, n))
    return time.perf_counter() - t0


def batch_timed(flow: nf.Flow, rows: list[dict[str, int]], trace: Any) -> float:
    t0 = time.perf_counter()
    frame = flow.batch(rows, concurrency=32, progress=False, trace=trace)
    assert (frame["status"] == "succeeded").all()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()

    flow = make_flow()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    on = traced(provider)
    timed(off, flow, 200)  # warm up: compile the graph, import what runs import
    timed(on, flow, 50)
    exporter.clear()

    runs: dict[str, list[float]] = {"no hook": [], "off": [], "on": []}
    for _ in range(args.repeat):  # interleaved: drift of the machine hits all three alike
        runs["no hook"].append(timed(no_hook, flow, args.runs))
        runs["off"].append(timed(off, flow, args.runs))
        runs["on"].append(timed(on, flow, args.runs))
        exporter.clear()
    rows = [{"x": i} for i in range(args.rows)]
    batch: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(max(3, args.repeat // 2)):
        batch["off"].append(batch_timed(flow, rows, None))
        batch["on"].append(batch_timed(flow, rows, provider))
        exporter.clear()

    per_run = {k: statistics.median(v) / args.runs * 1e6 for k, v in runs.items()}
    per_row = {k: statistics.median(v) / args.rows * 1e6 for k, v in batch.items()}
    figures = {
        "runs": args.runs,
        "rows": args.rows,
        "us_per_run": per_run,
        "us_per_row": per_row,
        "run_off_over_no_hook": per_run["off"] / per_run["no hook"],
        "run_on_over_off": per_run["on"] / per_run["off"],
        "batch_on_over_off": per_row["on"] / per_row["off"],
        "python": sys.version.split()[0],
    }
    print(f"{args.runs} runs of a 3-node flow (median of {args.repeat}), µs per run:")
    for k, v in per_run.items():
        print(f"  {k:8s} {v:8.1f}")
    print(f"  tracing off / no hook: {figures['run_off_over_no_hook']:.3f}")
    print(f"  tracing on / off:      {figures['run_on_over_off']:.2f}")
    print(f"batch of {args.rows} rows, µs per row: off {per_row['off']:.1f}, on {per_row['on']:.1f}")
    print(f"  tracing on / off:      {figures['batch_on_over_off']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
