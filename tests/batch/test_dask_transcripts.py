"""A Dask LocalCluster batch: the model calls made on the workers come back as the rows' transcripts."""

from __future__ import annotations

import logging

import distributed
import openai

import nbflow as nf
from nbflow.testing import ChatServer


def test_calls_made_on_dask_workers_come_back_with_the_kept_runs():
    lc = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    )
    try:
        with distributed.Client(lc) as client, ChatServer() as server:
            flow = nf.Flow("dask-transcripts")
            base_url, api_key = server.base_url, server.api_key

            @flow.resource
            def llm():
                return openai.AsyncOpenAI(base_url=base_url, api_key=api_key)

            @flow.node
            async def answer(question: str, llm) -> str:
                r = await llm.chat.completions.create(
                    model="m-dask", messages=[{"role": "user", "content": question}], temperature=0
                )
                return r.choices[0].message.content

            df = flow.batch([{"question": f"q{i}"} for i in range(8)], executor=client, chunk_size=2, keep="all")
            assert server.requests == 8
        calls = df.nbflow.calls()
        assert list(calls.content) == [f"echo: q{i}" for i in range(8)]
        assert set(calls.model) == {"m-dask"} and set(calls.params.map(str)) == {"{'temperature': 0}"}
        assert list(df.input_tokens) == [1] * 8  # usage counted on the workers, summed per row
    finally:
        lc.close()
