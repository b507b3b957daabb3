"""``tests/resources/values4_store.db``: a store written by nbflow at checkpoint schema 4 / batch schema 3 (commit
636f6bb, values stored once for node outputs and recorded inputs only): a batch of 4 rows sharing one input frame,
every run kept (the frame in each row's cells and in each run's inputs, written per row), and a map whose items are
frames (their records one state value per run, the frames inside it).

Regenerate (only with the nbflow that wrote checkpoint schema 4, i.e. commit 636f6bb)::

    NBFLOW_STORE_KEY=values4-fixture python -m tests.store.values4_flow tests/resources
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import nbflow as nf

NAME = "values4_store"
KEY = "values4-fixture"


def frame() -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(4)
    return pd.DataFrame(rng.normal(size=(300, 4)), columns=["a", "b", "c", "d"])


def make_flow() -> nf.Flow:
    import pandas as pd

    flow = nf.Flow("values4")

    @flow.map(over="seeds")
    def part(seeds: int, data: pd.DataFrame) -> pd.DataFrame:
        return data.iloc[seeds * 50 : (seeds + 1) * 50] * 2

    @flow.node
    def total(part: list, k: int) -> float:
        return round(float(sum(p.to_numpy().sum() for p in part)) + k, 6)

    return flow


ROWS = [{"data": None, "seeds": [0, 1, 2], "k": k} for k in range(4)]


def rows() -> list[dict[str, Any]]:
    data = frame()
    return [{**row, "data": data} for row in ROWS]


def main(folder: str) -> None:
    db = Path(folder) / f"{NAME}.db"
    db.unlink(missing_ok=True)
    out = make_flow().batch(rows(), store=db, keep="all", experiment="shared input", progress=False)
    assert (out["status"] == "succeeded").all(), out
    with nf.BatchStore(db) as store:
        store.gc()  # (VACUUM: the file as small as it gets)


if __name__ == "__main__":
    main(sys.argv[1])
