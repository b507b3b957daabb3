"""nf.ask(timeout=) in a real ipykernel: a paused run (flow.run on nbflow's loop thread, and top-level
await on the kernel's own loop) goes on by itself at the deadline while the notebook stays usable."""

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

DEFINE = """
import time, nbflow as nf
flow = nf.Flow("k_ask_timeout")

@flow.node
async def review(topic: str) -> str:
    return await nf.ask("Approve?", options=["approve", "reject"], timeout=1.5, default="reject")

@flow.node
def publish(review: str) -> str:
    return "published: " + review

def wait_done(run, seconds=60):
    end = time.monotonic() + seconds
    while not run.status.finished and time.monotonic() < end:
        time.sleep(0.05)
    return run.status.name
"""

WAIT_AWAITED = """
import asyncio
for _ in range(1200):
    if arun_run.status.finished:
        break
    await asyncio.sleep(0.05)
print(arun_run.status.name, arun_run["publish"])
"""


def test_paused_runs_in_a_notebook_take_their_default_at_the_deadline():
    nb = run_cells(
        [
            DEFINE,
            "run = flow.run(topic='tea', show=False); print(run.status.name)",
            "print(1 + 1)",  # the notebook stays usable while the run waits for an answer
            "print(wait_done(run), run['publish'])",
            "arun_run = await flow.arun(topic='tea', show=False); print(arun_run.status.name)",
            WAIT_AWAITED,
        ],
        timeout=180,
    )
    texts = [output_text(c).strip() for c in nb.cells]
    assert texts[1] == "PAUSED", texts
    assert texts[2] == "2"
    assert texts[3] == "SUCCEEDED published: reject", texts
    assert texts[4] == "PAUSED", texts
    assert texts[5] == "SUCCEEDED published: reject", texts
