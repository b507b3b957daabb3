# %% [markdown]
# # Caching: an edited node re-runs alone
#
# You iterate on one node — a prompt, a parser — and run the flow again. With `cache=True` the nodes
# whose code and inputs did not change are served from the cache: the slow "LLM" call upstream is
# not made again. The rules (what is in a key, what is never cached, files and secrets) are in
# `docs/caching.md`.

# %%
import asyncio
import tempfile
from collections import Counter
from pathlib import Path

import nbflow as nf

calls = Counter()  # how often each node really ran

flow = nf.Flow("qa", cache=True)


@flow.node
async def retrieve(question: str) -> list[str]:
    calls["retrieve"] += 1
    return [f"nbflow runs {question.split()[-1]} in the kernel's loop"]


@flow.node
async def llm(retrieve: list[str], question: str) -> str:
    calls["llm"] += 1
    await asyncio.sleep(0.2)  # the slow, paid call
    return f"Answer to {question!r}, from {len(retrieve)} document(s)."


@flow.node
def format_answer(llm: str) -> str:
    calls["format_answer"] += 1
    return llm.upper()


@flow.node(cache=False)  # a side effect: always runs
def log(format_answer: str) -> int:
    calls["log"] += 1
    return len(format_answer)


def ran(run: nf.Run) -> str:
    return ", ".join(f"{name}={'cached' if rec.cached else 'ran'}" for name, rec in run.nodes.items())


# %% [markdown]
# The first run computes everything; the second finds every cacheable node in the cache (`log` opted
# out with `cache=False`).

# %%
# NBVAL_CHECK_OUTPUT
question = "How does nbflow run flows?"
run = flow.run(question=question, show=False)
print(ran(run))
run = flow.run(question=question, show=False)
print(ran(run))
print(dict(calls))

# %% [markdown]
# A hit is a `SUCCEEDED` record with `cached=True`, no attempts and no duration; the frame has a
# `cached` column and the summary says so.

# %%
# NBVAL_CHECK_OUTPUT
print(run.summary())
run.to_frame()[["status", "cached", "attempts"]]

# %% [markdown]
# ## Edit one node
#
# Re-running the cell that defines `format_answer` (here: a new version of it) invalidates it and
# everything downstream, not its upstream: the LLM is not called again.

# %%
# NBVAL_CHECK_OUTPUT
@flow.node
def format_answer(llm: str) -> str:
    calls["format_answer"] += 1
    return f"** {llm} **"


run = flow.run(question=question, show=False)
print(ran(run))
print(run["format_answer"])
print(dict(calls))

# %% [markdown]
# A new question is a miss for the nodes that depend on it. `flow.clear_cache("llm")` forgets one
# node's results: it runs again, and what follows it runs again only if its output changed (here the
# fake LLM answers the same, so `format_answer` is a hit); `flow.clear_cache()` forgets them all.

# %%
# NBVAL_CHECK_OUTPUT
print(ran(flow.run(question="How does nbflow cache nodes?", show=False)))
print("cleared:", flow.clear_cache("llm"))
print(ran(flow.run(question=question, show=False)))

# %% [markdown]
# ## A cache that survives a kernel restart
#
# `cache="cache.db"` keeps results in a SQLite file (pickled: only open files you trust; secrets are
# never written). A new kernel that defines the same nodes finds them there.

# %%
# NBVAL_CHECK_OUTPUT
folder = Path(tempfile.mkdtemp())
flow.cache = folder / "cache.db"
print(ran(flow.run(question=question, show=False)))
print(ran(flow.run(question=question, show=False)))
print(len(nf.NodeCache(folder / "cache.db")), "entries in the file")
