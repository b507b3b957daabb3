# %% [markdown]
# # Real LLM clients in a notebook: `@flow.resource`
#
# SDK clients (`openai.AsyncOpenAI`, `httpx.AsyncClient`) keep connections bound to the event loop they
# first ran on. In a notebook, `await flow.arun()` runs on the kernel's loop and `flow.run()` /
# `flow.batch()` on nbflow's loop thread: a client made once at module level cannot serve both.
# Declare it as a resource: nbflow builds one per loop, hands each node the one of its loop, and closes it
# with the loop (docs/resources.md). Here the model is `nbflow.testing.ChatServer`, a local
# OpenAI-compatible server (no key, no network), with latency and rate limits (HTTP 429).

# %%
import openai

import nbflow as nf
from nbflow.testing import ChatServer

server = ChatServer(latency=(0.0, 0.02), rate_limit_every=9, retry_after=0.05).start()
opened, closed = [], []

flow = nf.Flow("llm_clients", retry=nf.Retry(attempts=4, backoff=0.05))


@flow.resource
async def llm():
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=3)
    opened.append(id(client))
    yield client
    await client.close()  # runs when the loop ends, on flow.close(), on redefinition, at exit
    closed.append(id(client))


@flow.node
async def answer(question: str, llm: openai.AsyncOpenAI) -> str:  # named after the resource: receives it
    out = await llm.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
    return out.choices[0].message.content


@flow.node
def score(answer: str, question: str) -> float:
    return float(question in answer)


# %% [markdown]
# Blocking calls share nbflow's loop thread, so they share one client:

# %%
# NBVAL_CHECK_OUTPUT
for i in range(3):
    print(flow.run(question=f"q{i}", show=False)["answer"])
df = flow.batch([{"question": f"row {j}"} for j in range(30)], concurrency=8, progress=False)
print(df["status"].value_counts().to_dict(), "score:", df["score"].sum())
print("clients opened:", len(opened))

# %% [markdown]
# `await flow.arun()` runs on the kernel's own loop: it gets a client of its own.

# %%
# NBVAL_CHECK_OUTPUT
run = await flow.arun(question="from the kernel's loop", show=False)
print(run["answer"], "| clients opened:", len(opened))

# %% [markdown]
# `await flow.aclose()` closes every instance, on its own loop; the next run builds new ones.
# The server answered some requests with 429; the SDK waited `Retry-After` and tried again.

# %%
# NBVAL_CHECK_OUTPUT
await flow.aclose()
print("opened:", len(opened), "closed:", len(closed))
print("rate limited:", server.statuses.get(429, 0) > 0, "| keep-alive:", server.connections < server.requests)
server.stop()
