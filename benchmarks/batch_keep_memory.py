"""Memory a batch keeps for its rows' runs (keep=), against keep="none" in the same process.

    python benchmarks/batch_keep_memory.py [--rows 20000]
    python benchmarks/batch_keep_memory.py --default [--rows 100000]

A 3-node flow (prepare -> answer -> score, plain sync and async nodes as users write them). Reports the
memory still held once the batch returned (tracemalloc, after a GC), per row, for keep="none" (the
frame alone), keep="failed" (5% of rows fail) and keep="all", and checks the bound: with keep="all"
and more rows than keep_limit, memory stops growing with the row count.

``--default``: the default keep= (every row openable: succeeded rows packed within nf.config.keep_memory),
without and with ``store=``, each in a fresh process: the memory held once the batch returned and the
peak while it ran, each beyond the frame's own size (``memory_usage(deep=True)``, measured in the same
run) per row, and how many rows open. The goal (issue 35): <= 1 KiB per row beyond the frame.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc

import nbflow as nf


def make_flow() -> nf.Flow:
    flow = nf.Flow("keep_memory")

    @flow.node
    def prepare(question: str) -> str:
        return f"Q: {question}"

    @flow.node
    async def answer(prepare: str, i: int) -> str:
        if i % 20 == 0:
            raise ValueError(f"refused {i}")
        return prepare.upper() * 3

    @flow.node
    def score(answer: str) -> float:
        return len(answer) / 100

    return flow


def held(rows: int, keep: str, limit: int = 10_000) -> float:
    flow = make_flow()
    cases = [{"question": f"question number {i}", "i": i} for i in range(rows)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    df = flow.batch(cases, keep=keep, keep_limit=limit, concurrency=50, progress=False)
    flow.last_batch = None
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(df) == rows
    del df
    return (after - before) / 2**20


def default_keep(rows: int, store: bool) -> str:
    """One default-keep batch of ``rows`` rows in this process: a line of figures (see ``--default``)."""
    flow = make_flow()
    flow.batch([{"question": "warm-up", "i": i + 1} for i in range(200)], progress=False)
    cases = [{"question": f"question number {i}", "i": i} for i in range(rows)]
    with tempfile.TemporaryDirectory() as folder:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        cpu = time.process_time()
        df = flow.batch(cases, concurrency=50, progress=False, store=os.path.join(folder, "runs.db") if store else None)
        cpu = time.process_time() - cpu
        flow.last_batch = None
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        frame = int(df.memory_usage(deep=True).sum())
        opens = int(df.nbflow.openable().sum())
        held, peak = after - before, peak - before
        del df
    return (
        f"{'store=' if store else 'no store'}: held {held / 2**20:.1f} MiB, frame {frame / 2**20:.1f} MiB -> "
        f"{(held - frame) / rows:.0f} B/row beyond the frame (peak {(peak - frame) / rows:.0f} B/row); "
        f"{opens:,} of {rows:,} rows open; {cpu / rows * 1e6:.0f} us CPU/row (with tracemalloc)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=None, help="20,000 (100,000 with --default)")
    parser.add_argument("--default", action="store_true", help="the default keep=, with and without store=")
    parser.add_argument("--one", choices=["store", "memory"], help=argparse.SUPPRESS)  # (a child process)
    args = parser.parse_args()
    if args.one:
        print(default_keep(args.rows, args.one == "store"), flush=True)
        return
    if args.default:
        n = args.rows or 100_000
        print(f"default keep=, a {n:,}-row batch (a fresh process each; goal: <= 1024 B/row beyond the frame)")
        for one in ("memory", "store"):
            command = [sys.executable, __file__, "--one", one, "--rows", str(n)]
            print("  " + subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip())
        return
    n = args.rows or 20_000
    held(200, "all")  # warm-up: imports and caches are not what a kept run costs
    none = held(n, "none")
    failed = held(n, "failed")
    every = held(n, "all", limit=n)
    print(
        f"memory held after a {n:,}-row batch (MiB): keep='none' {none:.1f}, keep='failed' {failed:.1f}, "
        f"keep='all' {every:.1f}"
    )
    print(
        f"per kept run: {(every - none) * 2**20 / n / 1024:.2f} KiB (keep='all', {n:,} runs); "
        f"keep='failed' adds {(failed - none) * 2**20 / max(n // 20, 1) / 1024:.2f} KiB per failed row"
    )
    small = held(n, "all", limit=1_000)
    big = held(2 * n, "all", limit=1_000)
    print(
        f"bound: keep='all', keep_limit=1,000: {small:.1f} MiB at {n:,} rows, {big:.1f} MiB at {2 * n:,} rows "
        f"(the frame grows, the kept runs do not: ratio {big / small:.2f}x for 2x rows)"
    )


if __name__ == "__main__":
    main()
