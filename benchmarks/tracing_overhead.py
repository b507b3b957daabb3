"""What OpenTelemetry tracing costs: off (the default) against a run path without the hook, and on.

Workload: many runs of a small flow (3 async nodes, x + 1), where a per-run cost would show most,
and a batch of rows. Measured in the same process, repetitions interleaved, medians reported:

* ``no hook``: ``flow.arun`` of a Flow whose ``_prepare`` (where a run is created) is the same
  code minus the tracing check: the baseline is the run path as it was before tracing existed;
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
import timeit
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nbflow as nf


def make_flow(cls: type[nf.Flow] = nf.Flow) -> nf.Flow:
    flow = cls("bench")

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


def _prepare_without_hook() -> Any:
    """``Flow._prepare`` as the installed nbflow has it, minus the tracing check (its source, edited).

    Made from the real source each time, so the baseline never drifts from the run path it measures
    (a hand-copied version went stale when ``_prepare`` gained ``keep=``/``save=``).
    """
    import inspect
    import textwrap

    import nbflow._flow.flow as flow_module

    lines = textwrap.dedent(inspect.getsource(nf.Flow._prepare)).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("if trace is not None or config.trace"))
    end = next(i for i in range(start + 1, len(lines)) if "attach(run, trace" in lines[i])
    source = "\n".join(lines[:start] + lines[end + 1 :])
    namespace: dict[str, Any] = {}
    exec(compile(source, "<_prepare without the tracing check>", "exec"), vars(flow_module), namespace)
    return namespace["_prepare"]


class FlowWithoutHook(nf.Flow):
    """``nf.Flow`` whose ``_prepare`` (where a run is created) is the real one minus the tracing check."""

    _prepare = _prepare_without_hook()


async def no_hook(flow: nf.Flow, n: int) -> None:
    for i in range(n):
        run = await flow.arun(x=i, show=False)
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
    bare = make_flow(FlowWithoutHook)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    on = traced(provider)
    timed(off, flow, 200)  # warm up: compile the graph, import what runs import
    timed(no_hook, bare, 200)
    timed(on, flow, 50)
    exporter.clear()

    runs: dict[str, list[float]] = {"no hook": [], "off": [], "on": []}
    kinds = {"no hook": (no_hook, bare), "off": (off, flow), "on": (on, flow)}
    order = list(kinds)
    for r in range(args.repeat):  # interleaved, in a rotating order: drift and warm-up hit all three alike
        for name in order[r % 3 :] + order[: r % 3]:
            fn, which = kinds[name]
            runs[name].append(timed(fn, which, args.runs))
        exporter.clear()
    rows = [{"x": i} for i in range(args.rows)]
    batch: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(max(3, args.repeat // 2)):
        batch["off"].append(batch_timed(flow, rows, None))
        batch["on"].append(batch_timed(flow, rows, provider))
        exporter.clear()

    # The only thing tracing-off adds to a run is one check; timed alone it is below the noise above.
    check = timeit.Timer(
        "trace is not None or config.trace is not None", globals={"trace": None, "config": nf.config}
    ).timeit(1_000_000)
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
        "check_ns": check * 1e3,
        "check_share_of_a_run": check * 1e-6 / (per_run["off"] * 1e-6),
        "python": sys.version.split()[0],
    }
    print(f"{args.runs} runs of a 3-node flow (median of {args.repeat}), µs per run:")
    for k, v in per_run.items():
        print(f"  {k:8s} {v:8.1f}")
    print(f"  tracing off / no hook: {figures['run_off_over_no_hook']:.3f}")
    print(f"  tracing on / off:      {figures['run_on_over_off']:.2f}")
    print(
        f"  the tracing-off check alone: {figures['check_ns']:.0f} ns = {figures['check_share_of_a_run']:.3%} of a run"
    )
    print(f"batch of {args.rows} rows, µs per row: off {per_row['off']:.1f}, on {per_row['on']:.1f}")
    print(f"  tracing on / off:      {figures['batch_on_over_off']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
