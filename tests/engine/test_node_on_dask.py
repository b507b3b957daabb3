"""executor=client: a node of one run runs as a task on a real Dask LocalCluster (results, errors,
a worker killed mid-node, timeouts)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import nbflow as nf

distributed = pytest.importorskip("distributed")

from tests.batch.test_dask_batch import client  # noqa: E402  (its 2-worker LocalCluster, one per module)

__all__ = ["client"]


def test_a_node_runs_on_the_cluster_and_its_error_is_the_node_error(client: Any) -> None:
    workers = set(client.run(os.getpid).values())
    flow = nf.Flow("on-cluster")

    @flow.node
    def data(n: int) -> list[int]:
        return list(range(n))

    @flow.node(executor=client)
    def heavy(data: list[int]) -> tuple[int, int]:
        return sum(x * x for x in data), os.getpid()

    @flow.node(executor=client)
    def broken(data: list[int]) -> int:
        raise ValueError(f"bad data of {len(data)}")

    run = flow.run(n=10, show=False)
    total, pid = run["heavy"]
    assert total == 285 and pid in workers and pid != os.getpid()
    assert run.nodes["broken"].status is nf.NodeStatus.FAILED
    assert isinstance(run.nodes["broken"].error, ValueError) and "bad data of 10" in str(run.nodes["broken"].error)


def test_a_worker_killed_mid_node_does_not_lose_the_node(client: Any, tmp_path: Path) -> None:
    flow = nf.Flow("killed")
    marks = tmp_path / "pids"

    @flow.node(executor=client)
    def slow(x: int) -> int:
        with open(marks, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(3)
        return os.getpid()

    handle_pid: list[int] = []

    def kill_first_worker() -> None:
        for _ in range(300):
            if marks.exists() and marks.read_text().strip():
                pid = int(marks.read_text().split()[0])
                handle_pid.append(pid)
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    import threading

    killer = threading.Thread(target=kill_first_worker)
    killer.start()
    run = flow.run(x=1, show=False)
    killer.join()
    assert run.status is nf.RunStatus.SUCCEEDED, run.errors
    assert handle_pid and run["slow"] != handle_pid[0]  # Dask ran it again on another worker


def test_a_timeout_cancels_the_task(client: Any) -> None:
    flow = nf.Flow("timeout")

    @flow.node(executor=client, timeout=1.0)
    def forever(x: int) -> int:
        time.sleep(30)
        return x

    t0 = time.monotonic()
    run = flow.run(x=1, show=False)
    assert time.monotonic() - t0 < 15
    assert isinstance(run.nodes["forever"].error, nf.NodeTimeoutError)


def test_an_async_node_cannot_take_a_client(client: Any) -> None:
    flow = nf.Flow("bad")
    with pytest.raises(nf.FlowDefinitionError, match="executor=client"):

        @flow.node(executor=client)
        async def a() -> int:
            return 1
