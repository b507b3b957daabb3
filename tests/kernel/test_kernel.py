"""The three ways of running, proven in a real ipykernel (the kernel's own loop, interrupts)."""

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

DEFINE = """
import anyio, nbflow as nf
import nbflow.widgets  # the live view is built before the run starts: on a busy machine that takes
                       # seconds, and the interrupt (4 s in) must land in the run
flow = nf.Flow("k")

@flow.node
async def quick() -> int:
    return 5

@flow.node
async def forever(quick: int) -> int:
    await anyio.sleep(600)
    return quick

@flow.node
def after(forever: int) -> int:
    return forever

def states(run):
    return run.status.name + " " + " ".join(f"{n}={r.status.name}" for n, r in run.nodes.items())
"""


def test_interrupting_a_blocking_run_in_a_notebook_keeps_the_record():
    nb = run_cells([DEFINE, "run = flow.run()", "print(states(flow.last_run), flow.last_run['quick'])"], {1: 4.0})
    run_cell = nb.cells[1]
    assert "!RunInterrupted" in output_text(run_cell)
    assert run_cell.metadata["wall_s"] < 30  # prompt: the node sleeps for 10 minutes (room for a busy machine)
    assert output_text(nb.cells[2]).strip() == "CANCELLED quick=SUCCEEDED forever=CANCELLED after=CANCELLED 5"


def test_interrupting_top_level_await_is_prompt_and_keeps_the_record():
    nb = run_cells([DEFINE, "run = await flow.arun()", "print(states(flow.last_run))"], {1: 4.0})
    assert nb.cells[1].metadata["wall_s"] < 30
    assert "!" in output_text(nb.cells[1])  # the cell was interrupted
    assert output_text(nb.cells[2]).strip() == "CANCELLED quick=SUCCEEDED forever=CANCELLED after=CANCELLED"


def test_blocking_run_and_top_level_await_work_in_the_kernel():
    cells = [
        DEFINE,
        "flow.remove('after'); flow.remove('forever')\n"
        "@flow.node\nasync def double(quick: int) -> int:\n    return 2 * quick",
        "print(flow.run()['double'])",
        "run = await flow.arun()\nprint(run['double'], run.status.name)",
    ]
    nb = run_cells(cells)
    assert output_text(nb.cells[2]).strip() == "10"
    assert output_text(nb.cells[3]).strip() == "10 SUCCEEDED"


def test_a_background_run_leaves_the_notebook_usable_and_can_be_cancelled():
    cells = [
        DEFINE,
        "handle = flow.start()\nprint('returned at once', handle.done())",
        "await anyio.sleep(0.3)\nprint('other cell ran;', states(handle.run))",
        "handle.cancel()\nrun = await handle\nprint(states(run))",
    ]
    nb = run_cells(cells)
    assert output_text(nb.cells[1]).strip() == "returned at once False"
    assert output_text(nb.cells[2]).strip() == ("other cell ran; RUNNING quick=SUCCEEDED forever=RUNNING after=PENDING")
    assert output_text(nb.cells[3]).strip() == "CANCELLED quick=SUCCEEDED forever=CANCELLED after=CANCELLED"
