"""Memory per run of a pandas pipeline with and without ``keep=``, against plain function calls.

A 6-step chain over a DataFrame of ``--rows`` rows (each step returns a new frame of the same size).
Plain calls hold one or two frames at a time (Python frees each intermediate when the next step has
it); a run's record holds every intermediate unless ``keep=`` says which outputs to keep.
Peak traced memory (tracemalloc) of one run, in MB, and its ratio to the plain calls.

    python benchmarks/pipeline_memory.py [--rows 1000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import tracemalloc
from typing import Any

import numpy as np
import pandas as pd

import nbflow as nf

STEPS = 6


def step(df: pd.DataFrame) -> pd.DataFrame:
    return df * 1.0001 + 1


def make_flow() -> nf.Flow:
    flow = nf.Flow("memory")

    @flow.node(thread=False)
    def load(rows: int) -> pd.DataFrame:
        rng = np.random.default_rng(0)
        return pd.DataFrame(rng.standard_normal((rows, 8)), columns=list("abcdefgh"))

    previous = "load"
    for i in range(STEPS):
        name = f"s{i}"

        def node(df: pd.DataFrame) -> pd.DataFrame:
            return step(df)

        flow.add(node, name=name, inputs={"df": previous}, thread=False)
        previous = name

    @flow.node(thread=False)
    def total(s5: pd.DataFrame) -> float:
        return float(s5.to_numpy().sum())

    return flow


def plain(rows: int) -> float:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.standard_normal((rows, 8)), columns=list("abcdefgh"))
    for _ in range(STEPS):
        df = step(df)
    return float(df.to_numpy().sum())


def peak(fn: Any) -> tuple[float, Any]:
    gc.collect()
    tracemalloc.start()
    result = fn()
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top / 1e6, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--json")
    args = parser.parse_args()
    flow = make_flow()
    base, expected = peak(lambda: plain(args.rows))
    full_mb, run = peak(lambda: flow.run(rows=args.rows, show=False))
    assert run["total"] == expected
    del run
    kept_mb, run = peak(lambda: flow.run(rows=args.rows, keep=["total"], show=False))
    assert run["total"] == expected
    frame_mb = args.rows * 8 * 8 / 1e6
    print(f"{args.rows:,} rows × 8 float columns ({frame_mb:.0f} MB a frame), {STEPS + 1} frames in the chain")
    print(f"plain calls: {base:.0f} MB peak")
    print(f"flow.run, no keep=: {full_mb:.0f} MB peak ({full_mb / base:.2f}× plain)")
    print(f"flow.run, keep=['total']: {kept_mb:.0f} MB peak ({kept_mb / base:.2f}× plain)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "plain_mb": base, "run_mb": full_mb, "keep_mb": kept_mb}, f, indent=2)


if __name__ == "__main__":
    main()
