"""Memory a batch keeps for its rows' runs (keep=), against keep="none" in the same process.

    python benchmarks/batch_keep_memory.py [--rows 20000]

A 3-node flow (prepare -> answer -> score, plain sync and async nodes as users write them). Reports the
memory still held once the batch returned (tracemalloc, after a GC), per row, for keep="none" (the
frame alone), keep="failed" (5% of rows fail) and keep="all", and checks the bound: with keep="all"
and more rows than keep_limit, memory stops growing with the row count.
"""

from __future__ import annotations

import argparse
import gc
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    n = args.rows
    held(200, "all")  # warm-up: imports and caches are not what a kept run costs
    none = held(n, "none")
    failed = held(n, "failed")
    every = held(n, "all", limit=n)
    print(f"memory held after a {n:,}-row batch (MiB): keep='none' {none:.1f}, keep='failed' {failed:.1f}, "
          f"keep='all' {every:.1f}")
    print(f"per kept run: {(every - none) * 2**20 / n / 1024:.2f} KiB (keep='all', {n:,} runs); "
          f"keep='failed' adds {(failed - none) * 2**20 / max(n // 20, 1) / 1024:.2f} KiB per failed row")
    small = held(n, "all", limit=1_000)
    big = held(2 * n, "all", limit=1_000)
    print(f"bound: keep='all', keep_limit=1,000: {small:.1f} MiB at {n:,} rows, {big:.1f} MiB at {2 * n:,} rows "
          f"(the frame grows, the kept runs do not: ratio {big / small:.2f}x for 2x rows)")


if __name__ == "__main__":
    main()
