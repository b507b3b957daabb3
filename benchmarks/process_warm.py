"""A process node's first call against its later ones, in the shapes users write.

A fresh interpreter per measurement imports pandas and numpy (as a notebook's first cell or a pipeline
module does), defines a two-node flow ``load`` (``--load`` seconds of I/O on the first run) → ``fit``
(``executor="process"``, pandas and numpy work on ``--rows`` rows), waits ``gap`` seconds, then runs it
four times. The first run's ``fit`` is timed as a user sees it: its wall time from when ``load`` finished
(waiting for a worker included); the later calls are the three runs after it.

Shapes (columns of the summary):

* ``script``: defined, then run at once (a script, the CLI, a notebook cell that defines and runs);
* ``notebook``: defined in one cell, run in a later one (``--gap`` seconds later, default 3: the user
  reads the cell's output and runs the next one);

and modes (rows):

* ``defined``: nbflow now: a process node's worker starts (in the background) when the node is defined;
* ``run start``: session 11: workers start when a run starts, overlapping the nodes upstream;
* ``none``: no warm-up: the first call starts its worker and imports there;
* ``direct``: the hand-written baseline: the same function called in the parent itself, first call vs
  later (what the code's own first use costs: pandas imports parts of itself lazily, e.g. for
  ``describe``; a thread node pays it too).

    python benchmarks/process_warm.py [--repeat 3] [--loads 0,0.4,8] [--gap 3] [--rows 2000] [--json out.json]

Prints first / median(later) for each shape, mode and upstream load (median of ``--repeat`` fresh
interpreters, run interleaved), the same ratio of the CPU time of the work itself (measured where it
runs: a loaded machine's scheduling noise left out), what the first call costs beyond the code's own first
use (``direct``: first - later), and a one-line summary of nbflow's ratios. ``--rows 1000000`` makes the node a small fit
(~0.2 s) rather than a few milliseconds of work.
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

    mode, load_s, gap, rows = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])

    def work(n: int) -> float:  # the CPU seconds of the work itself, wherever it runs
        t = time.process_time()
        frame = pd.DataFrame(np.arange(n * 3, dtype=float).reshape(n, 3))
        float(frame.describe().to_numpy().sum())
        return time.process_time() - t

    if mode == "direct":  # the hand-written baseline: the function in this process
        time.sleep(gap)
        times, cpu = [], []
        for _ in range(4):
            t = time.perf_counter()
            cpu.append(work(rows))
            times.append(time.perf_counter() - t)
        print(json.dumps([times, cpu]))
        raise SystemExit

    import nbflow._flow.flow as flow_module

    if mode in ("runstart", "none"):  # as before this session: nothing starts at definition
        flow_module._warm_defined = lambda funcs: None
    if mode == "none":  # as before session 11: nothing starts ahead at all
        flow_module._load_engine()
        flow_module.warm_pool = lambda graph, calls: None

    flow = nf.Flow("warm")
    first = [True]

    @flow.node
    def load(n: int) -> int:
        if first[0]:
            time.sleep(load_s)  # reading the data (the first run only: later runs time the warm worker)
            first[0] = False
        return n

    @flow.node(executor="process")
    def fit(load: int) -> float:
        return work(load)

    time.sleep(gap)  # the notebook shape: the next cell runs the flow
    times, cpu = [], []
    for _ in range(4):
        run = flow.run(n=rows, show=False)
        assert run.status == "succeeded", run.errors
        times.append(run.nodes["fit"].finished_at - run.nodes["load"].finished_at)  # wait + call, as a user waits
        cpu.append(run["fit"])
    print(json.dumps([times, cpu]))
    """
)

MODES = ("defined", "runstart", "none", "direct")
LABELS = {"defined": "at definition (now)", "runstart": "at run start (s11)", "none": "no warm-up", "direct": "direct"}


def measure(mode: str, load: float, gap: float, rows: int) -> list[list[float]]:
    """[wall seconds of the 4 calls, CPU seconds of the work in them]."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(load), str(gap), str(rows)],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loads", default="0,0.4,8", help="upstream seconds of the script shape (default 0,0.4,8)")
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between the defining and the running cell")
    parser.add_argument("--rows", type=int, default=2000, help="rows the process node works on (default 2000)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"a subset of {','.join(MODES)}")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    shapes = [(f"script, {float(x):g} s upstream", float(x), 0.0) for x in args.loads.split(",") if x]
    shapes.append((f"notebook, run {args.gap:g} s after defining", 0.0, args.gap))
    raw: dict[str, dict[str, list[list[list[float]]]]] = {s: {m: [] for m in modes} for s, _, _ in shapes}
    for _ in range(args.repeat):  # interleaved: a load spike hits every mode alike
        for shape, load, gap in shapes:
            for mode in modes:
                if mode == "direct" and shape != shapes[0][0]:
                    continue  # the function alone does not depend on the shape
                raw[shape][mode].append(measure(mode, load, gap, args.rows))
    print(
        f"process node ({args.rows} rows): first call / median of the 3 later calls "
        f"(fresh interpreter each, median of {args.repeat} rounds)"
    )
    summary = []
    ratios: dict[str, dict[str, float]] = {}

    def first_later(runs: list[list[float]]) -> tuple[float, float, float]:
        first = statistics.median(t[0] for t in runs)
        later = statistics.median(statistics.median(t[1:]) for t in runs)
        return first, later, statistics.median(t[0] / statistics.median(t[1:]) for t in runs)

    own = 0.0  # the code's own first-use cost (direct first - later): what a thread node pays too
    if raw[shapes[0][0]].get("direct"):
        first, later, _ = first_later([r[0] for r in raw[shapes[0][0]]["direct"]])
        own = first - later
    for shape, _, _ in shapes:
        print(f"  {shape}")
        for mode in modes:
            if not raw[shape][mode]:
                continue
            first, later, ratio = first_later([r[0] for r in raw[shape][mode]])
            cpu_ratio = first_later([r[1] for r in raw[shape][mode]])[2]
            ratios.setdefault(shape, {})[mode] = ratio
            extra = (
                "" if mode == "direct" else f"  beyond the code's own first use {(first - later - own) * 1000:7.1f} ms"
            )
            print(
                f"    {LABELS[mode]:20s} first {first * 1000:8.1f} ms  later {later * 1000:6.1f} ms  "
                f"ratio {ratio:7.2f}x  (the work's CPU time: {cpu_ratio:.2f}x){extra}"
            )
            if mode == "defined":
                summary.append(f"{shape}: {ratio:.2f}x")
    print("SUMMARY first/later with workers started at definition: " + "; ".join(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ratios": ratios, "times": raw}, f, indent=1)


if __name__ == "__main__":
    main()
