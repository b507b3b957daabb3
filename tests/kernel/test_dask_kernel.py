"""flow.batch(executor=client) in a real ipykernel: notebook functions travel to worker processes; Ctrl-C keeps rows."""

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

CELLS = [
    """
import asyncio, logging, nbflow as nf
from distributed import Client, LocalCluster
client = Client(LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                             silence_logs=logging.ERROR))
flow = nf.Flow("kdask")

@flow.node
async def work(i: int) -> int:  # defined in the notebook (__main__): sent by value
    if i >= 4:
        await asyncio.sleep(600)
    return i * 10
""",
    "df = flow.batch([{'i': i} for i in range(4)], executor=client)\nprint(df['work'].tolist())",
    "df = flow.batch([{'i': i} for i in range(8)], executor=client, chunk_size=1)",
    "print(flow.last_batch['status'].tolist()); print(flow.last_batch['work'].tolist()[:4])",
    "client.close()",
]


def test_a_dask_batch_in_a_notebook_runs_notebook_functions_and_keeps_rows_on_interrupt() -> None:
    nb = run_cells(CELLS, {2: 3.0})
    assert output_text(nb.cells[0]) == ""
    assert output_text(nb.cells[1]).strip().endswith("[0, 10, 20, 30]")
    out = output_text(nb.cells[2])
    assert "!BatchInterrupted" in out and "4 of 8 rows finished" in out
    assert nb.cells[2].metadata["wall_s"] < 20  # prompt: the rows sleep for 10 minutes
    lines = output_text(nb.cells[3]).strip().splitlines()
    assert lines[0] == str(["succeeded"] * 4 + ["cancelled"] * 2 + ["pending"] * 2)  # 2 chunks in flight
    assert lines[1] == "[0.0, 10.0, 20.0, 30.0]"
