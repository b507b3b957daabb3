"""A fan-out of waiting nodes in CPU instructions (valgrind ``lackey``): nbflow against ``asyncio.gather``.

``io_fanout.py`` times how close a fan-out comes to the ideal wall time; this counts the work behind it, which the
machine's load cannot move. A child process runs one warm-up and then ``--runs`` runs of a flow (a source, ``--n``
``async def`` nodes that each sleep ``--wait`` seconds, a sink) or of a hand-written ``gather`` of as many such
coroutines; the same child with no measured run is subtracted, so what is left is the runs alone.

    python benchmarks/fanout_instructions.py [--n 500] [--runs 10] [--wait 0.002]

Needs ``valgrind`` (``apt-get install valgrind``); each child takes ~1-2 minutes under it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from typing import Any


def child(mode: str, n: int, runs: int, wait: float) -> None:
    """In the process valgrind runs: a warm-up run, then ``runs`` runs of nbflow's fan-out or of ``gather``."""
    if mode == "nbflow":
        import nbflow as nf

        flow = nf.Flow("fan", validate=False)

        @flow.node
        async def source(x: int) -> int:
            return x

        names = [f"b{k}" for k in range(n)]
        for name in names:

            async def branch(source: int) -> int:
                await asyncio.sleep(wait)
                return source

            flow.node(name=name)(branch)
        space: dict[str, Any] = {}
        exec("async def sink(" + ", ".join(names) + "):\n    return 0", space)
        flow.node(name="sink")(space["sink"])

        async def one() -> None:
            await flow.arun(x=1)

    else:

        async def waits(x: int) -> int:
            await asyncio.sleep(wait)
            return x

        async def one() -> None:
            await asyncio.gather(*(waits(1) for _ in range(n)))

    async def main() -> None:
        await one()
        for _ in range(runs):
            await one()

    asyncio.run(main())


def count(mode: str, n: int, runs: int, wait: float) -> int:
    """Instructions of a child (lackey's "guest instrs")."""
    cmd = ["valgrind", "--tool=lackey", "--basic-counts=yes", sys.executable, __file__, "--child", mode]
    cmd += [str(n), str(runs), str(wait)]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=False)
    found = re.search(r"guest instrs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run failed ({' '.join(cmd[-5:])}):\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mode, n, runs, wait = sys.argv[2:6]
        child(mode, int(n), int(runs), float(wait))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--wait", type=float, default=0.002)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit(
            "fanout_instructions.py counts instructions with valgrind: install it (apt-get install valgrind)"
        )
    per_run = {}
    for mode in ("gather", "nbflow"):
        whole = count(mode, args.n, args.runs, args.wait)
        base = count(mode, args.n, 0, args.wait)
        per_run[mode] = (whole - base) / args.runs
        print(
            f"{mode:7} {per_run[mode] / 1e6:7.2f} M instructions a run, {per_run[mode] / args.n / 1e3:6.1f} k a branch"
        )
    extra = (per_run["nbflow"] - per_run["gather"]) / args.n
    print(f"nbflow / gather: {per_run['nbflow'] / per_run['gather']:.3f}x ({extra / 1e3:+.1f} k instructions a branch)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
