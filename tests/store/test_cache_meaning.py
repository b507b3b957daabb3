"""The cache follows meaning, not text: cosmetic edits re-run nothing, an identical-output edit
re-runs only the edited node, a global DataFrame is part of the key, the memory cache is bounded."""

from __future__ import annotations

import linecache
from collections import Counter
from itertools import count
from typing import Any

import numpy as np
import pandas as pd

import nbflow as nf

_cells = count()


def cell(source: str, namespace: dict[str, Any]) -> None:
    """Run ``source`` as a notebook cell does: its text findable by inspect.getsource (IPython's linecache)."""
    filename = f"<nbflow-test-cell-{next(_cells)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)


PIPELINE = """
@flow.node
def load(n: int) -> pd.DataFrame:
    calls["load"] += 1
    return pd.DataFrame({"x": range(n)})

@flow.node
def clean(load: pd.DataFrame) -> pd.DataFrame:
    calls["clean"] += 1
    return load[load["x"] % 2 == 0].reset_index(drop=True)

@flow.node
def features(clean: pd.DataFrame) -> pd.DataFrame:
    calls["features"] += 1
    return clean.assign(y=clean["x"] * 2)

@flow.node
def report(features: pd.DataFrame) -> int:
    calls["report"] += 1
    return int(features["y"].sum())
"""

CLEAN_COSMETIC = '''
@flow.node
def clean(load: pd.DataFrame) -> pd.DataFrame:
    """Keep the even rows."""
    calls["clean"] += 1   # counted

    # a comment, and other formatting
    return load[ load["x"] % 2 == 0 ].reset_index(
        drop=True,
    )
'''

CLEAN_SAME_OUTPUT = """
@flow.node
def clean(load: pd.DataFrame) -> pd.DataFrame:
    calls["clean"] += 1
    even = load["x"].to_numpy() % 2 == 0  # another way to the same rows
    return load.loc[even].reset_index(drop=True)
"""

CLEAN_REAL_CHANGE = """
@flow.node
def clean(load: pd.DataFrame) -> pd.DataFrame:
    calls["clean"] += 1
    return load[load["x"] % 3 == 0].reset_index(drop=True)
"""


def pipeline() -> tuple[nf.Flow, dict[str, Any], Counter[str]]:
    calls: Counter[str] = Counter()
    ns: dict[str, Any] = {"flow": nf.Flow("meaning", cache=True), "pd": pd, "calls": calls}
    cell(PIPELINE, ns)
    return ns["flow"], ns, calls


def test_a_docstring_comment_or_formatting_edit_reruns_nothing():
    flow, ns, calls = pipeline()
    first = flow.run(n=100, show=False)
    cell(CLEAN_COSMETIC, ns)
    calls.clear()
    again = flow.run(n=100, show=False)
    assert calls == Counter()
    assert all(r.cached for r in again.nodes.values())
    assert again["report"] == first["report"]


def test_an_edit_with_identical_output_reruns_only_the_edited_node():
    flow, ns, calls = pipeline()
    first = flow.run(n=100, show=False)
    cell(CLEAN_SAME_OUTPUT, ns)
    calls.clear()
    again = flow.run(n=100, show=False)
    assert calls == Counter(clean=1)
    assert {n: r.cached for n, r in again.nodes.items()} == {
        "load": True,
        "clean": False,
        "features": True,
        "report": True,
    }
    assert again["report"] == first["report"]


def test_a_real_edit_reruns_the_node_and_what_its_new_output_feeds():
    flow, ns, calls = pipeline()
    first = flow.run(n=100, show=False)
    cell(CLEAN_REAL_CHANGE, ns)
    calls.clear()
    again = flow.run(n=100, show=False)
    assert calls == Counter(clean=1, features=1, report=1)
    assert again["report"] != first["report"]


def test_a_global_dataframe_the_node_reads_is_part_of_its_key():
    calls: Counter[str] = Counter()
    ns: dict[str, Any] = {"flow": nf.Flow("global_df", cache=True), "pd": pd, "calls": calls}
    ns["PRICES"] = pd.DataFrame({"p": [1.0, 2.0]})
    cell(
        """
@flow.node
def total(qty: int) -> float:
    calls["total"] += 1
    return float(PRICES["p"].sum() * qty)
""",
        ns,
    )
    flow = ns["flow"]
    assert flow.run(qty=2, show=False)["total"] == 6.0
    assert flow.run(qty=2, show=False).nodes["total"].cached
    ns["PRICES"].loc[0, "p"] = 10.0  # changed in place, in another cell
    run = flow.run(qty=2, show=False)
    assert not run.nodes["total"].cached and run["total"] == 24.0
    ns["PRICES"] = pd.DataFrame({"p": [10.0, 2.0]})  # a new object with the same content: a hit
    assert flow.run(qty=2, show=False).nodes["total"].cached
    assert calls["total"] == 2


def test_the_memory_cache_is_bounded_least_recently_used_first():
    cache = nf.NodeCache(max_bytes=3_000_000)  # ~3 frames of 0.8 MB
    flow = nf.Flow("bounded", cache=cache)

    @flow.node
    def frame(seed: int) -> pd.DataFrame:
        return pd.DataFrame({"v": np.full(100_000, float(seed))})

    for seed in range(3):
        flow.run(seed=seed, show=False)
    assert len(cache) == 3 and cache.nbytes <= 3_000_000
    assert flow.run(seed=0, show=False).nodes["frame"].cached  # 0 is now the most recently used
    flow.run(seed=3, show=False)  # over the bound: 1, the least recently used, goes
    assert len(cache) == 3 and cache.nbytes <= 3_000_000
    assert flow.run(seed=0, show=False).nodes["frame"].cached
    assert not flow.run(seed=1, show=False).nodes["frame"].cached


def test_entries_of_replaced_code_are_dropped_from_memory():
    flow, ns, _ = pipeline()
    for n in (10, 20, 30):
        flow.run(n=n, show=False)
    cache = flow.cache
    assert cache is not None
    before = len(cache)
    cell(CLEAN_REAL_CHANGE, ns)
    flow.run(n=10, show=False)
    # clean's three old entries are gone, its one new entry stored (features/report for n=10 re-ran too)
    assert len(cache) == before - 3 + 1 + 2


def test_a_bad_bound_is_refused():
    import pytest

    with pytest.raises(nf.FlowDefinitionError, match="max_bytes"):
        nf.NodeCache(max_bytes=0)


def test_a_file_cache_stores_dataframes_as_parquet_and_reads_them_back_exactly(tmp_path):
    import sqlite3

    path = tmp_path / "cache.db"
    flow = nf.Flow("parquet_cache", cache=str(path))

    @flow.node
    def frame(n: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "x": np.arange(n, dtype="int64"),
                "y": np.linspace(0, 1, n),
                "name": [f"row{i}" for i in range(n)],
                "kind": pd.Categorical(["a", "b"] * (n // 2)),
            },
            index=pd.RangeIndex(10, 10 + n, name="id"),
        )

    @flow.node
    def mixed(n: int) -> pd.DataFrame:
        return pd.DataFrame({"obj": [{"k": i} for i in range(n)]})  # not a parquet column: pickled

    first = flow.run(n=4, show=False)
    db = sqlite3.connect(path)
    blobs = dict(db.execute("SELECT node, value FROM node_cache").fetchall())
    db.close()
    assert blobs["frame"][:4] == b"NBPQ" and blobs["frame"][6:10] == b"PAR1"
    assert blobs["mixed"][:4] == b"NBS1"  # a pickle, signed with the store key (not parquet)
    run = flow.run(n=4, show=False)
    assert run.nodes["frame"].cached and run.nodes["mixed"].cached
    pd.testing.assert_frame_equal(run["frame"], first["frame"])
    assert run["mixed"]["obj"].tolist() == [{"k": i} for i in range(4)]


def test_a_factorys_closure_settings_are_part_of_the_key_its_state_is_not(tmp_path):
    """A node made by a factory (``make(threshold)``, nbflow.scorers) keeps its settings in its closure: a new
    setting is a miss (before, the cache returned the old setting's result). A list the node appends to, a
    ``nonlocal`` counter, stay state: the second call with the same setting is a hit."""
    seen: list[str] = []

    def make(threshold: float, words: tuple[str, ...]) -> nf.Flow:
        flow = nf.Flow("factory", cache=str(tmp_path / "cache.db"))  # one file: the flows share it
        hits = 0

        @flow.node
        def passed(score: float) -> str:
            nonlocal hits
            hits += 1
            seen.append(f"{score}>={threshold}")
            return words[int(score >= threshold)]

        return flow

    low = make(0.5, ("no", "yes"))
    assert low.run(score=0.7).outputs["passed"] == "yes"
    assert low.run(score=0.7).outputs["passed"] == "yes" and len(seen) == 1  # a hit: the counters did not count
    assert make(0.9, ("no", "yes")).run(score=0.7).outputs["passed"] == "no"  # a new threshold: a miss
    assert make(0.5, ("nein", "ja")).run(score=0.7).outputs["passed"] == "ja"  # new words: a miss
    assert make(0.5, ("no", "yes")).run(score=0.7).outputs["passed"] == "yes" and len(seen) == 3  # a hit again
