"""A Dask LocalCluster batch whose node uses an openai.AsyncOpenAI resource: each worker builds its own."""

from __future__ import annotations

import logging
import os

import distributed
import openai
import pytest

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


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def test_each_dask_worker_builds_its_own_client_and_closes_it(client, tmp_path):
    log = tmp_path / "res.log"
    with ChatServer(latency=0.005, rate_limit_every=13, retry_after=0.01) as server:
        flow = llm_flow(server.base_url, server.api_key, str(log))
        rows = [{"question": f"q{i}"} for i in range(60)]
        df = flow.batch(rows, executor=client, chunk_size=15, outputs=["answer", "where"])
        assert df["status"].tolist() == ["succeeded"] * 60
        assert df["answer"].tolist() == [f"echo: q{i}" for i in range(60)]
        assert server.statuses.get(429, 0) >= 3
    worker_pids = set(df["where"])
    assert os.getpid() not in worker_pids and len(worker_pids) >= 1
    lines = [line.split() for line in log.read_text().splitlines()]
    opened = [(p, i) for what, p, i in lines if what == "open"]
    closed = [(p, i) for what, p, i in lines if what == "close"]
    assert {int(p) for p, _ in opened} == worker_pids  # built on the workers, never in this process
    assert sorted(opened) == sorted(closed) and len(set(opened)) == len(opened)  # each closed once
    assert len(opened) <= 4  # one per chunk's loop at most (4 chunks), not one per row
    assert "llm" not in df.columns
