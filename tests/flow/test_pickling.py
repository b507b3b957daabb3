"""Pickling a Flow sends its definition only (what Dask workers receive); import nbflow never imports Dask."""

from __future__ import annotations

import pickle
import subprocess
import sys

import nbflow as nf

LIMIT = nf.Limit(max_concurrency=2, per_second=5.0, burst=3)
FLOW = nf.Flow("pickled", retry=2, concurrency=3, limits={"llm": LIMIT}, cache=True)


@FLOW.node(uses="llm", timeout=5)
def double(x: int) -> int:
    return 2 * x


@FLOW.node(cache=False)
async def plus(double: int, k: int = 1) -> int:
    return double + k


OUTER = nf.Flow("pickled-outer")
OUTER.add(FLOW, name="inner")


def test_a_pickled_flow_is_its_definition_with_fresh_limits_and_caches() -> None:
    assert FLOW.run(x=1, show=False).outputs == {"double": 2, "plus": 3}
    copy = pickle.loads(pickle.dumps(FLOW))
    assert copy is not FLOW and copy.name == "pickled"
    assert list(copy.nodes) == ["double", "plus"] and copy.nodes["double"].func is double
    assert (copy.retry, copy.concurrency, copy.validate) == (FLOW.retry, 3, True)
    new = copy.limits["llm"]
    assert new is not LIMIT
    assert (new.max_concurrency, new.rate, new.burst) == (2, 5.0, 3)
    assert copy.cache is not None and copy.cache is not FLOW.cache and len(copy.cache) == 0
    assert copy.last_run is None and copy.last_batch is None
    assert copy.run(x=2, k=5, show=False).outputs == {"double": 4, "plus": 9}


def test_a_copy_does_not_take_over_the_original_for_resuming() -> None:
    from nbflow._core.registry import _FLOWS

    copy = pickle.loads(pickle.dumps(FLOW))
    assert _FLOWS["pickled"] is FLOW and copy is not FLOW


def test_sub_flows_travel_with_their_parent_by_cloudpickle() -> None:
    import cloudpickle

    copy = pickle.loads(cloudpickle.dumps(OUTER))
    run = copy.run(x=3, show=False)
    assert run.outputs == {"inner": {"plus": 7}}


def test_import_nbflow_does_not_import_dask() -> None:
    code = "import sys, nbflow; print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
