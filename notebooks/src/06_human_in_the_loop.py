# %% [markdown]
# # Human in the loop: draft → review → publish
# The review node asks a person. The run pauses; the answer resumes it. With a store, the paused run
# survives a kernel restart. (nbval cannot click, so this notebook answers programmatically; in
# JupyterLab the run widget shows the question with its options.)

# %%
import asyncio
import tempfile
from pathlib import Path

import nbflow as nf

flow = nf.Flow("publishing")


@flow.node
def draft(topic: str) -> str:
    return f"Why {topic} matter: a short post."


@flow.node
async def review(draft: str) -> str:
    return await nf.ask("Publish this draft?", data=draft, options=["approve", "reject"])


@flow.node
def publish(review: str, draft: str) -> str:
    return f"PUBLISHED: {draft}" if review == "approve" else "not published"


@flow.node
async def tweet(draft: str) -> str:  # independent of the review: runs while the question waits
    await asyncio.sleep(0.01)
    return draft[:20] + "..."


flow

# %%
# NBVAL_CHECK_OUTPUT
run = await flow.arun(topic="bees")
print(run.status.name)
for key, question in run.pending.items():
    print(key, "->", question.prompt, question.options, "| data:", question.data)
print("tweet:", run["tweet"])

# %%
# NBVAL_CHECK_OUTPUT
await run.aresume("approve")
print(run.status.name, "|", run["publish"])

# %% [markdown]
# Answering twice is a conflict (the seeds' 409), and nothing changes:

# %%
# NBVAL_CHECK_OUTPUT
try:
    await run.aresume("reject")
except nf.ResumeConflictError as exc:
    print("ResumeConflictError:", str(exc).split(":")[0])
print(run["publish"])

# %% [markdown]
# ## Surviving a restart: checkpoints in SQLite

# %%
# NBVAL_CHECK_OUTPUT
store = Path(tempfile.mkdtemp()) / "runs.db"
paused = await flow.arun(topic="ants", store=store)
run_id = paused.run_id
print(paused.status.name, list(paused.pending))

# %% [markdown]
# After a kernel restart you would re-run the cell defining `flow`, then:

# %%
# NBVAL_CHECK_OUTPUT
loaded = nf.load_run(store, run_id)
print(loaded.status.name, "| draft kept:", loaded["draft"])
await loaded.aresume("reject")
print(loaded.status.name, "|", loaded["publish"])

# %%
# NBVAL_CHECK_OUTPUT
loaded.to_frame()[["status", "output"]]
