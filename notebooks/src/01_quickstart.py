# %% [markdown]
# # nbflow quickstart
#
# Decorate plain functions as nodes; parameter names wire the graph. Nodes can be defined in any
# order and in any cell; re-running a cell that redefines a node replaces it.

# %%
import asyncio

import nbflow as nf

flow = nf.Flow("qa")

DOCS = {
    "sky": "The sky is blue because air scatters blue sunlight most (Rayleigh scattering).",
    "sea": "The sea is blue because water absorbs red light.",
    "grass": "Grass is green because chlorophyll reflects green light.",
}


@flow.node
def retrieve(question: str, k: int = 2) -> list[str]:
    """Rank documents by the words they share with the question."""
    words = set(question.lower().strip("?").split())
    return sorted(DOCS.values(), key=lambda d: -len(words & set(d.lower().split())))[:k]


@flow.node
async def answer(question: str, retrieve: list[str]) -> str:
    """Stands in for an LLM call."""
    await asyncio.sleep(0.05)
    return f"{retrieve[0]}"

# %% [markdown]
# Displaying the flow draws its graph (inputs in the dashed box).

# %%
flow

# %% [markdown]
# ## Run it in the kernel's own loop
# `await flow.arun(...)` runs on the kernel's event loop: no nested loops, no patching.

# %%
run = await flow.arun(question="Why is the sky blue?")
run

# %%
# NBVAL_CHECK_OUTPUT
print(run.status.name)
print(run["answer"])

# %% [markdown]
# Every intermediate output is kept:

# %%
# NBVAL_CHECK_OUTPUT
run["retrieve"]

# %%
# NBVAL_CHECK_OUTPUT
run.to_frame()[["status", "attempts", "output"]]

# %% [markdown]
# ## A blocking call and a background run
# `flow.run(...)` blocks (it works in scripts too); `flow.start(...)` returns at once and the
# notebook stays usable while the run goes on.

# %%
# NBVAL_CHECK_OUTPUT
run2 = flow.run(question="Why is grass green?", k=1)
print(run2["answer"])

# %%
handle = flow.start(question="Why is the sea blue?")
print("started; done yet?", handle.done())

# %%
# NBVAL_CHECK_OUTPUT
run3 = await handle
print(run3.status.name, "->", run3["answer"])

# %% [markdown]
# ## Redefining a node, and errors that say what to do

# %%
# NBVAL_CHECK_OUTPUT
@flow.node
async def answer(question: str, retrieve: list[str]) -> str:  # the same cell, edited and re-run
    return retrieve[0].upper()


print(flow.run(question="Why is the sky blue?")["answer"])

# %%
# NBVAL_CHECK_OUTPUT
try:
    flow.run(qestion="typo")
except nf.NbflowError as exc:
    print(type(exc).__name__, "-", exc)

# %%
# NBVAL_CHECK_OUTPUT
@flow.node
def shout(answer: str) -> int:
    raise ValueError("shouting is not allowed")


run4 = flow.run(question="Why is the sky blue?")
print(run4.summary().split("\n", 1)[1])
