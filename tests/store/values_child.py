"""A sweep whose rows share large upstream frames, and a child process that runs or reads it (values stored once).

python -m tests.store.values_child batch DB [DELAY]   # the 24-row sweep with store=DB (each row sleeps DELAY)
python -m tests.store.values_child read DB OUT        # every kept run of DB read back, pickled to OUT
"""

from __future__ import annotations

import pickle
import sys
import time

import numpy as np
import pandas as pd

import nbflow as nf

GRID = {"k": list(range(24))}
ROWS = [{"n": 40_000}]
DELAY = {"seconds": 0.0}


def make_flow(name: str = "shared_frames") -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def raw(n: int, seed: int = 0) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        frame = pd.DataFrame(rng.normal(size=(n, 6)), columns=list("abcdef"))
        frame["label"] = [f"r{i % 7}" for i in range(n)]
        return frame

    @flow.node
    def X_train(raw: pd.DataFrame) -> pd.DataFrame:
        return raw.iloc[: len(raw) * 3 // 4]

    @flow.node
    def X_test(raw: pd.DataFrame) -> pd.DataFrame:
        return raw.iloc[len(raw) * 3 // 4 :]

    @flow.node
    def score(X_train: pd.DataFrame, X_test: pd.DataFrame, k: int) -> float:
        time.sleep(DELAY["seconds"])
        return float(X_train["a"].head(k + 1).sum() - X_test["b"].head(k + 1).sum())

    @flow.node
    def spread(X_test: pd.DataFrame, k: int) -> float:
        return float(X_test["c"].std() * k)

    return flow


def main(argv: list[str]) -> None:
    mode, db = argv[0], argv[1]
    if mode == "batch":
        DELAY["seconds"] = float(argv[2]) if len(argv) > 2 else 0.0
        make_flow().batch(ROWS, grid=GRID, store=db, concurrency=2, progress=False)
    elif mode == "read":
        out: dict[str, dict[str, tuple[object, dict[str, object]]]] = {}
        with nf.BatchStore(db) as store:
            (batch,) = store.batches()
            for row in store.rows(batch["batch_id"]).values():
                run = nf.load_run(db, row.run_id)
                out[row.run_id] = {name: (rec.output, dict(rec.inputs)) for name, rec in run.nodes.items()}
        with open(argv[2], "wb") as f:
            pickle.dump(out, f)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
