"""Every row of a default batch opens (no store, no keep=): succeeded rows kept packed within nf.config.keep_memory;
rows past the budget are marked before they are opened and refuse saying how to keep them."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

import nbflow as nf


@pytest.fixture
def budget() -> Iterator[None]:
    before = nf.config.keep_memory
    yield
    nf.config.keep_memory = before


def shapes_flow() -> nf.Flow:
    """Fan-out and fan-in, an optional input left to its default, a flow input read by two nodes, a typed
    parameter whose check hands the node another object (int -> float), and a failing row."""
    flow = nf.Flow("every_row_opens")

    @flow.node
    def prompt(question: str, style: str = "terse") -> str:
        return f"[{style}] {question}"

    @flow.node
    async def answer(prompt: str, question: str) -> dict[str, Any]:
        if "boom" in question:
            raise ValueError(f"model refused {question}")
        return {"text": prompt.upper(), "tokens": [1, 2, 3]}

    @flow.node
    def length(answer: dict[str, Any]) -> int:
        return len(answer["text"])

    @flow.node
    def score(length: float, answer: dict[str, Any]) -> float:  # length arrives as an int: checked to a float
        return length / 10 + len(answer["tokens"])

    return flow


CASES = [{"question": f"q{i}" if i % 7 else f"boom {i}"} for i in range(28)]


def test_a_succeeded_row_of_a_default_batch_opens_as_the_whole_run_does() -> None:
    flow = shapes_flow()
    df = flow.batch(CASES, progress=False)
    whole = flow.batch(CASES, keep="all", progress=False)
    assert df.nbflow.openable().all()
    ok = df.index[df["status"] == "succeeded"]
    assert len(ok) == 24
    for i in ok:
        run, ref = df.nbflow.run(i), whole.nbflow.run(i)
        assert run.run_id == df.loc[i, "run_id"] and run.status is nf.RunStatus.SUCCEEDED
        assert run.inputs == ref.inputs == CASES[i]
        assert run.outputs == ref.outputs and run["score"] == df.loc[i, "score"]
        assert list(run.nodes) == list(ref.nodes)
        for name, rec in run.nodes.items():
            other = ref.nodes[name]
            assert rec.status is other.status is nf.NodeStatus.SUCCEEDED
            assert dict(rec.inputs) == dict(other.inputs), name  # rebuilt from the sources, or kept where checked
            assert len(rec.attempts) == 1 and rec.attempts[0].duration == rec.duration >= 0
            assert rec.started_at is not None and run.started_at <= rec.started_at <= rec.finished_at
        assert type(run.nodes["score"].inputs["length"]) is float  # the checked value, not the source's int
        assert run.nodes["answer"].inputs == {"prompt": f"[terse] q{i}", "question": f"q{i}"}
        assert run.duration is not None and run.duration >= 0
    # the failed rows keep their whole record, as keep="failed" always did
    failed = df[df["status"] == "failed"]
    assert "model refused boom 0" in failed.nbflow.traceback(0)
    assert failed.nbflow.run(0).nodes["score"].status is nf.NodeStatus.SKIPPED
    # a packed run displays as any other (its graph drawn) and its outputs are the frame's own objects
    run = df.nbflow.run(1)
    assert run.graph is flow.graph and "every_row_opens" in repr(run)
    assert df.nbflow.calls(1).empty  # (no model calls recorded in this flow)


def test_rows_past_the_budget_are_marked_before_they_are_opened_and_refuse_clearly(budget: None) -> None:
    flow = shapes_flow()
    nf.config.keep_memory = 6_000  # room for a few packed runs
    df = flow.batch(CASES, concurrency=1, progress=False)
    openable = df.nbflow.openable()
    assert openable.dtype == bool and list(openable.index) == list(df.index)
    assert openable[df["status"] == "failed"].all()  # failed rows are kept whole, outside the budget
    ok = df["status"] == "succeeded"
    kept, refused = openable[ok], ~openable[ok]
    assert kept.sum() >= 3 and refused.sum() >= 10
    first_refused = refused.idxmax()
    assert not openable[ok & (df.index > first_refused)].any()  # rows in order: the budget ran out once
    for i in df.index[ok & openable]:
        assert df.nbflow.run(i)["score"] == df.loc[i, "score"]
    with pytest.raises(nf.BatchError, match=r"was not kept.*keep_memory = 6,000 bytes.*store='runs.db'"):
        df.nbflow.run(first_refused)
    nf.config.keep_memory = 0  # nothing of the succeeded rows kept
    none = flow.batch(CASES, progress=False)
    assert list(none.nbflow.openable()) == list(none["status"] == "failed")


def test_an_explicit_keep_is_what_it_says(tmp_path: Any) -> None:
    flow = shapes_flow()
    failed = flow.batch(CASES, keep="failed", progress=False)
    assert list(failed.nbflow.openable()) == list(failed["status"] == "failed")
    with pytest.raises(nf.BatchError, match="keep='failed'"):
        failed.nbflow.run(1)
    assert flow.batch(CASES, keep="none", progress=False).nbflow.openable().sum() == 0
    stored = flow.batch(CASES, store=tmp_path / "runs.db", progress=False)  # keep="all": opens from the store
    assert stored.nbflow.openable().all()
    assert stored.nbflow.run(1)["score"] == stored.loc[1, "score"]


def test_the_budget_is_checked(budget: None) -> None:
    for bad in (-1, 1.5, True, "64MiB"):
        with pytest.raises(nf.ConfigError, match=r"keep_memory .*int >= 0"):
            nf.config.keep_memory = bad  # type: ignore[assignment]


def test_memory_per_row_of_a_default_batch_stays_far_below_a_kilobyte_over_the_frame() -> None:
    """What a row costs once the batch returned, beyond the frame itself (the benchmark measures 100,000 rows)."""
    flow = nf.Flow("keep_cost")

    @flow.node
    def prepare(question: str) -> str:
        return f"Q: {question}"

    @flow.node
    def score(prepare: str) -> float:
        return len(prepare) / 100

    n = 4_000
    cases = [{"question": f"question number {i}"} for i in range(n)]
    flow.batch(cases[:50], progress=False)  # imports and caches are not what a row costs
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        df = flow.batch(cases, concurrency=50, progress=False)
        flow.last_batch = None
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert df.nbflow.openable().all()
    frame = int(df.memory_usage(deep=True).sum())
    per_row = (held - frame) / n
    assert 0 < per_row < 1_024, f"{per_row:.0f} bytes per row beyond the frame's {frame / n:.0f}"


def test_runs_the_packed_form_cannot_hold_are_kept_whole_within_the_budget(budget: None) -> None:
    """A skipped branch (a router) and a map node: kept as whole runs, each at its estimated cost."""
    flow = nf.Flow("every_row_routes")

    @flow.router(branches=["big", "small"])
    def route(x: int) -> str:
        return "big" if x > 2 else "small"

    @flow.map(over="parts", branch="route.big")
    def big(parts: int) -> int:
        return parts * 2

    @flow.node(branch="route.small")
    def small(x: int) -> str:
        return "S"

    cases = [{"x": i, "parts": list(range(i))} for i in range(6)]
    df = flow.batch(cases, concurrency=1, progress=False)
    assert df.nbflow.openable().all()
    assert df.nbflow.run(1).nodes["big"].skip_reason == "branch 'big' of 'route' not taken"
    assert df.nbflow.run(4)["big"] == [0, 2, 4, 6] and len(df.nbflow.run(4).nodes["big"].items) == 4
    nf.config.keep_memory = 8_000  # two or three whole runs' estimate
    small_budget = flow.batch(cases, concurrency=1, progress=False)
    openable = small_budget.nbflow.openable()
    assert 1 <= openable.sum() < len(cases) and openable.iloc[0] and not openable.iloc[-1]
    with pytest.raises(nf.BatchError, match="keep_memory"):
        small_budget.nbflow.run(len(cases) - 1)


def test_every_attribute_a_run_holds_is_one_packing_checks() -> None:
    # Packing compares a finished run's class-level fields with their defaults (one getter) and trusts that every
    # other attribute the run holds of its own is one of ``_PLAIN_RUN``: an attribute that Run.__init__ (or the
    # engine) starts to set, that is neither, would go unchecked, and a run that differs there would be packed
    # without it.
    from nbflow._batch.runs import _PLAIN_RUN
    from nbflow._record.run import Run

    checked = {name for name in vars(Run) if not name.startswith("__")} | _PLAIN_RUN
    flow = nf.Flow("plain-attrs")

    @flow.node
    def a(x: int) -> int:
        return x + 1

    @flow.node
    async def b(a: int) -> int:
        return a * 2

    runs = [flow.run({"x": 1}), *(flow.batch([{"x": i} for i in range(3)], keep="all", progress=False).nbflow.runs())]
    for run in runs:
        assert run.status == "succeeded"
        assert set(vars(run)) <= checked, sorted(set(vars(run)) - checked)
