"""Real LLM clients in a real ipykernel: the openai SDK and httpx.AsyncClient against nbflow.testing.ChatServer.

The issue's scenario: three flow.run, three 60-row flow.batch, await flow.arun and flow.start in one
kernel, with keep-alive connections, latency and 429s: zero loop errors; every resource instance is
closed exactly once, the last ones at kernel shutdown (counted in a file the kernel writes).
"""

from __future__ import annotations

import collections

import pytest

from nbflow.testing import ChatServer
from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

SETUP = """
import asyncio, os, openai, httpx, nbflow as nf
BASE, KEY, LOG = {base!r}, {key!r}, {log!r}

def note(line):
    with open(LOG, "a") as f:
        f.write(line + "\\n")

flow = nf.Flow("llm", retry=nf.Retry(attempts=6, backoff=0.01))  # (every 11th request is a 429)

@flow.resource
async def llm():
    c = openai.AsyncOpenAI(base_url=BASE, api_key=KEY, max_retries=3)
    note(f"open llm {{id(c)}}")
    yield c
    await c.close()
    note(f"close llm {{id(c)}}")

@flow.resource
async def http():
    h = httpx.AsyncClient(base_url=BASE, headers={{"Authorization": f"Bearer {{KEY}}"}})
    note(f"open http {{id(h)}}")
    yield h
    await h.aclose()
    note(f"close http {{id(h)}}")

@flow.node
async def answer(question: str, llm: openai.AsyncOpenAI) -> str:
    out = await llm.chat.completions.create(model="m", messages=[{{"role": "user", "content": question}}])
    return out.choices[0].message.content

@flow.node
async def check(question: str, http: httpx.AsyncClient) -> str:
    r = await http.post("/chat/completions", json={{"model": "m", "messages": [{{"role": "user", "content": question}}]}})
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"]

@flow.node
def score(answer: str, check: str) -> float:
    return float(answer == check)

# The issue's original pattern: one module-level client, used by consecutive blocking calls.
module_client = openai.AsyncOpenAI(base_url=BASE, api_key=KEY, max_retries=3)
plain = nf.Flow("plain", retry=nf.Retry(attempts=4, backoff=0.01))

@plain.node
async def ask(question: str) -> str:
    out = await module_client.chat.completions.create(model="m", messages=[{{"role": "user", "content": question}}])
    return out.choices[0].message.content
"""

INTERLEAVED = """
seen = []
for i in range(3):
    r = flow.run(question=f"r{i}", show=False)
    seen.append((r.status.name, r["score"] if r.status.name == "SUCCEEDED" else r.summary()))
    df = flow.batch([{"question": f"b{i}-{j}"} for j in range(60)], concurrency=16)
    seen.append(({k: int(v) for k, v in df["status"].value_counts().items()}, float(df["score"].sum())))
    if (df["status"] != "succeeded").any():  # (what went wrong, in the assertion's message)
        seen.append(df.loc[df["status"] != "succeeded", ["error_node", "error_type", "error_message"]].to_dict("records"))
    p = plain.run(question=f"p{i}", show=False)
    seen.append((p.status.name, p["ask"] if p.status.name == "SUCCEEDED" else p.summary()))
pdf = plain.batch([{"question": f"pb{j}"} for j in range(60)], concurrency=16)
seen.append({k: int(v) for k, v in pdf["status"].value_counts().items()})
for s in seen:
    print(s)
"""


def _parse(log: str) -> collections.Counter[str]:
    return collections.Counter(line.rsplit(" ", 1)[0] for line in log.splitlines() if line)


def test_runs_batches_arun_and_start_share_clients_without_loop_errors_and_close_them_at_shutdown(tmp_path):
    log = tmp_path / "resources.log"
    with ChatServer(latency=(0.0, 0.01), rate_limit_every=11, retry_after=0.01) as server:
        cells = [
            SETUP.format(base=server.base_url, key=server.api_key, log=str(log)),
            INTERLEAVED,
            'r = await flow.arun(question="a", show=False)\nprint(r.status.name, r["score"])',
            'h = flow.start(question="s", show=False)\nr = await h\nprint(r.status.name, r["score"])',
            "print(open(LOG).read().count('open'), open(LOG).read().count('close'))",
        ]
        nb = run_cells(cells, timeout=600)
        texts = [output_text(c) for c in nb.cells]
        assert texts[0] == "", texts[0]
        lines = texts[1].strip().splitlines()
        expected_run = "('SUCCEEDED', 1.0)"
        expected_batch = "({'succeeded': 60}, 60.0)"
        assert lines[0:9:3] == [expected_run] * 3, texts[1]
        assert lines[1:9:3] == [expected_batch] * 3, texts[1]
        assert lines[2:9:3] == [f"('SUCCEEDED', 'echo: p{i}')" for i in range(3)], texts[1]
        assert lines[-1] == "{'succeeded': 60}", texts[1]
        assert "loop" not in texts[1].lower()
        assert texts[2].strip() == "SUCCEEDED 1.0"
        assert texts[3].strip() == "SUCCEEDED 1.0"
        # two loops used resources: nbflow's loop thread (run, batch) and the kernel's (arun, start)
        assert texts[4].strip() == "4 0"
        assert server.statuses.get(429, 0) >= 20  # rate limits were hit and retried
        assert server.connections < server.requests / 5  # keep-alive pools were reused across calls
    counts = _parse(log.read_text())
    assert counts == {"open llm": 2, "close llm": 2, "open http": 2, "close http": 2}, log.read_text()
    ids = [line.split()[-1] for line in log.read_text().splitlines()]
    assert all(ids.count(i) == 2 for i in ids)  # each instance opened once and closed once
