"""The flow of ``tests/resources/schema2_store.db``: a batch store written by nbflow before run records
became one blob per run (checkpoint schema 1, batch schema 2), with every run kept (``keep="all"``).

Regenerate (only with the nbflow that wrote checkpoint schema 1, i.e. before commit "one blob per run")::

    NBFLOW_STORE_KEY=schema2-fixture python -m tests.store.schema2_flow tests/resources
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import nbflow as nf

KEY = "schema2-fixture"  # NBFLOW_STORE_KEY the fixture's signed values were tagged with


def make_flow() -> nf.Flow:
    flow = nf.Flow("schema2_fixture")

    @flow.node
    def prep(x: int, api_key: str) -> dict:
        return {"x": x, "echo": f"called with {api_key}", "pair": [x, x * 2]}

    @flow.node
    async def call(prep: dict) -> float:
        if prep["x"] == 2:
            raise ValueError("row two fails on purpose")
        return prep["x"] / 4

    @flow.node
    async def review(call: float) -> str:
        if call == 0.75:
            return await nf.ask("Publish?", options=["yes", "no"], data={"score": call})
        return "auto"

    return flow


ROWS = [{"x": i, "api_key": f"sk-fixture-{i}-secret"} for i in range(5)]


class _Set(list):
    """A set's items in a fixed order, shown as the set is: a set's own order can differ after a round trip
    (it depends on the string hash seed and on the order its items were added), its repr with it."""

    kind = "set"

    def __repr__(self) -> str:
        if not self:
            return f"{self.kind}()"
        items = "{" + ", ".join(map(repr, self)) + "}"
        return items if self.kind == "set" else f"{self.kind}({items})"


def _canonical(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        out = _Set(sorted((_canonical(v) for v in value), key=repr))
        out.kind = type(value).__name__
        return out
    if type(value) is dict:
        return {k: _canonical(v) for k, v in value.items()}
    if type(value) is list:
        return [_canonical(v) for v in value]
    if type(value) is tuple:
        return tuple(_canonical(v) for v in value)
    return value


def describe(run: nf.Run) -> dict[str, Any]:
    """What a stored run holds, comparable across nbflow versions (JSON)."""
    nodes = {}
    for name, rec in sorted(run.nodes.items()):
        nodes[name] = {
            "status": rec.status.value,
            "output": repr(_canonical(rec.output)),
            "error_type": rec.error_type,
            "error_message": rec.error_message,
            "traceback": None if rec.traceback is None else rec.traceback.splitlines()[-1],
            "skip_reason": rec.skip_reason,
            "started_at": rec.started_at,
            "finished_at": rec.finished_at,
            "attempts": [[a.number, a.started_at, a.finished_at, repr(a.error), a.delay] for a in rec.attempts],
            "inputs": repr(sorted(_canonical(dict(rec.inputs)).items())),
            "cached": rec.cached,
            "recovered": rec.recovered,
        }
    return {
        "flow": run.flow,
        "status": run.status.value,
        "inputs": repr(sorted(_canonical(dict(run.inputs)).items())),
        "targets": repr(run.targets),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "reason": run.reason,
        "pending": sorted(run.pending),
        "nodes": nodes,
    }


def main(out: Path) -> None:
    path = out / "schema2_store.db"
    if path.exists():
        path.unlink()
    frame = make_flow().batch(ROWS, store=str(path), keep="all", progress=False)
    batch_id = frame.attrs["batch_id"]
    runs = {str(r): describe(nf.load_run(path, frame.loc[r, "run_id"], allow_pickle=True)) for r in frame.index}
    with nf.BatchStore(path, allow_pickle=True) as store:
        stored = store.load(batch_id)
    expected = {
        "batch_id": batch_id,
        "run_ids": {str(r): frame.loc[r, "run_id"] for r in frame.index},
        "statuses": {str(r): frame.loc[r, "status"] for r in frame.index},
        "frame": stored.astype(str).to_dict(orient="split"),
        "runs": runs,
    }
    (out / "schema2_store.json").write_text(json.dumps(expected, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
