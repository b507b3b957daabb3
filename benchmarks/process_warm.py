"""A process node's first call against its later ones: workers warmed while the upstream nodes run.

A fresh interpreter per measurement runs a two-node pipeline ``load`` (``--load`` seconds of I/O) →
``fit`` (``executor="process"``, code that uses pandas and numpy, imported at the top of the flow's
module as a notebook or a pipeline module does). The first run's ``fit`` is timed as a user sees it
(its wall time from when ``load`` finished, waiting for a worker included), then three more runs.

    python benchmarks/process_warm.py [--repeat 3] [--load 0.4] [--json out.json]

Reports first / median(later) with the pool warmed at the run's start (nbflow's default) and with the
warm-up turned off (the same code as before it: the first call starts its worker and imports there).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import pandas as pd
    import nbflow as nf
    from nbflow._engine import executors

    if sys.argv[1] == "cold":
        import nbflow._flow.flow as flow_module
        flow_module._load_engine()
        flow_module.warm_pool = lambda graph, calls: None

    flow = nf.Flow("warm")

    @flow.node
    def load(n: int) -> int:
        time.sleep(float(sys.argv[2]))  # reading the data
        return n

    @flow.node(executor="process")
    def fit(load: int) -> float:
        frame = pd.DataFrame(np.arange(load * 3, dtype=float).reshape(load, 3))
        return float(frame.describe().to_numpy().sum())

    times = []
    for _ in range(4):
        run = flow.run(n=2000, show=False)
        assert run.status == "succeeded", run.errors
        rec = run.nodes["fit"]
        a = rec.attempts[-1]
        times.append(rec.finished_at - run.nodes["load"].finished_at)  # wait + call, as the user waits
    print(json.dumps(times))
    """
)


def measure(mode: str, load: float) -> list[float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(load)], capture_output=True, text=True, timeout=600, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--load", type=float, default=0.4, help="seconds the upstream node takes (default 0.4)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results: dict[str, list[float]] = {"warm": [], "cold": []}
    raw: dict[str, list[list[float]]] = {"warm": [], "cold": []}
    for _ in range(args.repeat):  # interleaved
        for mode in ("warm", "cold"):
            times = measure(mode, args.load)
            raw[mode].append(times)
            results[mode].append(times[0] / statistics.median(times[1:]))
    print(
        f"process node after {args.load:g} s upstream: first call / median of the 3 later calls "
        "(fresh interpreter each, median of rounds)"
    )
    for mode in ("warm", "cold"):
        first = statistics.median(t[0] for t in raw[mode])
        later = statistics.median(statistics.median(t[1:]) for t in raw[mode])
        label = "warmed at run start" if mode == "warm" else "no warm-up (before)"
        print(
            f"  {label:22s} first {first * 1000:7.1f} ms  later {later * 1000:6.1f} ms  "
            f"ratio {statistics.median(results[mode]):.2f}x"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ratios": results, "times": raw}, f, indent=1)


if __name__ == "__main__":
    main()
