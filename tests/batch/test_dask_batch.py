"""flow.batch(rows, executor=client): rows run on Dask workers (real processes), same DataFrame as a local batch.

One LocalCluster of two worker processes serves the module, so every test proves the flow really
travels by pickling. Flows are built inside functions: their nodes are then sent by value
(cloudpickle), like functions defined in a notebook.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import distributed
import pandas as pd
import pytest

import nbflow as nf

_CLEAN = ["latency", "run_id"]  # differ between any two runs


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",  # its HTTP server starts anyway: any free port, never 8787
        silence_logs=logging.ERROR,
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def scoring(
    name: str = "dask-score", fail_from: int | None = None, sleep: float = 0.0, outage: str | None = None
) -> nf.Flow:
    """``fail_from``: rows from that x on fail; with ``outage`` (a file's path) only while that file exists (a
    service that was down: the node's code and settings are the same once it is back)."""
    flow = nf.Flow(name)

    @flow.node
    async def double(x: int) -> int:
        if sleep:
            await asyncio.sleep(sleep)
        down = outage is None or os.path.exists(outage)
        if x == 3 or (fail_from is not None and x >= fail_from and down):
            raise ValueError(f"bad row {x}")
        return 2 * x

    @flow.node
    def score(double: int, k: int = 1) -> dict[str, int]:
        return {"value": double + k, "k": k}

    return flow


def same(local: pd.DataFrame, remote: pd.DataFrame) -> None:
    cols = [c for c in local.columns if c not in _CLEAN]
    assert list(remote.columns) == list(local.columns)
    assert list(remote.index) == list(local.index)
    pd.testing.assert_frame_equal(remote[cols], local[cols])
    assert remote["latency"].dtype == "float64" and remote["run_id"].is_unique
    assert {k: v for k, v in remote.attrs.items() if k != "nbflow_runs"} == {
        k: v for k, v in local.attrs.items() if k != "nbflow_runs"
    }
    # the failed rows' runs came back from the workers (keep="failed"): open one like a local row
    for frame in (remote, local):
        failed_at = int((frame["status"] == "failed").to_numpy().argmax())
        run = frame.nbflow.run(failed_at)
        assert run.run_id == frame["run_id"].iloc[failed_at]
        assert run.nodes["double"].error_type == "ValueError" and "bad row 3" in frame.nbflow.traceback(failed_at)


def test_same_frame_as_a_local_batch_with_a_failing_row_and_a_grid(client: Any) -> None:
    flow = scoring()
    rows = pd.DataFrame({"x": range(8), "note": [f"r{i}" for i in range(8)]}, index=[f"id{i}" for i in range(8)])
    local = flow.batch(rows, grid={"k": [1, 10]}, progress=False, flatten=True)
    remote = flow.batch(rows, grid={"k": [1, 10]}, progress=False, flatten=True, executor=client, chunk_size=3)
    same(local, remote)
    assert list(remote["score.value"].iloc[:4]) == [1, 10, 3, 12]
    failed = remote[remote["status"] == "failed"]
    assert list(failed["x"]) == [3, 3]
    assert set(failed["error_type"]) == {"ValueError"} and set(failed["error_node"]) == {"double"}
    assert failed["error_message"].iloc[0] == "bad row 3"
    assert remote.attrs["counts"] == {"succeeded": 14, "failed": 2}


def test_abatch_sends_rows_to_dask_too(client: Any) -> None:
    flow = scoring()
    rows = [{"x": i} for i in range(5)]
    local = flow.batch(rows, progress=False)
    remote = asyncio.run(flow.abatch(rows, progress=False, executor=client))  # chunk_size: concurrency
    same(local, remote)


def test_resume_runs_only_the_failed_rows_from_the_store(client: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    rows = [{"x": i} for i in range(10)]
    outage = tmp_path / "outage"  # rows 4.. fail while it exists
    outage.touch()
    flow = scoring("dask-resume", fail_from=4, outage=str(outage))
    first = flow.batch(rows, store=db, executor=client, chunk_size=4, progress=False)
    done = first["status"] == "succeeded"
    assert list(first.loc[done, "x"]) == [0, 1, 2]  # 3 always fails, 4.. fail the first time
    with nf.BatchStore(db) as store:  # the client committed every finished row
        stored = store.rows(first.attrs["batch_id"])
    assert {i for i, r in stored.items() if r.status == "succeeded"} == {0, 1, 2}
    assert {i for i, r in stored.items() if r.status == "failed"} == set(range(3, 10))

    same_again = scoring("dask-resume", fail_from=4, outage=str(outage)).batch(
        rows, store=db, resume=True, executor=client, progress=False
    )
    assert list(same_again["run_id"]) == list(first["run_id"])  # everything finished: nothing ran

    outage.unlink()  # the service is back: the same flow, the failed rows retried
    fixed = scoring("dask-resume", fail_from=4, outage=str(outage))
    again = fixed.batch(rows, store=db, resume=True, retry_failed=True, executor=client, progress=False)
    assert list(again["run_id"].iloc[:3]) == list(first["run_id"].iloc[:3])  # kept, not run again
    assert not set(again["run_id"].iloc[4:]) & set(first["run_id"])
    assert list(again["status"]) == ["succeeded"] * 3 + ["failed"] + ["succeeded"] * 6
    assert list(again["score"].iloc[4:]) == [{"value": 2 * i + 1, "k": 1} for i in range(4, 10)]


def test_rows_whose_runs_stay_on_the_workers_still_have_their_lineage(client: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    rows = [{"x": i} for i in range(6)]
    remote = scoring("dask-lineage").batch(rows, store=db, executor=client, chunk_size=2, keep="failed", progress=False)
    local = scoring("dask-lineage").batch(rows, store=tmp_path / "local.db", keep="none", progress=False)
    back = nf.load_batch(db, remote.attrs["batch_id"])
    for i in (0, 5):  # succeeded rows: their runs were not kept (keep="failed"), their lineage was
        assert remote["status"].iloc[i] == "succeeded"
        theirs, ours = back.nbflow.lineage(i, "score"), local.nbflow.lineage(i, "score")
        cols = ["node", "code_version", "parameter", "source", "kind", "value", "data_version", "output_version"]
        pd.testing.assert_frame_equal(theirs[cols], ours[cols])  # the same data and code versions as a local row
        assert theirs.loc[theirs["parameter"] == "x", "value"].tolist() == [repr(i)]
    failed = back.nbflow.lineage(3, "double")  # the failed row's run came back whole: its row keeps its lineage
    assert failed["node"].tolist() == ["double"] and failed["value"].tolist() == ["3"]

    # keep="all": every run travels back and is stored without a lineage of its own; each row keeps it, and the
    # run loaded from the store reads it there.
    db_all = tmp_path / "all.db"
    kept = scoring("dask-lineage").batch(rows, store=db_all, executor=client, chunk_size=2, keep="all", progress=False)
    for i in (0, 5):
        loaded = nf.load_run(db_all, kept["run_id"].iloc[i]).lineage("score")
        pd.testing.assert_frame_equal(loaded[cols], local.nbflow.lineage(i, "score")[cols])


def test_circuit_breaker_stops_submitting_chunks(client: Any) -> None:
    flow = scoring("dask-breaker", fail_from=0)
    rows = [{"x": i} for i in range(40)]
    with pytest.warns(nf.NbflowWarning, match="circuit breaker: 3 consecutive rows failed"):
        frame = flow.batch(rows, executor=client, chunk_size=2, max_consecutive_failures=3, progress=False)
    # The breaker trips in the second chunk to arrive; its rows all count; nothing more is merged.
    counts = frame.attrs["counts"]
    assert counts["failed"] == 4
    assert counts.get("pending", 0) + counts.get("cancelled", 0) == 36
    assert frame.attrs["stopped"].startswith("circuit breaker")
    assert frame["latency"].isna().sum() == 36


def test_the_breakers_last_error_quotes_no_secret(client: Any, tmp_path: Path) -> None:
    flow = nf.Flow("dask-breaker-secret")

    @flow.node
    def call(x: int, OPENAI_KEY: str, client_config: str) -> int:
        raise PermissionError(f"invalid key {OPENAI_KEY} (config {client_config})")

    key, token = "dask-key-0123456789", "ghp_DaskSweepAb3dEf6hIj9kLm2oPq5sTu8wXy1z"  # by name; by shape
    rows = [{"x": i, "OPENAI_KEY": key, "client_config": token} for i in range(12)]
    db = tmp_path / "dask.db"
    with pytest.warns(nf.NbflowWarning, match="circuit breaker") as caught:
        frame = flow.batch(rows, executor=client, chunk_size=2, max_consecutive_failures=3, store=db, progress=False)
    stopped = frame.attrs["stopped"]
    assert "invalid key [REDACTED] (config [REDACTED])" in stopped, stopped
    shown = [stopped, *(str(w.message) for w in caught)]
    meta = nf.experiments(db).to_csv()
    files = [p.read_bytes().decode("latin-1") for p in tmp_path.glob("dask.db*")]
    for text in [*shown, meta, *files]:
        assert key not in text and token not in text


def test_an_interrupt_keeps_finished_rows_and_cancels_the_rest(client: Any) -> None:
    class InterruptAfterFirstRow:
        def update(self, state: nf.BatchProgress) -> None:
            if state.succeeded:
                raise KeyboardInterrupt

        def close(self, state: nf.BatchProgress) -> None:
            pass

    flow = scoring("dask-interrupt", sleep=0.3)
    rows = [{"x": i} for i in (0, 1, 2, 4, 5, 6, 7, 8)]
    with pytest.raises(nf.BatchInterrupted) as info:
        flow.batch(rows, executor=client, chunk_size=1, progress=InterruptAfterFirstRow())
    frame = info.value.frame
    assert len(frame) == 8 and frame is flow.last_batch
    statuses = frame["status"].value_counts().to_dict()
    assert statuses.get("succeeded", 0) >= 1
    assert set(statuses) <= {"succeeded", "cancelled", "pending"} and statuses.get("succeeded") < 8
    assert frame.loc[frame["status"] == "succeeded", "score"].notna().all()


def test_a_secret_input_is_refused_before_anything_runs(client: Any, tmp_path: Path) -> None:
    flow = nf.Flow("dask-secret")

    @flow.node
    def call(x: int, api_key: str) -> int:
        return x

    rows = [{"x": 1, "api_key": nf.Secret("sk-1")}]
    with pytest.raises(nf.BatchError, match=r"column 'api_key' feeds input 'api_key'.*nf\.Secret.*environment"):
        flow.batch(rows, executor=client, store=tmp_path / "s.db", progress=False)
    with nf.BatchStore(tmp_path / "s.db") as store:
        assert store.batches() == []


def test_a_secret_held_by_the_flow_is_refused_too(client: Any) -> None:
    key = nf.Secret("sk-2")
    flow = nf.Flow("dask-secret-held")

    @flow.node
    def call(x: int, api_key: str = key) -> int:
        return x

    with pytest.raises(nf.BatchError, match=r"flow 'dask-secret-held' holds an nf\.Secret.*os\.environ"):
        flow.batch([{"x": 1}], executor=client, progress=False)

    closure = nf.Flow("dask-secret-closure")

    @closure.node
    def uses(x: int) -> str:
        return key.reveal()

    with pytest.raises(nf.BatchError, match=r"holds an nf\.Secret"):
        closure.batch([{"x": 1}], executor=client, progress=False)


def test_limits_are_per_worker_process_and_say_so_once(client: Any) -> None:
    flow = nf.Flow("dask-limits", limits={"llm": nf.Limit(max_concurrency=1)})

    @flow.node(uses="llm")
    def call(x: int) -> int:
        return x + 1

    with pytest.warns(nf.NbflowWarning, match=r"\(dask-limits\.llm\).*per worker process"):
        frame = flow.batch([{"x": 1}, {"x": 2}], executor=client, progress=False)
    assert list(frame["call"]) == [2, 3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flow.batch([{"x": 5}], executor=client, progress=False)


def test_unpicklable_flows_and_outputs_are_clear_errors(client: Any) -> None:
    import threading

    lock = threading.Lock()
    flow = nf.Flow("dask-unpicklable")

    @flow.node
    def holds(x: int) -> int:
        with lock:
            return x

    with pytest.raises(nf.BatchError, match=r"flow 'dask-unpicklable' cannot be sent to Dask workers.*lock"):
        flow.batch([{"x": 1}], executor=client, progress=False)

    other = nf.Flow("dask-bad-output")

    @other.node
    def makes(x: int) -> Any:
        import threading

        return threading.Lock() if x == 1 else x

    frame = other.batch([{"x": 0}, {"x": 1}], executor=client, progress=False)
    assert list(frame["status"]) == ["succeeded", "failed"]
    assert frame["error_node"].iloc[1] == "makes"
    assert "cannot be sent back from the Dask worker" in frame["error_message"].iloc[1]


def test_bad_executor_options(client: Any) -> None:
    flow = scoring()
    with pytest.raises(nf.BatchError, match=r"executor= takes a Dask distributed\.Client"):
        flow.batch([{"x": 1}], executor="tcp://localhost:8786", progress=False)
    with pytest.raises(nf.BatchError, match="chunk_size= is for batches sent to Dask"):
        flow.batch([{"x": 1}], chunk_size=4, progress=False)
    with pytest.raises(nf.BatchError, match="chunk_size= is the number of rows per Dask task"):
        flow.batch([{"x": 1}], executor=client, chunk_size=0, progress=False)


def test_the_batch_timeout_cancels_the_chunks_in_flight(client: Any) -> None:
    flow = scoring("dask-timeout", sleep=0.3)
    rows = [{"x": i} for i in (0, 1, 2, 4, 5, 6, 7, 8)]  # 8 rows of 0.3 s on 2 workers: at least 1.2 s
    with pytest.warns(nf.NbflowWarning, match="stopped early, timeout"):
        frame = flow.batch(rows, executor=client, chunk_size=1, timeout=0.5, progress=False)
    assert frame.attrs["stopped"] == "timeout: the batch did not finish within 0.5s"
    statuses = set(frame["status"])
    assert statuses <= {"succeeded", "cancelled", "pending"} and statuses != {"succeeded"}


def test_a_cancelled_chunk_stops_on_its_worker_and_frees_it(client: Any) -> None:
    flow = nf.Flow("dask-hang")

    @flow.node
    async def wait(i: int) -> int:
        if i >= 2:
            await asyncio.sleep(600)
        return i

    rows = [{"i": i} for i in range(6)]
    with pytest.warns(nf.NbflowWarning, match="stopped early, timeout"):
        first = flow.batch(rows, executor=client, chunk_size=1, timeout=2.0, progress=False)
    assert set(first["status"].iloc[2:]) <= {"cancelled", "pending"}
    # Both workers held a 10-minute row when the batch stopped: they are free again only if those stopped.
    again = flow.batch([{"i": 0}, {"i": 1}], executor=client, timeout=30, progress=False)
    assert list(again["status"]) == ["succeeded", "succeeded"]


def test_a_flow_closing_over_big_data_is_sent_once_not_per_chunk(client: Any) -> None:
    table = bytes(12_000_000)  # Dask warns about task graphs over 10 MB (an error under pytest)
    flow = nf.Flow("dask-big")

    @flow.node
    def size(x: int) -> int:
        return len(table) + x

    frame = flow.batch([{"x": i} for i in range(6)], executor=client, chunk_size=1, progress=False)
    assert list(frame["size"]) == [12_000_000 + i for i in range(6)]


def test_a_chunk_whose_results_cannot_be_received_fails_its_rows_only(client: Any) -> None:
    flow = nf.Flow("dask-bomb")

    def explode() -> None:
        raise RuntimeError("cannot rebuild this here")

    class Bomb:
        def __reduce__(self) -> Any:
            return (explode, ())

    @flow.node
    def make(x: int) -> Any:
        return Bomb() if x == 1 else x

    frame = flow.batch([{"x": i} for i in range(4)], executor=client, chunk_size=2, progress=False)
    assert list(frame["status"]) == ["failed", "failed", "succeeded", "succeeded"]
    assert set(frame["error_type"].iloc[:2]) == {"RuntimeError"}
    assert frame["error_message"].iloc[0] == (
        "the results of this row's chunk cannot be unpickled here, in the client: cannot rebuild this here"
    )
    assert list(frame["make"].iloc[2:]) == [2, 3]


def test_row_timeout_and_outputs_hold_on_the_workers(client: Any) -> None:
    flow = nf.Flow("dask-row-timeout")

    @flow.node
    async def slow(x: int) -> int:
        if x == 1:
            await asyncio.sleep(600)
        return x

    @flow.node
    def never_asked(slow: int) -> int:
        raise AssertionError("outputs= asks for 'slow' only")

    frame = flow.batch([{"x": 0}, {"x": 1}], executor=client, outputs="slow", row_timeout=0.3, progress=False)
    assert list(frame.columns[:2]) == ["x", "slow"] and "never_asked" not in frame
    assert list(frame["status"]) == ["succeeded", "failed"]
    assert frame["error_type"].iloc[1] == "TimeoutError" and frame["error_node"].iloc[1] == "slow"
    assert frame["error_message"].iloc[1] == "the row did not finish within row_timeout=0.3s"


def sampled(name: str = "dask-sampled") -> nf.Flow:
    flow = nf.Flow(name, cache=True)

    @flow.node(cache="per-sample")
    def draw(x: int) -> str:
        nf.usage(input_tokens=x, output_tokens=1, cost=0.5)  # reported on the worker
        return uuid.uuid4().hex  # a different value per call: shows each sample is its own call

    return flow


def test_repeats_and_usage_hold_on_the_workers(client: Any) -> None:
    flow = sampled()
    remote = flow.batch([{"x": i} for i in range(3)], repeats=2, executor=client, chunk_size=2, progress=False)
    assert remote["sample"].tolist() == [0, 1] * 3
    assert remote["draw"].nunique() == 6  # per-sample keys travel to the workers
    assert remote["input_tokens"].tolist() == [0, 0, 1, 1, 2, 2]
    assert remote["cost"].tolist() == [0.5] * 6
    assert list(remote.columns[-5:]) == ["input_tokens", "output_tokens", "cost", "failed_tokens", "failed_cost"]


def test_few_heavy_rows_give_every_worker_work(client: Any) -> None:
    """8 rows and 2 workers at the default chunking: both workers run rows (not one chunk of 8)."""
    flow = nf.Flow("dask-heavy")

    @flow.node
    def heavy(x: int) -> int:
        import os
        import time

        time.sleep(0.2)
        return os.getpid()

    df = flow.batch([{"x": i} for i in range(8)], executor=client, progress=False)
    assert (df["status"] == "succeeded").all()
    assert df["heavy"].nunique() == 2, df["heavy"].tolist()


@pytest.mark.parametrize(
    ("rows", "threads", "concurrency", "expected"),
    [(8, 2, 16, 4), (40, 4, 16, 10), (10_000, 4, 16, 160), (3, 8, 16, 1), (1000, 2, 16, 125)],
)
def test_default_chunk_size_splits_few_rows_across_threads(
    rows: int, threads: int, concurrency: int, expected: int
) -> None:
    from nbflow._batch.dask import default_chunk_size

    assert default_chunk_size(rows, threads, concurrency) == expected
