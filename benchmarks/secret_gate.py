"""What the value-based redaction gate costs per stored row: a batch with ``store=`` while the process knows no
secret, 5 secrets (a usual environment: a few API keys) and 200 (a batch of per-row secrets), interleaved round
by round in the same process; and the batch without a store, to set the gate's cost against the store's own.

Rows carry text (a 300-character prompt; the nodes return text built from it), so every stored cell is
searched. CPU time of the process, the collector off while timing, median over rounds of the paired difference
(each round's batches ran back to back).

    python benchmarks/secret_gate.py [--rows 3000] [--rounds 5] [--keep none|all]

Goal: with a usual environment the gate adds a small fraction of what storing the row costs (< 25%).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import tempfile
import time
from typing import Any

import nbflow as nf
from nbflow._core import secrets

PROMPT = "Summarise the following customer message in one sentence, politely and without jargon. " * 4


def make_flow() -> Any:
    flow = nf.Flow("gate_bench")

    @flow.node
    async def prompt(x: int, text: str) -> str:
        return f"{text} #{x}"

    @flow.node
    async def call(prompt: str) -> str:
        await asyncio.sleep(0)
        return prompt.upper()[:200]

    @flow.node
    async def score(call: str) -> int:
        return len(call)

    return flow


def known(n: int) -> None:
    """The process knows exactly ``n`` secrets (none appears in the rows: the common case, nothing to replace)."""
    secrets._KNOWN.texts = frozenset(f"sk-bench-{i:04d}-Qx7LmZ2pV9" for i in range(n))
    secrets._KNOWN.version += 1


async def measure(n: int, rounds: int, keep: str = "none") -> dict[str, Any]:
    flow = make_flow()
    _ = flow.graph
    rows = [{"x": i, "text": PROMPT} for i in range(n)]
    sides = {"no_store": (0, False), "store_0": (0, True), "store_5": (5, True), "store_200": (200, True)}
    t: dict[str, list[float]] = {k: [] for k in sides}
    secrets.learn_environment()  # (then replaced by known(): the environment is not looked at again)
    secrets._KNOWN.environment = None
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for label, (count, store) in sides.items():
                known(count)
                secrets._KNOWN.environment = dict(os.environ._data)  # type: ignore[attr-defined]
                path = os.path.join(tmp, f"{label}-{r}.db") if store else None
                gc.collect()
                gc.disable()
                t0 = time.process_time()
                frame = await flow.abatch(rows, concurrency=100, progress=False, store=path, keep=keep)
                t[label].append(time.process_time() - t0)
                gc.enable()
                assert (frame["status"] == "succeeded").all()

    def paired(a: str, b: str) -> float:
        return statistics.median(x - y for x, y in zip(t[a], t[b], strict=True)) / n * 1e6

    store_cost = paired("store_0", "no_store")
    out = {
        "rows": n,
        "keep": keep,
        "store_adds_us_per_row": store_cost,
        "gate_5_adds_us_per_row": paired("store_5", "store_0"),
        "gate_200_adds_us_per_row": paired("store_200", "store_0"),
        "medians_s": {k: statistics.median(v) for k, v in t.items()},
        "load": os.getloadavg(),
    }
    out["gate_5_vs_store"] = out["gate_5_adds_us_per_row"] / store_cost if store_cost > 0 else float("nan")
    out["gate_200_vs_store"] = out["gate_200_adds_us_per_row"] / store_cost if store_cost > 0 else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", default="none", help="keep= of the batches ('all': every run's record is stored)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    result = asyncio.run(measure(args.rows, args.rounds, args.keep))
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
