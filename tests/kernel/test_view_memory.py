"""Memory: 2,000 displayed runs in a real kernel keep little more than 2,000 runs without views.

Each cell runs a 5-node flow whose nodes make sizeable intermediates (a 20,000-item list) and rebinds
``run``, as a user re-running cells does. Without views nothing keeps the old runs; with views each
view must not keep its run alive once the run is final (the view keeps its picture, not the data).
Goal (issue 18): at most 50 MiB more than without views.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

N = 2000
SETUP = """
import gc, json, os
import nbflow as nf

flow = nf.Flow("mem")

@flow.node
def load(i: int) -> list:
    return list(range(i, i + 20_000))

@flow.node
def double(load: list) -> list:
    return [x * 2 for x in load]

@flow.node
def total(double: list) -> int:
    return sum(double)

@flow.node
def label(total: int) -> str:
    return f"total {total}"

@flow.node
def done(label: str, total: int) -> dict:
    return {"label": label, "total": total}

def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

for i in range(20):  # warm up: caches, the graph's layout, imports
    run = flow.run(i=i, show=SHOW)
gc.collect()
base = rss_mib()
"""
REPORT = """
gc.collect()
from nbflow.widgets import RunView
import warnings
import ipywidgets
warnings.simplefilter("ignore", DeprecationWarning)
views = sum(1 for w in list(ipywidgets.Widget.widgets.values()) if isinstance(w, RunView))
live = sum(1 for o in gc.get_objects() if type(o).__name__ == "Run")
print(json.dumps({"grew": rss_mib() - base, "views": views, "widgets": len(ipywidgets.Widget.widgets), "runs": live}))
"""


def _grow(show: bool) -> dict[str, float]:
    cells = [SETUP.replace("SHOW", repr(show))]
    cells += [f"run = flow.run(i={i}, show={show!r})" for i in range(N)]
    cells.append(REPORT)
    nb = run_cells(cells, timeout=120)
    errors = [output_text(c) for c in nb.cells if "!" in output_text(c)]
    assert not errors, errors[:3]
    line = next(x for x in output_text(nb.cells[-1]).splitlines() if x.startswith("{"))
    return dict(json.loads(line))


def test_two_thousand_displayed_runs_keep_little_memory() -> None:
    without = _grow(False)
    shown = _grow(True)
    extra = shown["grew"] - without["grew"]
    print(
        f"without views: +{without['grew']:.1f} MiB; with {shown['views']:.0f} views: +{shown['grew']:.1f} MiB; "
        f"extra {extra:.1f} MiB; widgets alive {shown['widgets']:.0f}; runs alive {shown['runs']:.0f}"
    )
    assert shown["views"] >= N  # every run was displayed (a view per cell, none closed: all cells differ)
    assert shown["runs"] <= 5, shown  # the views did not keep the old runs (and their intermediates) alive
    assert extra <= 50, (without, shown)
