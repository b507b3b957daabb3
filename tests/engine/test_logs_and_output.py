"""nbflow's own logging records, and what a node printed, logged and warned, kept per attempt."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import warnings
from pathlib import Path

import pytest

import nbflow as nf

SECRET = "sk-live-4242abcd"


def failing_flow() -> nf.Flow:
    flow = nf.Flow("logs")

    @flow.node
    def load(n: int) -> int:
        return n

    @flow.node
    def fit(load: int, api_key: str) -> int:
        raise ValueError(f"model refused key {api_key}")

    return flow


def test_run_start_finish_and_node_failure_are_records_of_the_nbflow_loggers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nbflow")
    run = failing_flow().run(n=1, api_key=SECRET)
    records = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("nbflow")]
    assert records[0] == ("nbflow.run", "INFO", f"run {run.run_id} of flow 'logs' started (2 nodes)")
    assert (
        "nbflow.node",
        "WARNING",
        f"node 'fit' of run {run.run_id} (flow 'logs') failed: ValueError: model refused key [REDACTED]",
    ) in records
    last = records[-1]
    assert last[:2] == ("nbflow.run", "WARNING") and "failed in" in last[2] and "node(s) 'fit' failed" in last[2]
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    fail = next(r for r in caplog.records if r.name == "nbflow.node")
    assert fail.nbflow_run == run.run_id and fail.nbflow_node == "fit"  # type: ignore[attr-defined]


def test_with_logging_at_its_default_only_warnings_and_no_subscriber(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="nbflow")
    flow = failing_flow()
    ok = nf.Flow("fine")

    @ok.node
    def one() -> int:
        return 1

    done = ok.run()
    assert not done._subscribers  # no RunLogger: the engine builds no events for logging
    assert [r for r in caplog.records if r.name.startswith("nbflow")] == []  # a succeeded run is silent
    bad = flow.run(n=1, api_key=SECRET)
    got = [(r.name, r.levelname) for r in caplog.records if r.name.startswith("nbflow")]
    assert got == [("nbflow.node", "WARNING"), ("nbflow.run", "WARNING")]  # written from the record at the end
    assert bad.run_id in caplog.records[-1].getMessage()


def test_a_retry_is_an_info_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nbflow")
    flow = nf.Flow("retry")
    calls = []

    @flow.node(retry=nf.Retry(attempts=2, backoff=0.0, on=(ValueError,)))
    def flaky() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first try fails")
        return 1

    assert flow.run().status == "succeeded"
    retry = [r for r in caplog.records if r.name == "nbflow.node"]
    assert len(retry) == 1 and retry[0].levelname == "INFO"
    assert "attempt 1 failed (ValueError: first try fails); retrying" in retry[0].getMessage()


def test_a_batch_logs_start_and_finish_and_its_rows_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="nbflow")
    flow = nf.Flow("rows")

    @flow.node
    def half(x: int) -> float:
        if x == 0:
            raise ZeroDivisionError("x is 0")
        return 1 / x

    flow.batch([{"x": 1}, {"x": 0}], progress=False)
    batch = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "nbflow.batch"]
    assert batch[0] == ("INFO", "batch (no id) of flow 'rows' started: 2 rows, 2 to run")
    assert batch[-1] == ("WARNING", "batch (no id) of flow 'rows' finished: 1 succeeded, 1 failed")
    assert sum(1 for lvl, m in batch if lvl == "DEBUG" and "started (1 nodes)" in m) == 2
    node = [r for r in caplog.records if r.name == "nbflow.node"]
    assert len(node) == 1 and node[0].levelname == "INFO"  # a row's failure is in the frame: INFO, not WARNING


def test_a_cool_down_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="nbflow")
    clock = nf.FakeClock()
    flow = nf.Flow("outage", clock=clock)

    @flow.node
    def call(x: int) -> int:
        raise ConnectionError("provider down")

    with pytest.warns(nf.NbflowWarning, match="stopped early"):
        flow.batch(
            [{"x": i} for i in range(4)], progress=False, max_consecutive_failures=2, cooldown=30, max_cooldowns=1,
            concurrency=1,
        )  # fmt: skip
    cool = [r.getMessage() for r in caplog.records if r.name == "nbflow.batch" and "cooling down" in r.getMessage()]
    assert cool and "2 consecutive rows failed; cooling down 30s (cool-down 1 of 1)" in cool[0]
    assert "ConnectionError: provider down" in cool[0]


# --- what a node printed ------------------------------------------------------------------------------
def printing_flow() -> nf.Flow:
    flow = nf.Flow("printing")

    @flow.node
    def sync_a(api_key: str) -> int:
        for i in range(5):
            print(f"a{i} with {api_key}")
            time.sleep(0.005)
        logging.getLogger("user.model").warning("loss is %.1f", 0.5)
        warnings.warn("deprecated option", DeprecationWarning, stacklevel=1)
        return threading.get_ident()

    @flow.node
    def sync_b() -> int:
        for i in range(5):
            print(f"b{i}")
            time.sleep(0.005)
        return threading.get_ident()

    @flow.node
    async def async_c() -> int:
        for i in range(5):
            print(f"c{i}")
            await asyncio.sleep(0.005)
        return 0

    return flow


def test_concurrent_nodes_keep_their_own_output_per_attempt(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(DeprecationWarning, match="deprecated option"):
        run = printing_flow().run(api_key=SECRET)
    assert run.status == "succeeded"
    assert run.nodes["sync_a"].output != run.nodes["sync_b"].output  # they ran in two threads at once
    a = run.nodes["sync_a"].printed
    assert a is not None
    assert a.splitlines() == [
        *(f"a{i} with [REDACTED]" for i in range(5)),
        "WARNING user.model: loss is 0.5",
        "DeprecationWarning: deprecated option",
    ]
    assert run.nodes["sync_b"].printed == "".join(f"b{i}\n" for i in range(5))
    assert run.nodes["async_c"].attempts[-1].output == "".join(f"c{i}\n" for i in range(5))
    out = capsys.readouterr()
    assert "b3" in out.out and "c4" in out.out  # still printed where it went (a tee, not a redirect)


def test_each_attempt_keeps_its_own_output_and_a_checkpoint_keeps_it(tmp_path: Path) -> None:
    flow = nf.Flow("attempts")
    tries = []

    @flow.node(retry=nf.Retry(attempts=2, backoff=0.0, on=(ValueError,)))
    def flaky(api_key: str) -> str:
        tries.append(1)
        print(f"try {len(tries)} using {api_key}")
        if len(tries) == 1:
            raise ValueError("again")
        return "ok"

    run = flow.run(api_key=SECRET, store=tmp_path / "runs.db")
    rec = run.nodes["flaky"]
    assert [a.output for a in rec.attempts] == ["try 1 using [REDACTED]\n", "try 2 using [REDACTED]\n"]
    assert rec.printed == "--- attempt 1 ---\ntry 1 using [REDACTED]\n--- attempt 2 ---\ntry 2 using [REDACTED]\n"
    loaded = nf.load_run(tmp_path / "runs.db", run.run_id)
    assert [a.output for a in loaded.nodes["flaky"].attempts] == [a.output for a in rec.attempts]
    assert SECRET.encode() not in (tmp_path / "runs.db").read_bytes()


def test_a_node_that_prints_nothing_has_no_output() -> None:
    flow = nf.Flow("quiet")

    @flow.node
    def one() -> int:
        return 1

    run = flow.run()
    assert run.nodes["one"].printed is None
    assert run.nodes["one"].attempts[-1].output is None


def test_a_store_fault_is_a_warning_record(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.WARNING, logger="nbflow")
    flow = nf.Flow("faults")

    @flow.node
    def thing() -> object:
        return object()

    with pytest.warns(nf.NbflowWarning, match="cannot save its output"):
        run = flow.run(save={"thing": tmp_path / "thing.parquet"}, show=False)
    store = [r for r in caplog.records if r.name == "nbflow.store"]
    assert len(store) == 1 and store[0].levelname == "WARNING"
    assert f"run {run.run_id}: node 'thing': cannot save its output" in store[0].getMessage()
