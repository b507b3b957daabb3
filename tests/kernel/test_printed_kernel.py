"""In a real ipykernel: a node's print still reaches the cell, and is kept with the node's attempt."""

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

DEFINE = """
import nbflow as nf
flow = nf.Flow("printing")

@flow.node
def fit(n: int) -> int:
    print(f"fitting {n} rows")
    return n

@flow.node
async def report(fit: int) -> str:
    print("reporting")
    return str(fit)
"""


def test_a_node_print_reaches_the_cell_and_the_record_in_a_kernel():
    nb = run_cells(
        [
            DEFINE,
            "run = flow.run(n=3, show=False)",
            "print(repr(run.nodes['fit'].printed), repr(run.nodes['report'].printed))",
        ]
    )
    assert "fitting 3 rows" in output_text(nb.cells[1]) and "reporting" in output_text(nb.cells[1])
    assert output_text(nb.cells[2]).strip() == "'fitting 3 rows\\n' 'reporting\\n'"
