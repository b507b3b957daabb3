"""flow.batch in a real ipykernel: the widget progress, and an interrupt that keeps finished rows."""

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

DEFINE = """
import asyncio, nbflow as nf
import nbflow.widgets  # the progress widget imports ipywidgets: not while the interrupt is due
flow = nf.Flow("k")

@flow.node
async def work(i: int) -> int:
    if i >= 4:
        await asyncio.sleep(600)
    return i * 10
"""


def test_interrupting_a_blocking_batch_in_a_notebook_keeps_finished_rows():
    cells = [
        DEFINE,
        "df = flow.batch([{'i': i} for i in range(8)], concurrency=2)",
        "print(flow.last_batch['status'].tolist()); print(flow.last_batch['work'].tolist()[:4])",
    ]
    nb = run_cells(cells, {1: 3.0})
    out = output_text(nb.cells[1])
    assert "!BatchInterrupted" in out and "4 of 8 rows finished" in out
    assert nb.cells[1].metadata["wall_s"] < 30  # prompt: the rows sleep for 10 minutes (room for a busy machine)
    lines = output_text(nb.cells[2]).strip().splitlines()
    assert lines[0] == str(["succeeded"] * 4 + ["cancelled"] * 2 + ["pending"] * 2)
    assert lines[1] == "[0.0, 10.0, 20.0, 30.0]"


def test_a_batch_in_a_notebook_shows_a_progress_widget():
    cells = [
        DEFINE,
        "df = flow.batch([{'i': i} for i in range(4)])\nprint(df['work'].tolist())",
        "df = await flow.abatch([{'i': i} for i in range(3)], progress=False)\nprint(df['work'].tolist())",
    ]
    nb = run_cells(cells)
    outputs = nb.cells[1]["outputs"]
    widget = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(widget) == 1
    assert widget[0]["data"]["text/plain"].startswith("<batch progress:")
    assert output_text(nb.cells[1]).strip().endswith("[0, 10, 20, 30]")
    assert output_text(nb.cells[2]).strip() == "[0, 10, 20]"
    assert "application/vnd.jupyter.widget-view+json" not in str(nb.cells[2]["outputs"])
