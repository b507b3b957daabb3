"""``tests/resources/checkpoint2_store.db``: a store written by nbflow at checkpoint schema 2 / batch schema 3
(commit c4f77b2, before checkpoint schema 3), with the flow of ``schema2_flow.py``: a batch keeping every run
(``keep="all"``: succeeded rows stored as one record each, the failed row's run a row per node, a paused row),
and a paused ``flow.run(store=...)`` outside the batch (a header and a row per node); and a batch of a flow
without secret inputs (``make_plain_flow``), whose kept runs (succeeded, failed, paused) are one record each.

Regenerate (only with the nbflow that wrote checkpoint schema 2, i.e. commit c4f77b2)::

    NBFLOW_STORE_KEY=schema2-fixture python -m tests.store.checkpoint2_flow tests/resources
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbflow as nf
from tests.store import schema2_flow

NAME = "checkpoint2_store"
PLAIN_ROWS = [{"x": i} for i in range(4)]


def make_plain_flow() -> nf.Flow:
    flow = nf.Flow("checkpoint2_plain")

    @flow.node
    def prep(x: int) -> dict:
        return {"x": x, "pair": (x, -x), "tags": {"a", "b"}}  # a tuple and a set: built-in data, kept exactly

    @flow.node
    async def call(prep: dict) -> float:
        if prep["x"] == 1:
            raise ValueError("row one fails on purpose")
        return prep["x"] / 4

    @flow.node
    async def review(call: float) -> str:
        if call == 0.5:
            return await nf.ask("Publish?", options=["yes", "no"], data={"score": call})
        return "auto"

    return flow


def main(out: Path) -> None:
    path = out / f"{NAME}.db"
    if path.exists():
        path.unlink()
    flow = schema2_flow.make_flow()
    frame = flow.batch(schema2_flow.ROWS, store=str(path), keep="all", progress=False)
    batch_id = frame.attrs["batch_id"]
    single = flow.run(x=3, api_key="sk-single-run-secret", store=str(path))
    assert single.status is nf.RunStatus.PAUSED
    run_ids = {str(r): frame.loc[r, "run_id"] for r in frame.index}
    runs = {row: schema2_flow.describe(nf.load_run(path, run_id, allow_pickle=True)) for row, run_id in run_ids.items()}
    with nf.BatchStore(path, allow_pickle=True) as store:
        stored = store.load(batch_id)
    expected = {
        "batch_id": batch_id,
        "run_ids": run_ids,
        "statuses": {str(r): frame.loc[r, "status"] for r in frame.index},
        "frame": stored.astype(str).to_dict(orient="split"),
        "runs": runs,
        "single": {"run_id": single.run_id, "run": schema2_flow.describe(nf.load_run(path, single.run_id))},
    }
    plain = make_plain_flow().batch(PLAIN_ROWS, store=str(path), keep="all", progress=False)
    plain_ids = {str(r): plain.loc[r, "run_id"] for r in plain.index}
    expected["plain"] = {
        "batch_id": plain.attrs["batch_id"],
        "run_ids": plain_ids,
        "statuses": {str(r): plain.loc[r, "status"] for r in plain.index},
        "runs": {row: schema2_flow.describe(nf.load_run(path, run_id)) for row, run_id in plain_ids.items()},
    }
    (out / f"{NAME}.json").write_text(json.dumps(expected, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
