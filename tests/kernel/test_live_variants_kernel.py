"""Live per-variant progress of a batch in a real ipykernel: the bars change while rows run, then the explorer."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest

from tests.helpers.raw_kernel import Kernel

pytestmark = pytest.mark.kernel

SETUP = """
import asyncio, nbflow as nf
import nbflow.widgets, nbflow.widgets.explorer
flow = nf.Flow("live")

@flow.node
async def answer(q: int, prompt: str) -> str:
    await asyncio.sleep(0.4)
    if q % 10 == 3 and prompt == "steps":
        raise RuntimeError("judge crashed")
    return f"{prompt}:{q}"
"""

BATCH = """
df = await flow.abatch([{"q": i} for i in range(24)], grid={"prompt": ["terse", "steps"]}, concurrency=4)
print(df["status"].value_counts().to_dict())
"""


def test_the_bars_update_per_variant_while_the_batch_runs_then_the_explorer_shows() -> None:
    kernel = Kernel()
    try:
        assert "Error" not in kernel.run(SETUP, str(uuid.uuid4()), timeout=180)
        bars: list[tuple[float, str]] = []  # (when, the variants HTML) as the front end received them
        models: dict[str, dict[str, Any]] = {}  # comm id -> the widget model's state, updates merged

        def on_msg(msg: dict[str, Any]) -> None:
            if msg["msg_type"] not in ("comm_open", "comm_msg"):
                return
            state = (msg["content"].get("data") or {}).get("state") or {}
            models.setdefault(msg["content"]["comm_id"], {}).update(state)
            value = state.get("value")
            if isinstance(value, str) and "nbflow-variants" in value:
                bars.append((time.monotonic(), value))

        t0 = time.monotonic()
        out = kernel.run(BATCH, str(uuid.uuid4()), timeout=300, on_msg=on_msg)
        wall = time.monotonic() - t0
        # The blocking form runs the batch on nbflow's loop thread: the same bars, then the explorer.
        blocking_models: dict[str, dict[str, Any]] = {}

        def on_blocking(msg: dict[str, Any]) -> None:
            if msg["msg_type"] in ("comm_open", "comm_msg"):
                state = (msg["content"].get("data") or {}).get("state") or {}
                blocking_models.setdefault(msg["content"]["comm_id"], {}).update(state)

        blocking = kernel.run(BATCH.replace("await flow.abatch", "flow.batch"), str(uuid.uuid4()), 300, on_blocking)
    finally:
        kernel.close()
    assert "{'succeeded': 45, 'failed': 3}" in out, out
    values = [v for _, v in bars]
    assert len(set(values)) >= 4, f"the bars changed {len(set(values))} times in {wall:.1f}s"

    def counts(html: str) -> list[str]:
        return re.findall(r'<code style="white-space:nowrap">([^<]*)</code>', html)

    # while it ran: both variants drawn, rows running and pending, done counts growing
    mid = [counts(v) for v in values if "running" in v]
    assert mid and all(len(c) == 2 for c in mid)
    done = [sum(int(n) for n in re.findall(r"(\d+) (?:succeeded|failed)", ", ".join(c))) for c in mid]
    assert done == sorted(done) and done[-1] > done[0]
    final = counts(values[-1])
    assert final == ["✓ 24 succeeded", "✓ 21 succeeded, ✗ 3 failed"], final
    labels = re.findall(r'<span style="min-width:90px;font-weight:600">(\w+)</span>', values[-1])
    assert labels == ["terse", "steps"]
    # then the results explorer, in the same display: its table model with the 48 rows
    tables = [s for s in models.values() if "rows" in s and "progress" in s and "range_text" in s]
    assert tables and tables[-1]["range_text"] == "1–48 of 48"
    assert [p["label"] for p in tables[-1]["progress"]] == ["terse", "steps"]
    assert "{'succeeded': 45, 'failed': 3}" in blocking, blocking
    bars_b = [m["value"] for m in blocking_models.values() if "nbflow-variants" in str(m.get("value", ""))]
    assert bars_b and "✓ 21 succeeded, ✗ 3 failed" in bars_b[-1]
    tables_b = [m for m in blocking_models.values() if "range_text" in m]
    assert tables_b and tables_b[-1]["range_text"] == "1–48 of 48"
