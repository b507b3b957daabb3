"""I/O fan-out: how close a flow of N concurrent waits comes to the ideal wall time, against ``asyncio.gather``.

The DAG: a source, N nodes that each wait ``--wait`` seconds (20 ms: a model call's shape) and a sink
taking all N. Two shapes, reported apart:

- ``async``: each node is ``async def`` and ``await asyncio.sleep(wait)``; the hand-written baseline is
  the same DAG as ``asyncio.gather`` of coroutines. Ideal wall time: one wait.
- ``sync``: each node is a plain ``def`` calling ``time.sleep(wait)``, which nbflow runs in its worker
  threads; the baseline is ``asyncio.gather`` of ``loop.run_in_executor`` on a pool of as many threads as
  nbflow's cap (anyio's default limiter, 40). Ideal: one wait per wave of 40.

Efficiency = ideal wall time / measured wall time (1.0: the nodes cost nothing). nbflow and the baseline
are sampled in interleaved rounds in the same process, after warm-up runs (a sync node without
``thread=`` learns it is slow on its first calls); each figure is the median of the rounds.

Start times: each node notes when its call starts; per round, the time from the call to the last start of the
first wave (async: all N; sync: the first 40, then all N). What the goal asks ("start them as fast as a plain
``gather``") without the wait's own jitter (the OS wakes a sleep or a poll 0.1-1 ms late): on a loaded machine
the wall time moves by several % from round to round, the start times much less.

Head and tail: each node also notes when its wait is over; per round, the call to the first start ("head": the
run's own set-up), the last node's wait being due to the first end ("wake"), the first end to the last ("ends":
the completions, one after the other) and the last end to the call's return ("tail"). The loop polls for its first timer rounded up to
a whole ms, so with starts spread over less than 1 ms it wakes once, 20 ms after it went idle, and every
completion runs after that wake: wall = last start + wait + wake + ends + tail, and nothing a branch does is hidden in
the wait.

    python benchmarks/io_fanout.py [--n 50 500] [--wait 0.02] [--repeat 41] [--shapes async sync] [--json out.json]

Prints one line per (shape, N) and a summary line of nbflow's efficiency / the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextvars
import itertools
import json
import math
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import nbflow as nf

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # batch_ab: ``--before``

THREADS = 40  # nbflow's worker threads are capped by anyio's default thread limiter: the baseline's pool


def _sink_source(n: int, is_async: bool) -> Callable[..., Any]:
    """The sink, with one parameter per branch (a flow wires parameters by name)."""
    names = [f"m{i}" for i in range(n)]
    ns: dict[str, Any] = {}
    kw = "async " if is_async else ""
    exec(f"{kw}def sink({', '.join(names)}):\n    return {' + '.join(names)}", ns)
    sink: Callable[..., Any] = ns["sink"]
    return sink


def async_flow(
    n: int,
    wait: float,
    validate: bool = True,
    lib: Any = None,
    starts: list[float] | None = None,
    ends: list[float] | None = None,
) -> nf.Flow:
    nf = lib
    if nf is None:  # (here: fanout_memory.py's baseline process imports this module without nbflow)
        import nbflow as nf

    flow = nf.Flow(f"io_async_{n}", validate=validate)

    async def src() -> int:
        return 0

    flow.add(src, name="src")
    for i in range(n):

        async def mid(src: int) -> int:
            if starts is not None:
                starts.append(time.perf_counter())
            await asyncio.sleep(wait)
            if ends is not None:
                ends.append(time.perf_counter())
            return src + 1

        flow.add(mid, name=f"m{i}")
    flow.add(_sink_source(n, True), name="sink")
    return flow


def sync_flow(
    n: int, wait: float, lib: Any = None, starts: list[float] | None = None, ends: list[float] | None = None
) -> nf.Flow:
    nf = lib
    if nf is None:
        import nbflow as nf

    flow = nf.Flow(f"io_sync_{n}")

    def src() -> int:
        return 0

    flow.add(src, name="src")
    for i in range(n):

        def mid(src: int) -> int:
            if starts is not None:
                starts.append(time.perf_counter())
            time.sleep(wait)
            if ends is not None:
                ends.append(time.perf_counter())
            return src + 1

        flow.add(mid, name=f"m{i}")
    flow.add(_sink_source(n, False), name="sink")
    return flow


async def baseline_async(
    n: int, wait: float, starts: list[float] | None = None, ends: list[float] | None = None
) -> int:
    async def src() -> int:
        return 0

    async def mid(x: int) -> int:
        if starts is not None:
            starts.append(time.perf_counter())
        await asyncio.sleep(wait)
        if ends is not None:
            ends.append(time.perf_counter())
        return x + 1

    async def sink(*xs: int) -> int:
        return sum(xs)

    s = await src()
    outs = await asyncio.gather(*(mid(s) for _ in range(n)))
    return await sink(*outs)


async def _floor(n: int, mid: Callable[[int], Awaitable[int]]) -> int:
    """What a DAG engine cannot do without for a fan-out of ``n`` branches of ``mid``: a task per branch that
    keeps the branch's state record (status, start and end times, output) and counts down what its dependent
    waits for, the sink started when the count reaches 0 (no gather: the engine knows its dependents)."""
    loop = asyncio.get_running_loop()
    perf = time.perf_counter
    status = [0] * n  # 0 pending, 1 running, 2 succeeded
    started = [0.0] * n
    finished = [0.0] * n
    output: list[Any] = [None] * n
    left = [n]
    done = loop.create_future()

    async def branch(i: int, x: int) -> None:
        status[i] = 1
        started[i] = perf()
        try:
            out = await mid(x)
        except BaseException:
            status[i] = 3
            raise
        finished[i] = perf()
        output[i] = out
        status[i] = 2
        left[0] -= 1
        if not left[0]:
            done.set_result(None)

    s = 0  # the source
    tasks = [loop.create_task(branch(i, s)) for i in range(n)]  # (kept: cancelling the run cancels them)
    await done
    del tasks
    return sum(output)


class _Where:
    """What ``_floor_kept`` registers per branch: which run and node its task runs (nbflow's ``WorkerContext``)."""

    __slots__ = ("i", "run", "task")

    def __init__(self, run: object, i: int) -> None:
        self.run = run
        self.i = i
        self.task: Any = None


_NODE: contextvars.ContextVar[Any] = contextvars.ContextVar("node", default=None)
_ACTIVE: dict[Any, _Where] = {}


async def _floor_kept(n: int, mid: Callable[[int], Awaitable[int]]) -> int:
    """``_floor`` plus what nbflow keeps per branch beyond a state record: the node's inputs (a dict) and attempt
    marker, an object naming the branch's run and node, found by its task (``nf.ask``) and through a context
    variable (``nf.usage``, print capture, its threads), the run's set of tasks (cancel) and a count of those in
    flight; each entry removed as the branch ends. By hand, the cheapest way: nbflow's per-branch books at
    asyncio's own price (the line ``floor+``)."""
    loop = asyncio.get_running_loop()
    perf = time.perf_counter
    current = asyncio.current_task
    status = [0] * n
    started = [0.0] * n
    finished = [0.0] * n
    inputs: list[Any] = [None] * n
    attempts: list[Any] = [None] * n
    output: list[Any] = [None] * n
    left = [n]
    in_flight = [0]
    tasks: set[asyncio.Task[None]] = set()
    done = loop.create_future()
    run = object()

    async def branch(i: int, x: int, where: _Where) -> None:
        _NODE.set(where)
        task = where.task = current()
        _ACTIVE[task] = where
        kwargs = {"x": x}
        status[i] = 1
        inputs[i] = kwargs
        attempts[i] = 0
        started[i] = perf()
        try:
            out = await mid(kwargs["x"])
        except BaseException:
            status[i] = 3
            raise
        finally:
            in_flight[0] -= 1
            where.task = None
            _ACTIVE.pop(task, None)
            tasks.discard(task)  # type: ignore[arg-type]
        finished[i] = perf()
        output[i] = out
        status[i] = 2
        left[0] -= 1
        if not left[0]:
            done.set_result(None)

    s = 0
    for i in range(n):
        in_flight[0] += 1
        tasks.add(loop.create_task(branch(i, s, _Where(run, i))))
    await done
    return sum(output)


def _async_mid(wait: float, starts: list[float] | None, ends: list[float] | None) -> Callable[[int], Awaitable[int]]:
    """The floors' middle node: notes its start, awaits ``wait`` seconds, notes its end."""

    async def mid(x: int) -> int:
        if starts is not None:
            starts.append(time.perf_counter())
        await asyncio.sleep(wait)
        if ends is not None:
            ends.append(time.perf_counter())
        return x + 1

    return mid


async def floor_kept_async(
    n: int, wait: float, starts: list[float] | None = None, ends: list[float] | None = None
) -> int:
    return await _floor_kept(n, _async_mid(wait, starts, ends))


async def floor_async(n: int, wait: float, starts: list[float] | None = None, ends: list[float] | None = None) -> int:
    return await _floor(n, _async_mid(wait, starts, ends))


def floor_sync(pool: concurrent.futures.Executor, kept: bool = False) -> Callable[..., Awaitable[int]]:
    async def run(n: int, wait: float, starts: list[float] | None = None, ends: list[float] | None = None) -> int:
        def mid(x: int) -> int:
            if starts is not None:
                starts.append(time.perf_counter())
            time.sleep(wait)
            if ends is not None:
                ends.append(time.perf_counter())
            return x + 1

        loop = asyncio.get_running_loop()

        def call(x: int) -> Awaitable[int]:
            return loop.run_in_executor(pool, mid, x)

        return await (_floor_kept if kept else _floor)(n, call)

    return run


def baseline_sync(pool: concurrent.futures.Executor) -> Callable[..., Awaitable[int]]:
    async def run(n: int, wait: float, starts: list[float] | None = None, ends: list[float] | None = None) -> int:
        def src() -> int:
            return 0

        def mid(x: int) -> int:
            if starts is not None:
                starts.append(time.perf_counter())
            time.sleep(wait)
            if ends is not None:
                ends.append(time.perf_counter())
            return x + 1

        def sink(*xs: int) -> int:
            return sum(xs)

        loop = asyncio.get_running_loop()
        s = src()
        outs = await asyncio.gather(*(loop.run_in_executor(pool, mid, s) for _ in range(n)))
        return sink(*outs)

    return run


def _step(starts: list[float], k: int) -> float:
    """µs: the median gap between consecutive starts of the first wave's first ``k`` (from the second on: the
    first may start a loop turn earlier). Each gap is one node's hand-off and first step; the median leaves out
    the OS's pauses and the collector's, which the last start carries."""
    gaps = [b - a for a, b in itertools.pairwise(starts[1:k])]
    return statistics.median(gaps) * 1e6 if gaps else math.nan  # (nan: fewer than 3 starts, ``--n 1``)


def _head_tail(t0: float, t1: float, starts: list[float], ends: list[float], wait: float) -> list[float]:
    """One round's head and tail, in µs: the call to the first node's start ("head": the run's own set-up:
    ``Run``, plan, columns); the last node's wait being due (its start + ``wait``) to the first end after that
    ("wake": the loop's poll, rounded up to whole ms, the OS waking it, the timers' callbacks); that end to the
    last ("ends": the completions the last wake-up found, one after the other, but the last's books); the last
    end to the call's return ("tail": the last branch's books, the sink, the run's end). With the start times
    above: wall = last start + wait + wake + ends + tail."""
    due = starts[-1] + wait
    last = max(ends)
    first = min((e for e in ends if e >= due), default=last)
    return [(starts[0] - t0) * 1e6, (first - due) * 1e6, (last - first) * 1e6, (t1 - last) * 1e6]


def _columns(rounds: list[list[float]]) -> list[tuple[float, ...]]:
    """Per-round rows of figures -> one tuple per figure (over the rounds)."""
    return list(zip(*rounds, strict=True))


def _paired_columns(rounds: list[list[float]], base: list[list[float]]) -> list[float]:
    """Per figure: the median over the rounds of the round's figure / ``base``'s in the same round."""
    return [
        statistics.median(a / b for a, b in zip(col, ref, strict=True))
        for col, ref in zip(_columns(rounds), _columns(base), strict=True)
    ]


async def measure(
    ns: list[int], wait: float, repeat: int, shapes: list[str], before: Any = None
) -> list[dict[str, Any]]:
    import nbflow as nf

    pool = concurrent.futures.ThreadPoolExecutor(THREADS)
    starts: list[float] = []  # (each node's start time, by the clock of the round: see the module's docstring)
    ends: list[float] = []  # (each node's end: when its wait is over, before it returns)
    rows = []
    libs = {"nbflow": nf} if before is None else {"nbflow": nf, "before": before}
    for shape in shapes:
        for n in ns:
            make = async_flow if shape == "async" else sync_flow
            runs: dict[str, Callable[[], Awaitable[None]]] = {}
            for label, what in (
                ("baseline", baseline_async if shape == "async" else baseline_sync(pool)),
                ("floor", floor_async if shape == "async" else floor_sync(pool)),
                ("floor+", floor_kept_async if shape == "async" else floor_sync(pool, kept=True)),
            ):

                async def hand_run(what: Any = what, n: int = n) -> None:
                    assert await what(n, wait, starts, ends) == n

                runs[label] = hand_run
            for label, lib in libs.items():
                flow = make(n, wait, lib=lib, starts=starts, ends=ends)
                flow.graph  # compile outside the timing  # noqa: B018

                async def nbflow_run(flow: nf.Flow = flow, n: int = n, lib: Any = lib) -> None:
                    run = await flow.arun()
                    assert run.status is lib.RunStatus.SUCCEEDED, run
                    assert run["sink"] == n, run["sink"]

                runs[label] = nbflow_run
            for _ in range(3):  # warm-up: adapters, a sync node's learned placement, the worker threads
                for fn in runs.values():
                    await fn()
            ideal = wait * (1 if shape == "async" else math.ceil(n / THREADS))
            waves = [n] if shape == "async" else [min(n, THREADS), n]  # the k-th start that ends a wave
            samples: dict[str, list[float]] = {label: [] for label in runs}
            started: dict[str, list[list[float]]] = {label: [] for label in runs}  # per round: ms to each wave's end
            around: dict[str, list[list[float]]] = {label: [] for label in runs}  # per round: _head_tail
            for r in range(repeat):
                order = list(runs.items()) if r % 2 == 0 else list(runs.items())[::-1]
                for label, fn in order:
                    starts.clear()
                    ends.clear()
                    t0 = time.perf_counter()
                    await fn()
                    t1 = time.perf_counter()
                    samples[label].append(ideal / (t1 - t0))
                    starts.sort()
                    started[label].append([(starts[k - 1] - t0) * 1e3 for k in waves] + [_step(starts, waves[0])])
                    around[label].append(_head_tail(t0, t1, starts, ends, wait))
            row: dict[str, Any] = {"shape": shape, "n": n, "ideal_ms": ideal * 1e3, "waves": waves}
            for label, values in samples.items():
                row[label] = statistics.median(values)
                row[f"{label}_best"] = max(values)
                # Each round's own ratio, then their median: rounds share the machine's load.
                row[f"{label}_ratio"] = statistics.median(
                    v / b for v, b in zip(values, samples["baseline"], strict=True)
                )
                row[f"{label}_starts"] = [statistics.median(col) for col in _columns(started[label])]
                row[f"{label}_starts_ratio"] = _paired_columns(started[label], started["baseline"])
                row[f"{label}_around"] = [statistics.median(col) for col in _columns(around[label])]
            if before is not None:  # nbflow / before, paired by round (as ``_ratio`` is to the baseline)
                row["ab_ratio"] = statistics.median(
                    a / b for a, b in zip(samples["nbflow"], samples["before"], strict=True)
                )
                row["ab_starts_ratio"] = _paired_columns(started["nbflow"], started["before"])
                row["ab_around"] = [
                    statistics.median(a - b for a, b in zip(col, ref, strict=True))
                    for col, ref in zip(_columns(around["nbflow"]), _columns(around["before"]), strict=True)
                ]
            row["ratio"] = row["nbflow"] / row["baseline"]
            rows.append(row)
    pool.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[50, 500], help="fan-out widths")
    parser.add_argument("--wait", type=float, default=0.020, help="seconds each node waits")
    parser.add_argument("--repeat", type=int, default=41, help="interleaved rounds")
    parser.add_argument("--shapes", nargs="+", choices=["async", "sync"], default=["async", "sync"])
    parser.add_argument("--before", help="also measure nbflow at this git revision, in the same rounds")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        before = None
        if args.before:
            from batch_ab import import_before  # (its checkout of a revision as ``nbflow_before``)

            before = import_before(args.before, pathlib.Path(tmp))
        rows = asyncio.run(measure(args.n, args.wait, args.repeat, args.shapes, before))
    print(f"load average {os.getloadavg()[0]:.2f}; efficiency = ideal / measured wall time, median of {args.repeat}")
    labels = ["floor", "floor+", "nbflow"] + (["before"] if args.before else [])
    for r in rows:
        parts = "  ".join(
            f"{label} {r[label]:.3f} (best {r[label + '_best']:.3f}, /baseline {r[label + '_ratio']:.3f})"
            for label in labels
        )
        print(
            f"{r['shape']:>5} N={r['n']:<5} ideal {r['ideal_ms']:6.1f} ms  baseline {r['baseline']:.3f} "
            f"(best {r['baseline_best']:.3f})  {parts}"
        )
    print(
        "start times: median ms from the call to the k-th node's start (k ends a wave), then the median µs between"
        " two starts of the first wave (one node's hand-off and first step); /baseline paired by round"
    )
    for r in rows:
        parts = "  ".join(
            f"{label} "
            + ", ".join(
                f"{ms:.2f} (/baseline {x:.2f})"
                for ms, x in zip(r[f"{label}_starts"], r[f"{label}_starts_ratio"], strict=True)
            )
            for label in ["baseline", *labels]
        )
        print(f"{r['shape']:>5} N={r['n']:<5} k={r['waves']}, step  {parts}")
    print(
        "head and tail, median µs: the call to the first start; wake = the last node's wait due (start + wait) to"
        " the first end after it; ends = that end to the last; tail = the last end to the call's return"
        + ("; nbflow - before: paired by round" if args.before else "")
    )
    for r in rows:
        parts = "  ".join(
            f"{label} " + " / ".join(f"{x:.0f}" for x in r[f"{label}_around"]) for label in ["baseline", *labels]
        )
        ab = "  nbflow - before " + " / ".join(f"{x:+.0f}" for x in r["ab_around"]) if args.before else ""
        print(f"{r['shape']:>5} N={r['n']:<5} head / wake / ends / tail  {parts}{ab}")
    summary = ", ".join(f"{r['shape']} N={r['n']} {r['ratio']:.2f}x" for r in rows)
    print(f"summary: nbflow efficiency / hand-written gather efficiency: {summary}")
    floor = ", ".join(f"{r['shape']} N={r['n']} {r['floor'] / r['baseline']:.2f}x" for r in rows)
    print(f"floor (a task and a state record per branch, by hand) / gather: {floor}")
    kept = ", ".join(f"{r['shape']} N={r['n']} {r['floor+'] / r['baseline']:.2f}x" for r in rows)
    print(f"floor+ (the floor and nbflow's other per-branch books, by hand) / gather: {kept}")
    if args.before:
        ab = ", ".join(
            f"{r['shape']} N={r['n']} {r['nbflow'] / r['before']:.2f}x (paired {r['ab_ratio']:.3f}; "
            + "starts "
            + "/".join(f"{x:.3f}" for x in r["ab_starts_ratio"])
            + ")"
            for r in rows
        )
        print(
            f"nbflow / before ({args.before}), efficiency (paired: per round), starts (each wave's last, then the step): {ab}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
