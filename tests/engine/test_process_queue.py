"""Process nodes: the wait for a free worker is recorded apart (attempt.queued) and left out of
the node's duration and the batch row's latency; on a Dask worker no second pool is started."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import nbflow as nf

pytest.importorskip("cloudpickle")


def sleeper() -> nf.Flow:
    flow = nf.Flow("queue")

    @flow.node(executor="process")
    def work(i: int) -> int:
        import time as t

        t.sleep(0.6)
        return os.getpid()

    return flow


def test_the_wait_for_a_worker_is_queued_not_latency(tmp_path: Path) -> None:
    old = nf.config.process_workers
    nf.config.process_workers = 1  # one worker: the rows take turns
    try:
        df = sleeper().batch(
            [{"i": i} for i in range(3)], concurrency=3, keep="all", progress=False, store=tmp_path / "runs.db"
        )
    finally:
        nf.config.process_workers = old
    assert (df["status"] == "succeeded").all(), df["error_message"].tolist()
    waited = []
    for i in range(3):
        run = df.nbflow.run(i)
        a = run.nodes["work"].attempts[-1]
        waited.append(a.queued or 0.0)
        assert a.duration is not None and a.duration < 0.6 + 1.5  # the call (a worker's start at most), no queue
        assert df["latency"][i] <= (run.duration or 0) - (a.queued or 0) + 0.05
    assert sorted(waited)[1:] and min(sorted(waited)[1:]) > 0.45  # two rows waited for the one worker
    assert sum(w > 0.45 for w in waited) == 2
    stored = [nf.load_run(tmp_path / "runs.db", df["run_id"][i]).nodes["work"].attempts[-1].queued for i in range(3)]
    assert [s or 0.0 for s in stored] == waited  # kept in the store too
    assert max(df["latency"]) < min(w for w in waited if w > 0) + 0.6 + 1.5


def test_no_second_pool_on_a_dask_worker() -> None:
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    )
    client = distributed.Client(cluster)
    try:
        workers = set(client.run(os.getpid).values())
        df = sleeper().batch([{"i": 0}, {"i": 1}], executor=client, progress=False)
        assert (df["status"] == "succeeded").all(), df["error_message"].tolist()
        assert set(df["work"]) <= workers  # ran in the Dask worker process itself, not in a pool beside it
    finally:
        client.close()
        cluster.close()
