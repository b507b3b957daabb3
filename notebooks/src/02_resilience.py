# %% [markdown]
# # Resilient nodes
#
# LLM and HTTP calls fail: rate limits (429), timeouts, outages. This notebook builds a small
# assistant around a deliberately flaky fake LLM and shows each policy nbflow offers — **retries**
# with backoff that honour `retry_after`, a **timeout** per attempt, a **default value**, a **fail
# branch**, a **shared limit**, and a **deadline** for the whole run — and the run record that shows
# every attempt.
#
# The exact semantics of each policy are in `docs/resilience.md`. Delays here are tiny so the
# notebook runs in a second or two.

# %%
import asyncio

import nbflow as nf

# %% [markdown]
# ## A flaky "LLM"
#
# The first two calls are rate limited (an HTTP 429 that says how long to wait); a prompt
# containing `slow` hangs.

# %%
class RateLimitError(Exception):
    """Looks like an HTTP client's 429: a status code and a retry-after in seconds."""

    status_code = 429

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"429 Too Many Requests, retry after {retry_after}s")
        self.retry_after = retry_after


calls = 0


async def fake_llm(prompt: str) -> str:
    global calls
    calls += 1
    if calls <= 2:
        raise RateLimitError(retry_after=0.02)
    if "slow" in prompt:
        await asyncio.sleep(30)  # hangs: the node's timeout cuts it
    return f"nbflow runs notebook workflows. [{prompt}]"

# %% [markdown]
# ## The flow
#
# - `call_llm` takes the shared `llm` limit, is retried up to 3 times (waiting at least what the
#   429 asks), and each attempt is cut after 0.1 s;
# - `apologise` is its **fail branch**: it runs only if `call_llm` fails for good, and receives the
#   error as data;
# - `related` falls back to a **default** (`[]`) when the search index is down;
# - `reply` takes whichever branch ran, with the control-flow merge `nf.first_of`.

# %%
flow = nf.Flow("assistant", limits={"llm": nf.Limit(max_concurrency=2, per_second=50, burst=5)})


@flow.node(thread=False)  # cheap string work: no worker thread needed
def prompt(question: str) -> str:
    return f"Q: {question}"


@flow.node(uses="llm", retry=nf.Retry(attempts=3, backoff=0.01), timeout=0.1)
async def call_llm(prompt: str) -> str:
    return await fake_llm(prompt)


@flow.node(on_failure_of="call_llm")
def apologise(call_llm: nf.ErrorInfo) -> str:
    return f"Sorry, the model is unavailable ({call_llm.type} after {call_llm.attempts} attempts)."


@flow.node(on_error=nf.Default([]))
async def related(question: str) -> list[str]:
    raise ConnectionError("search index offline")


@flow.node(inputs={"answer": nf.first_of("call_llm", "apologise")})
def reply(answer: str, related: list[str]) -> str:
    return f"{answer} (related: {len(related)})"


flow

# %% [markdown]
# ## Retries that honour `retry_after`
#
# Two 429s, then an answer. Every attempt is in the record, with the wait before the next one.

# %%
events = []
run = await flow.arun(question="What is nbflow?", on_event=events.append)
run

# %%
# NBVAL_CHECK_OUTPUT
print(run.status.name, "|", run["reply"])
for a in run.nodes["call_llm"].attempts:
    outcome = f"{type(a.error).__name__}: {a.error}" if a.error else "ok"
    wait = f"; waited {a.delay}s before the next" if a.delay else ""
    print(f"attempt {a.number}: {outcome}{wait}")

# %% [markdown]
# The engine announced each retry with a `NodeRetrying` event:

# %%
# NBVAL_CHECK_OUTPUT
for e in events:
    if isinstance(e, nf.NodeRetrying):
        print(f"{e.node}: attempt {e.attempt} failed with {e.error_type}, retrying in {e.delay}s")

# %% [markdown]
# `related` failed but was **recovered** with its default: the node is SUCCEEDED and the record
# keeps the error.

# %%
# NBVAL_CHECK_OUTPUT
rec = run.nodes["related"]
print(rec.status.name, "recovered:", rec.recovered, "| output:", rec.output, "| error:", repr(rec.error))

# %% [markdown]
# ## Timeouts and the fail branch
#
# A slow prompt: every attempt is cancelled after 0.1 s with a `NodeTimeoutError` and retried;
# after the last one the fail branch answers instead. The normal branch was not taken, and the run
# still succeeds because the failure was handled.

# %%
calls = 2  # the rate limit has passed
slow_run = await flow.arun(question="a slow question")
slow_run

# %%
# NBVAL_CHECK_OUTPUT
print(slow_run.status.name, "|", slow_run["reply"])
for a in slow_run.nodes["call_llm"].attempts:
    print(f"attempt {a.number}: {type(a.error).__name__}: {a.error}")
print("apologise:", slow_run.nodes["apologise"].status.name)

# %% [markdown]
# When the LLM answers, the fail branch is skipped, with a reason:

# %%
# NBVAL_CHECK_OUTPUT
calls = 2
run = await flow.arun(question="a quick one")
print(run["reply"])
print("apologise:", run.nodes["apologise"].status.name, "-", run.nodes["apologise"].skip_reason)

# %% [markdown]
# ## A deadline for the whole run
#
# A run over its deadline is **cancelled** and returned with the reason; everything that finished
# keeps its output.

# %%
# NBVAL_CHECK_OUTPUT
calls = 2
run = await flow.arun(question="slow again", timeout=0.05)
print(run.status.name, "-", run.reason)
print("kept:", sorted(run.outputs))
print("call_llm:", run.nodes["call_llm"].status.name, "-", run.nodes["call_llm"].skip_reason)

# %% [markdown]
# ## Shared limits across many runs
#
# The `llm` limit lives on the flow, so concurrent runs share it: never more than 2 calls in flight.

# %%
# NBVAL_CHECK_OUTPUT
in_flight = peak = 0


async def counting_llm(prompt: str) -> str:
    global in_flight, peak
    in_flight += 1
    peak = max(peak, in_flight)
    try:
        await asyncio.sleep(0.005)
    finally:  # an attempt cut by its timeout leaves too
        in_flight -= 1
    return "ok"


fake_llm_saved, fake_llm = fake_llm, counting_llm
runs = await asyncio.gather(*(flow.arun(question=f"q{i}") for i in range(10)))
fake_llm = fake_llm_saved
print([r.status.name for r in runs].count("SUCCEEDED"), "runs succeeded; peak calls in flight:", peak)

# %% [markdown]
# `flow.run(...)` blocks the cell and runs the flow on a worker thread's own event loop; the limit
# is shared with the runs on the kernel's loop all the same (it is thread- and loop-safe).

# %%
# NBVAL_CHECK_OUTPUT
calls = 2
run = flow.run(question="from a blocking run")
print(run.status.name, "|", run["reply"])

# %% [markdown]
# The slow run's record, one row per node (attempts, recovery, reasons):

# %%
slow_run.to_frame()
