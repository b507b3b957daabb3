"""What ``import nbflow`` costs: wall time and memory, in fresh interpreters, against ``import asyncio``.

The baseline is what a hand-written asyncio DAG imports (``asyncio``). Each sample is a new
process; time is measured inside it around the import, memory as the growth of peak RSS.
``import nbflow`` loads its public names on first use, so the benchmark also measures the first
use, ``import nbflow; nbflow.Flow``, and the honest figure for a notebook, "define a flow":
``nf.Flow("x")``, a sync and an async node with type hints and one without, the compiled graph
(``flow.graph``, ``flow.inputs``) and the text drawing (``repr(flow)``, what ``text/plain`` shows).
The engine (asyncio, anyio, the scheduler, events, policies, fingerprinting) is imported by the first
run, not by defining a flow; tests/test_import_cost.py pins what defining a flow must not load.

Cold start (issue 35): "first run" is a script's first ``flow.run`` of a two-node flow with type hints,
from ``import nbflow`` to its result; its baseline is ``import pydantic`` and one ``TypeAdapter``
validating a value (what a script that checks types with pydantic pays at least), in the same run.

    python benchmarks/import_cost.py [--repeat 9] [--only-first-run]

Goals: import nbflow, and defining a flow, <= 70 ms and <= 7 MiB on an idle machine (over a bare
interpreter), with ``import asyncio`` (what a hand-written DAG imports) measured in the same run; the
first run <= 1.2x ``import pydantic`` + one ``TypeAdapter``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_PROBE = """
import resource, time
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
{module}
t = time.perf_counter() - t0
print(t, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - r0) / 1024)
"""


# As users import it: from bytecode caches. With PYTHONDONTWRITEBYTECODE set (some containers do),
# every module edited since its cache was written is compiled again on each import (measured here:
# 67 modules, ~0.3 s), which is not what import costs; the first sample writes the caches.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


# Defining a flow as a notebook does, up to its text drawing; no run.
DEFINE = """
import nbflow as nf
from nbflow._show.draw import text_graph
flow = nf.Flow("x")
@flow.node
def load(path: str) -> list[int]:
    return [len(path)]
@flow.node
async def score(load: list[int], scale: float = 1.0) -> float:
    return sum(load) * scale
@flow.node
def report(score, load):
    return f"{score} {len(load)}"
flow.graph, flow.inputs
text = repr(flow) + text_graph(flow.graph)
"""


# A script's first run of a two-node flow, and its baseline: pydantic and one TypeAdapter.
FIRST_RUN = """
import nbflow as nf
flow = nf.Flow("cold")
@flow.node
def double(x: int) -> int:
    return 2 * x
@flow.node
def inc(double: int) -> int:
    return double + 1
assert flow.run(x=1)["inc"] == 3
"""
PYDANTIC = """
import pydantic
assert pydantic.TypeAdapter(int).validate_python(1) == 1
"""


def sample(module: str) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module)], capture_output=True, text=True, check=True, env=_ENV
    )
    t, mib = out.stdout.split()
    return float(t), float(mib)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--only-first-run", action="store_true", help="the cold start and its baseline only")
    args = parser.parse_args()
    res: dict[str, list[tuple[float, float]]] = {}
    if not args.only_first_run:
        res.update({"import asyncio": [], "import nbflow": [], "import nbflow; nbflow.Flow": [], "define a flow": []})
    res.update({"pydantic + a TypeAdapter": [], "first run (two nodes)": []})
    scripts = {"define a flow": DEFINE, "pydantic + a TypeAdapter": PYDANTIC, "first run (two nodes)": FIRST_RUN}
    code = {m: scripts.get(m, m) for m in res}
    for module in res:
        sample(code[module])  # writes the bytecode caches; not counted
    for _ in range(args.repeat):  # interleaved: machine noise hits both alike
        for module in res:
            res[module].append(sample(code[module]))
    med = {m: (statistics.median(t for t, _ in v), statistics.median(x for _, x in v)) for m, v in res.items()}
    print(
        f"import cost, median of {args.repeat} fresh interpreters "
        f"(goal: import nbflow and defining a flow <= 70 ms, <= 7 MiB)"
    )
    for what, (t, mib) in med.items():
        base = (
            "import asyncio"
            if what in ("import asyncio", "import nbflow", "import nbflow; nbflow.Flow", "define a flow")
            else "pydantic + a TypeAdapter"
        )
        if base in med:
            print(f"  {what:<27} {t * 1e3:7.1f} ms  +{mib:5.1f} MiB peak RSS   ({t / med[base][0]:.2f}x {base})")
    first, pyd = med["first run (two nodes)"][0], med["pydantic + a TypeAdapter"][0]
    print(
        f"cold start: first run {first * 1e3:.1f} ms = {first / pyd:.2f}x import pydantic + a TypeAdapter "
        f"({pyd * 1e3:.1f} ms; goal <= 1.2x)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(med, f, indent=2)


if __name__ == "__main__":
    main()
