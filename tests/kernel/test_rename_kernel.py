"""A cell re-run with a node's function renamed warns that the old node is still wired (real ipykernel).

The cells are sent as JupyterLab sends them: an ``execute_request`` whose metadata carries the cell's id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.helpers.kernel import output_text, run_cells
from tests.helpers.raw_kernel import Kernel

pytestmark = pytest.mark.kernel


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    k = Kernel()
    try:
        k.run("import nbflow as nf\nflow = nf.Flow('pipe')", "setup")
        yield k
    finally:
        k.close()


CELL = """
@flow.node
def load(n: int) -> list:
    return list(range(n))

@flow.node(retry=2)
def {name}(load: list) -> list:
    return [x for x in load if x % 2]

@flow.node
def features({uses}: list) -> int:
    return sum({uses})
"""


def test_renaming_a_node_in_a_re_run_cell_warns_naming_both_and_the_fix(kernel: Kernel) -> None:
    cell = str(uuid.uuid4())
    first = kernel.run(CELL.format(name="clean", uses="clean"), cell)
    assert "Warning" not in first, first
    again = kernel.run(CELL.format(name="clean", uses="clean"), cell)  # the same cell again: replaced, no warning
    assert "Warning" not in again, again
    renamed = kernel.run(
        CELL.replace("features({uses}: list)", "features(clean: list)").format(name="clean2", uses="clean"), cell
    )
    assert "NbflowWarning" in renamed, renamed
    assert "node 'clean2' was declared where this cell declared node 'clean' before" in renamed
    assert "'clean' is still in flow 'pipe': 'features' still takes its output" in renamed
    assert "flow.remove('clean')" in renamed
    # The warning tells the truth: the stale node is still what 'features' gets.
    print_nodes = "print(sorted(flow.nodes), flow.run(n=5, show=False)['features'])"
    assert kernel.run(print_nodes, "other").strip() == "['clean', 'clean2', 'features', 'load'] 4"
    # Re-running it again still warns (still wired); after the fix, silence.
    assert "flow.remove('clean')" in kernel.run(CELL.format(name="clean2", uses="clean2"), cell)
    assert kernel.run("flow.remove('clean')", "other") == ""
    quiet = kernel.run(CELL.format(name="clean2", uses="clean2"), cell)
    assert "Warning" not in quiet, quiet
    assert kernel.run(print_nodes, "other").strip() == "['clean2', 'features', 'load'] 4"


def test_nodes_of_one_factory_and_other_cells_do_not_warn(kernel: Kernel) -> None:
    factory = """
def make(k):
    def step(load: list) -> int:
        return len(load) * k
    return step

@flow.node
def load(n: int) -> list:
    return list(range(n))

for k in (1, 2, 3):
    flow.add(make(k), name=f"step{k}")
"""
    cell = str(uuid.uuid4())
    for _ in range(3):  # the same place declares step1..3 each time: none is stale
        out = kernel.run(factory, cell)
        assert "Warning" not in out, out
    # The same code in another cell declares its own nodes: no warning either.
    other = kernel.run(CELL.format(name="clean", uses="clean"), str(uuid.uuid4()))
    assert "Warning" not in other, other
    # A cell that drops a node (not a rename at the same place) is not flagged as a rename.
    short = kernel.run("@flow.node\ndef load(n: int) -> list:\n    return list(range(n))\n", cell)
    assert "Warning" not in short, short


def test_without_cell_ids_an_unchanged_body_under_a_new_name_warns() -> None:
    # nbclient sends no cell id (like some front ends): the function body, unchanged by a rename, is the place.
    cell = "@flow.node\ndef {name}(n: int) -> int:\n    return n * 2\n\n@flow.node\ndef total(double: int) -> int:\n    return double\n"
    nb = run_cells(
        [
            "import nbflow as nf\nflow = nf.Flow('p')",
            cell.format(name="double"),
            cell.format(name="twice"),
            "print(sorted(flow.nodes))",
        ],
        timeout=120,
    )
    assert "Warning" not in output_text(nb.cells[1])
    text = output_text(nb.cells[2])
    assert "node 'twice' was declared where this code declared node 'double' before" in text, text
    assert "'total' still takes its output" in text and "flow.remove('double')" in text
    assert output_text(nb.cells[3]).strip() == "['double', 'total', 'twice']"
