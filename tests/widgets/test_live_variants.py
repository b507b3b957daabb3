"""Live per-variant progress while a batch runs: one bar per grid combination, counts by status, then the explorer."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

import nbflow as nf
from tests.helpers import widget_comm

pytestmark = pytest.mark.anyio


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def gated_flow(gate: asyncio.Event) -> nf.Flow:
    flow = nf.Flow("variants_live")

    @flow.node
    async def answer(q: int, prompt: str) -> str:
        if q >= 4:  # the later rows wait until the test has looked at the bars mid-batch
            await gate.wait()
        if q == 7 and prompt == "steps":
            raise RuntimeError("judge crashed")
        return f"{prompt}:{q}"

    return flow


class Recorder:
    """A progress renderer (``progress=``) that also asks for the per-variant counts."""

    def __init__(self) -> None:
        self.counts: Any = None
        self.updates: list[list[dict[str, Any]]] = []
        self.closed: list[dict[str, Any]] | None = None
        self.explorer: Any = None

    def show_variants(self, counts: Any, explore: Any) -> None:
        self.counts, self.explore = counts, explore

    def update(self, state: nf.BatchProgress) -> None:
        if self.counts is not None:
            self.updates.append(self.counts())

    def close(self, state: nf.BatchProgress) -> None:
        if self.counts is not None:
            self.closed = self.counts()


def by_label(groups: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    return {g["label"]: {k: n for k, n in g["counts"].items() if n} for g in groups}


async def test_counts_per_variant_change_while_the_batch_runs() -> None:
    gate = asyncio.Event()
    rec = Recorder()
    rows = [{"q": i} for i in range(8)]
    task = asyncio.ensure_future(
        gated_flow(gate).abatch(rows, grid={"prompt": ["terse", "steps"]}, concurrency=4, progress=rec)
    )
    for _ in range(400):  # mid-batch: 8 rows done (q < 4), 4 waiting at the gate, 4 not started
        await asyncio.sleep(0.01)
        if rec.counts is not None and sum(g["counts"]["succeeded"] for g in rec.counts()) == 8:
            break
    await asyncio.sleep(0.6)  # at least two refreshes (4 a second) while the rows wait
    mid = by_label(rec.updates[-1])
    assert set(mid) == {"terse", "steps"}
    totals = {s: sum(v.get(s, 0) for v in mid.values()) for s in ("succeeded", "running", "pending", "failed")}
    assert totals == {"succeeded": 8, "running": 4, "pending": 4, "failed": 0}, mid
    gate.set()
    df = await task
    assert by_label(rec.closed or []) == {"terse": {"succeeded": 8}, "steps": {"succeeded": 7, "failed": 1}}
    assert len(df) == 16
    # the explorer it would show at the end is the explorer of this frame
    explorer = rec.explore()
    assert [p["label"] for p in explorer.table.progress] == ["terse", "steps"]


async def test_a_batch_without_a_grid_asks_for_no_variant_bars() -> None:
    gate = asyncio.Event()
    gate.set()
    rec = Recorder()
    await gated_flow(gate).abatch([{"q": 1, "prompt": "x"}], progress=rec)
    assert rec.counts is None


async def test_the_kernel_widget_draws_a_bar_per_variant_then_the_explorer(comm_log: list[Any]) -> None:
    from nbflow.widgets.batch_progress import BatchProgressWidget
    from nbflow.widgets.explorer import ExplorerView

    gate = asyncio.Event()
    widget = BatchProgressWidget(display=False)
    rows = [{"q": i, "api_key": "sk-SECRET-9"} for i in range(8)]
    task = asyncio.ensure_future(
        gated_flow(gate).abatch(rows, grid={"prompt": ["terse", "steps"]}, concurrency=4, progress=widget)
    )
    seen: list[str] = []
    for _ in range(500):
        await asyncio.sleep(0.01)
        if widget.variants is not None and widget.variants.value not in seen:
            seen.append(widget.variants.value)
        if any("running" in v and "succeeded" in v for v in seen) and len(seen) >= 2:
            break
    gate.set()
    await task
    final = widget.variants.value if widget.variants is not None else ""
    seen.append(final)
    assert len(set(seen)) >= 3  # the bars changed while the batch ran
    assert re.findall(r'<span style="min-width:90px;font-weight:600">(\w+)</span>', final) == ["terse", "steps"]
    assert "✓ 8 succeeded</code>" in final and "✓ 7 succeeded, ✗ 1 failed</code>" in final
    # one failed row of 8 is a thin patterned slice, not a red bar
    assert 'title="1 failed" style="width:12.500%;background:repeating-linear-gradient(45deg, #c92a2a' in final
    assert any("running" in v for v in seen[:-1]) and "running" not in final
    assert isinstance(widget.explorer, ExplorerView) and widget.explorer in widget.box.children
    assert widget.variants not in widget.box.children  # the explorer's own bars take their place
    assert widget.explorer.table.range_text == "1–16 of 16"
    assert "sk-SECRET" not in str(widget.explorer.table.rows) and "sk-SECRET" not in final


async def test_secret_named_grid_keys_are_masked_in_the_labels() -> None:
    gate = asyncio.Event()
    gate.set()
    rec = Recorder()
    await gated_flow(gate).abatch(
        [{"q": 1}],
        grid={"prompt": ["a"], "api_token": ["tok-SECRET-1", "tok-SECRET-2"]},
        labels=["api_token"],
        progress=rec,
    )
    labels = [g["label"] for g in rec.closed or []]
    assert labels == ["prompt=a, api_token=••••••#1", "prompt=a, api_token=••••••#2"], labels
    assert "SECRET" not in str(rec.explore().table.progress)
