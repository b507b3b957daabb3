"""A Dask LocalCluster batch whose node uses an openai.AsyncOpenAI resource: each worker builds its own."""

from __future__ import annotations

import logging
import os

import distributed
import openai

import nbflow as nf
from nbflow.testing import ChatServer


def llm_flow(base_url: str, api_key: str, log: str) -> nf.Flow:
    flow = nf.Flow("dask-llm", retry=nf.Retry(attempts=4, backoff=0.01))

    @flow.resource
    async def llm():
        c = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=3)
        with open(log, "a") as f:
            f.write(f"open {os.getpid()} {id(c)}\n")
        yield c
        await c.close()
        with open(log, "a") as f:
            f.write(f"close {os.getpid()} {id(c)}\n")

    @flow.node
    async def answer(question: str, llm: openai.AsyncOpenAI) -> str:
        out = await llm.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
        return out.choices[0].message.content

    @flow.node
    def where(answer: str) -> int:
        return os.getpid()

    return flow


def cluster() -> distributed.LocalCluster:
    return distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    )


def test_each_dask_worker_builds_its_own_client_and_closes_it(tmp_path):
    log = tmp_path / "res.log"
    lc = cluster()
    try:
        with (
            distributed.Client(lc) as client,
            ChatServer(latency=0.005, rate_limit_every=13, retry_after=0.01) as server,
        ):
            flow = llm_flow(server.base_url, server.api_key, str(log))
            rows = [{"question": f"q{i}"} for i in range(60)]
            df = flow.batch(rows, executor=client, chunk_size=15, outputs=["answer", "where"])
            assert df["status"].tolist() == ["succeeded"] * 60
            assert df["answer"].tolist() == [f"echo: q{i}" for i in range(60)]
            assert server.statuses.get(429, 0) >= 3
    finally:
        lc.close()  # the workers end: each closes its client
    worker_pids = set(df["where"])
    assert os.getpid() not in worker_pids and len(worker_pids) >= 1
    lines = [line.split() for line in log.read_text().splitlines()]
    opened = [(p, i) for what, p, i in lines if what == "open"]
    closed = [(p, i) for what, p, i in lines if what == "close"]
    assert {int(p) for p, _ in opened} == worker_pids  # built on the workers, never in this process
    assert sorted(opened) == sorted(closed) and len(set(opened)) == len(opened)  # each closed once
    assert len(opened) == len(worker_pids)  # one per worker process (4 chunks), not one per chunk or row
    assert "llm" not in df.columns


def pid_flow(log: str) -> nf.Flow:
    flow = nf.Flow("dask-per-worker")

    @flow.resource
    def conn():
        with open(log, "a") as f:
            f.write(f"open {os.getpid()}\n")
        yield {"pid": os.getpid()}
        with open(log, "a") as f:
            f.write(f"close {os.getpid()}\n")

    @flow.node
    async def use(x: int, conn: dict) -> int:
        assert conn["pid"] == os.getpid()
        return os.getpid()

    return flow


def test_a_resource_is_built_once_per_worker_process_and_closed_when_the_worker_ends(tmp_path):
    log = tmp_path / "res.log"
    flow = pid_flow(str(log))
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    )
    try:
        with distributed.Client(cluster) as c:
            first = flow.batch([{"x": i} for i in range(60)], executor=c, chunk_size=2, outputs=["use"])
            second = flow.batch([{"x": i} for i in range(100, 140)], executor=c, chunk_size=3, outputs=["use"])
            workers = set(c.run(os.getpid).values())
            opened_while_running = log.read_text().split()
    finally:
        cluster.close()
    assert first["status"].tolist() == ["succeeded"] * 60 and second["status"].tolist() == ["succeeded"] * 40
    pids = set(first["use"]) | set(second["use"])
    assert pids <= workers and os.getpid() not in pids
    lines = [line.split() for line in log.read_text().splitlines()]
    opened = [int(p) for what, p in lines if what == "open"]
    closed = [int(p) for what, p in lines if what == "close"]
    # 50 chunks over 2 worker processes (2 threads each): one instance per process, shared by every chunk
    assert sorted(opened) == sorted(set(opened)) and set(opened) == pids, lines
    assert "close" not in opened_while_running  # kept open between chunks and batches
    assert sorted(closed) == sorted(opened), lines  # closed once each, when its worker ended
