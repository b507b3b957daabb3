"""Building and compiling a flow of N nodes, and reporting a cycle, against hand-written baselines.

- build: ``flow.add`` of an N-node chain of plain functions. Baseline: the hand-written asyncio
  DAG built the same way (one function and one task per node, each waiting on its upstream task;
  the tasks run after the timing).
- compile: ``flow.graph`` (wiring, cycle check, topological order, validators). Baseline: the
  same dependencies put in order by the standard library (``graphlib.TopologicalSorter``).
- cycle: an N-node chain whose first node depends on its last: the time until ``CycleError``
  (with the path) is raised. Baseline: ``graphlib``'s own ``CycleError``. Goal: < 0.2 s at 30,000.

As a notebook writes it (``--define``, default 1,000 nodes), issue 35's goals:

- define: a cell of N ``@flow.node`` functions, each with type hints and wired to the one before by
  its parameter's name, then ``flow.graph`` (what the first run compiles). Baseline: the same cell
  hand-written as a dict of coroutines (an ``async def`` per node and its task, awaiting the one
  before). Both cells are compiled to byte code outside the timing. Goal: <= 3x.
- redefine: a cell that redefines one node of the compiled N-node flow, then ``flow.graph``. Goal:
  <= 1 ms (the hand-written cell is printed beside it).
- first run: ``flow.run`` of the N-node flow just defined (compiling, the type checks' adapters,
  the plan and the run), against the next run of the same flow and the hand-written tasks' run.

    python benchmarks/build_compile.py [--sizes 1000 10000 100000] [--cycle 10000 30000 100000] [--repeat 5]
    python benchmarks/build_compile.py --sizes --cycle --define 1000   # issue 35's figures only
    python benchmarks/build_compile.py --sizes --cycle --define 1000 --before <rev>   # and an older tree's

Also printed: the floor of any decorator DSL, the same cell of ``def``s under a decorator that returns the
function, and under one that records it with its parameter names and annotations read from its code.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import graphlib
import json
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import nbflow as nf

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # batch_ab: --before


def build_flow(n: int, cyclic: bool = False) -> nf.Flow:
    flow = nf.Flow("chain")

    def first(x: int) -> int:
        return x

    flow.add(first, name="n0", inputs={"x": f"n{n - 1}"} if cyclic else None)
    for i in range(1, n):

        def step(x: int) -> int:
            return x + 1

        flow.add(step, name=f"n{i}", inputs={"x": f"n{i - 1}"})
    return flow


async def baseline_build(n: int) -> list[asyncio.Task[int]]:
    """The hand-written DAG: a function and a task per node, each awaiting its upstream's task."""

    async def first() -> int:
        return 0

    prev: asyncio.Task[int] = asyncio.ensure_future(first())
    tasks = [prev]
    for _ in range(1, n):

        async def step(up: asyncio.Task[int]) -> int:
            return await up + 1

        prev = asyncio.ensure_future(step(prev))
        tasks.append(prev)
    return tasks


CLOCK = time.perf_counter  # --clock cpu: time.thread_time (a shared machine: time descheduled is not cost)
CLOCK_NAME = "wall"
STRING_HINTS = False  # --string-hints: the cells start with `from __future__ import annotations`


def define_cell(n: int, graph: bool = True) -> Any:
    """The byte code of a notebook cell declaring an N-node chain with ``@flow.node`` (then compiling it)."""
    lines = ["from __future__ import annotations"] if STRING_HINTS else []
    lines += ["flow = nf.Flow('chain')", "@flow.node", "def n0(x: int) -> int:", "    return x"]
    for i in range(1, n):
        lines += ["@flow.node", f"def n{i}(n{i - 1}: int) -> int:", f"    return n{i - 1} + 1"]
    if graph:
        lines.append("flow.graph")
    return compile("\n".join(lines), "<cell>", "exec", dont_inherit=True)


def baseline_cell(n: int) -> Any:
    """The same cell hand-written: a dict of coroutines, each node's task awaiting the one before."""
    lines = ["tasks = {}", "async def n0(x: int) -> int:", "    return x", "tasks['n0'] = ensure_future(n0(1))"]
    for i in range(1, n):
        lines += [
            f"async def n{i}(n{i - 1}: Awaitable[int]) -> int:",
            f"    return await n{i - 1} + 1",
            f"tasks['n{i}'] = ensure_future(n{i}(tasks['n{i - 1}']))",
        ]
    return compile("\n".join(lines), "<cell>", "exec", dont_inherit=True)


def redefine_cell(n: int) -> Any:
    k = n // 2
    cell = f"@flow.node\ndef n{k}(n{k - 1}: int) -> int:\n    return n{k - 1} + 2\nflow.graph"
    return compile(cell, "<cell>", "exec", dont_inherit=True)


def baseline_redefine_cell(n: int) -> Any:
    k = n // 2
    return compile(
        f"async def n{k}(n{k - 1}: Awaitable[int]) -> int:\n    return await n{k - 1} + 2\nnodes['n{k}'] = n{k}",
        "<cell>",
        "exec",
        dont_inherit=True,
    )


def floor_cells(n: int) -> dict[str, Any]:
    """The same cell of ``def``s under decorators that do (almost) nothing: what any decorator DSL pays.

    ``identity``: ``@node`` returns the function (the ``def``s and decorator calls alone). ``record``: ``@node``
    records the function by name with its parameter names read from its code object and its annotations,
    the least a DSL wiring nodes by parameter name must read (nbflow reads them the same way, without
    ``inspect.signature``).
    """
    lines = ["from __future__ import annotations"] if STRING_HINTS else []
    lines += ["@node", "def n0(x: int) -> int:", "    return x"]
    for i in range(1, n):
        lines += ["@node", f"def n{i}(n{i - 1}: int) -> int:", f"    return n{i - 1} + 1"]
    code = compile("\n".join(lines), "<cell>", "exec", dont_inherit=True)

    def identity(f: Any) -> Any:
        return f

    def record_into(nodes: dict[str, Any]) -> Callable[[Any], Any]:
        def node(f: Any) -> Any:
            c = f.__code__
            nodes[f.__name__] = (f, c.co_varnames[: c.co_argcount + c.co_kwonlyargcount], f.__annotations__)
            return f

        return node

    return {"code": code, "identity": lambda: {"node": identity}, "record": lambda: {"node": record_into({})}}


def measure_define(n: int, repeat: int, libs: dict[str, Any]) -> dict[str, Any]:
    """Define by decorators and compile; redefine one node; the first run. Interleaved with the baselines.

    ``libs``: the nbflow packages to measure by name (``after``: this tree; ``before``: an older one, see
    ``--before``), run back to back in alternating order each round.
    """
    cell, bare, base_cell = define_cell(n), define_cell(n, graph=False), baseline_cell(n)
    again, base_again = redefine_cell(n), baseline_redefine_cell(n)
    floors = floor_cells(n)
    loop = asyncio.new_event_loop()  # (flow.run starts its own loop: the tasks are made on this one)
    from collections.abc import Awaitable

    base, base_redo, base_run = [], [], []
    floor: dict[str, list[float]] = {"identity": [], "record": []}
    per: dict[str, dict[str, list[float]]] = {
        name: {"define": [], "redo": [], "first": [], "second": [], "ratio": []} for name in libs
    }
    names = list(libs)
    try:
        for r in range(repeat):
            gc.collect()
            ns: dict[str, Any] = {"ensure_future": loop.create_task, "Awaitable": Awaitable}
            t0 = CLOCK()
            exec(base_cell, ns)
            base.append(CLOCK() - t0)
            t0 = CLOCK()
            loop.run_until_complete(asyncio.gather(*ns["tasks"].values()))
            base_run.append(CLOCK() - t0)
            ns["nodes"] = {}
            t0 = CLOCK()
            exec(base_again, ns)
            base_redo.append(CLOCK() - t0)
            for kind in floor:
                gc.collect()
                floor_ns = floors[kind]()
                t0 = CLOCK()
                exec(floors["code"], floor_ns)
                floor[kind].append(CLOCK() - t0)
            for name in names if r % 2 == 0 else names[::-1]:
                lib, got = libs[name], per[name]
                gc.collect()
                flow_ns: dict[str, Any] = {"nf": lib}
                t0 = CLOCK()
                exec(cell, flow_ns)
                got["define"].append(CLOCK() - t0)
                got["ratio"].append(got["define"][-1] / base[-1])
                t0 = CLOCK()
                exec(again, flow_ns)
                got["redo"].append(CLOCK() - t0)
                flow_ns = {"nf": lib}
                exec(bare, flow_ns)  # a fresh flow, not compiled: its first run compiles it
                flow = flow_ns["flow"]
                gc.collect()
                t0 = CLOCK()
                flow.run(x=1)
                got["first"].append(CLOCK() - t0)
                t0 = CLOCK()
                flow.run(x=1)
                got["second"].append(CLOCK() - t0)
    finally:
        loop.close()
    med = statistics.median
    out: dict[str, Any] = {
        "nodes": n,
        "baseline_ms": med(base) * 1e3,
        "baseline_redefine_ms": med(base_redo) * 1e3,
        "baseline_run_ms": med(base_run) * 1e3,
        "floor_identity_ms": med(floor["identity"]) * 1e3,
        "floor_record_ms": med(floor["record"]) * 1e3,
    }
    for name, got in per.items():
        prefix = "" if name == "after" else f"{name}_"
        out |= {
            f"{prefix}nbflow_ms": med(got["define"]) * 1e3,
            f"{prefix}ratio": med(got["define"]) / med(base),
            f"{prefix}round_ratio": med(got["ratio"]),
            f"{prefix}redefine_ms": med(got["redo"]) * 1e3,
            f"{prefix}first_run_ms": med(got["first"]) * 1e3,
            f"{prefix}next_run_ms": med(got["second"]) * 1e3,
        }
    return out


def print_define(d: dict[str, Any], repeat: int, before: str | None) -> None:
    n = d["nodes"]
    for prefix, label in (("before_", f"before ({before})"), ("", "")):
        if f"{prefix}nbflow_ms" not in d:
            continue
        print(
            f"{label + ': ' if label else ''}define {n} nodes by @flow.node + flow.graph: {d[prefix + 'nbflow_ms']:.1f} ms, "
            f"hand-written dict of coroutines {d['baseline_ms']:.1f} ms: {d[prefix + 'ratio']:.2f}x (goal <= 3x; "
            f"per round {d[prefix + 'round_ratio']:.2f}x); redefine one node + flow.graph: "
            f"{d[prefix + 'redefine_ms']:.2f} ms (goal <= 1 ms; hand-written {d['baseline_redefine_ms'] * 1e3:.0f} µs); "
            f"first run {d[prefix + 'first_run_ms']:.1f} ms, next {d[prefix + 'next_run_ms']:.1f} ms "
            f"(hand-written tasks' run {d['baseline_run_ms']:.1f} ms)  [median of {repeat}, {CLOCK_NAME} clock]"
        )
    print(
        f"floor: the same {n} defs under a decorator returning the function: {d['floor_identity_ms']:.2f} ms "
        f"({d['floor_identity_ms'] / d['baseline_ms']:.2f}x); under one recording each function with its parameter "
        f"names and annotations: {d['floor_record_ms']:.2f} ms ({d['floor_record_ms'] / d['baseline_ms']:.2f}x)"
    )


def deps_of(n: int, cyclic: bool = False) -> dict[str, tuple[str, ...]]:
    deps = {f"n{i}": (f"n{i - 1}",) for i in range(1, n)}
    deps["n0"] = (f"n{n - 1}",) if cyclic else ()
    return deps


def _median(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure_build(n: int, repeat: int) -> dict[str, float]:
    loop = asyncio.new_event_loop()
    base, nb = [], []
    try:
        for _ in range(repeat):  # interleaved: machine noise hits both alike
            gc.collect()
            t0 = time.perf_counter()
            tasks = loop.run_until_complete(baseline_build(n))
            base.append(time.perf_counter() - t0)
            loop.run_until_complete(asyncio.gather(*tasks))
            gc.collect()
            t0 = time.perf_counter()
            build_flow(n)
            nb.append(time.perf_counter() - t0)
    finally:
        loop.close()
    b, m = statistics.median(base), statistics.median(nb)
    return {"nodes": n, "baseline_us": b / n * 1e6, "nbflow_us": m / n * 1e6, "ratio": m / b}


def measure_compile(n: int, repeat: int) -> dict[str, float]:
    deps = deps_of(n)
    flows = [build_flow(n) for _ in range(repeat)]
    base, nb = [], []
    for flow in flows:
        gc.collect()
        t0 = time.perf_counter()
        order = list(graphlib.TopologicalSorter(deps).static_order())
        base.append(time.perf_counter() - t0)
        assert len(order) == n
        gc.collect()
        t0 = time.perf_counter()
        flow.graph  # noqa: B018
        nb.append(time.perf_counter() - t0)
    b, m = statistics.median(base), statistics.median(nb)
    return {"nodes": n, "baseline_us": b / n * 1e6, "nbflow_us": m / n * 1e6, "ratio": m / b}


def measure_cycle(n: int, repeat: int) -> dict[str, float]:
    deps = deps_of(n, cyclic=True)
    flows = [build_flow(n, cyclic=True) for _ in range(repeat)]
    base, nb = [], []
    for flow in flows:
        gc.collect()
        t0 = time.perf_counter()
        try:
            list(graphlib.TopologicalSorter(deps).static_order())
        except graphlib.CycleError:
            pass
        base.append(time.perf_counter() - t0)
        gc.collect()
        t0 = time.perf_counter()
        try:
            flow.graph  # noqa: B018
        except nf.CycleError as exc:
            assert len(exc.cycle) == n + 1
        else:
            raise AssertionError("no CycleError")
        nb.append(time.perf_counter() - t0)
    b, m = statistics.median(base), statistics.median(nb)
    return {"nodes": n, "baseline_s": b, "nbflow_s": m, "ratio": m / b}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--cycle", type=int, nargs="*", default=[30_000])
    parser.add_argument("--define", type=int, nargs="*", default=[1_000], help="notebook-cell sizes (issue 35)")
    parser.add_argument(
        "--string-hints", action="store_true", help="the cells under `from __future__ import annotations`"
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="--define's clock (cpu: thread time)")
    parser.add_argument(
        "--before", help="a git revision of this repository: its define figures too, interleaved (batch_ab.py)"
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    global STRING_HINTS, CLOCK, CLOCK_NAME
    STRING_HINTS = args.string_hints
    CLOCK, CLOCK_NAME = (time.thread_time, "cpu") if args.clock == "cpu" else (time.perf_counter, "wall")
    build_flow(50).graph  # noqa: B018  (imports and caches outside the timing)
    out: dict[str, Any] = {"define": [], "build": [], "compile": [], "cycle": []}
    libs: dict[str, Any] = {"after": nf}
    with tempfile.TemporaryDirectory() as tmp:
        if args.before:
            from batch_ab import import_before

            libs = {"before": import_before(args.before, pathlib.Path(tmp)), "after": nf}
            warm = libs["before"].Flow("warm")
            warm.add(lambda x: x, name="w")
            warm.graph  # noqa: B018
        for n in args.define:
            d = measure_define(n, args.repeat, libs)
            out["define"].append(d)
            print_define(d, args.repeat, args.before)
    if args.sizes:
        print(f"build and compile, median of {args.repeat} (µs per node)")
        print(f"{'what':<8} {'nodes':>7} {'baseline':>9} {'nbflow':>9} {'ratio':>7}")
    for n in args.sizes:
        rep = args.repeat if n <= 10_000 else max(1, args.repeat // 2)
        for what, fn in (("build", measure_build), ("compile", measure_compile)):
            r = fn(n, rep)
            out[what].append(r)
            print(f"{what:<8} {n:>7} {r['baseline_us']:>9.2f} {r['nbflow_us']:>9.2f} {r['ratio']:>6.2f}x")
    out["cycle"] = []
    for n in args.cycle:
        c = measure_cycle(n, args.repeat)
        out["cycle"].append(c)
        print(
            f"cycle    {n:>7} graphlib {c['baseline_s'] * 1e3:.1f} ms, nbflow {c['nbflow_s'] * 1e3:.1f} ms "
            f"({c['ratio']:.2f}x, {c['nbflow_s'] / n * 1e6:.2f} µs per node; goal < 200 ms at 30,000)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
