"""Build a notebook from a Python file of cells, execute it in a real kernel and save it with outputs.

Cells in the source are separated by lines starting with ``# %%`` (``# %% [markdown]`` for markdown,
whose lines are written as ``# text``).

    python scripts/make_notebook.py notebooks/src/01_quickstart.py notebooks/01_quickstart.ipynb
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def parse(text: str) -> list[nbformat.NotebookNode]:
    cells = []
    for chunk in text.split("# %%")[1:]:
        header, _, body = chunk.partition("\n")
        body = body.strip("\n")
        if "[markdown]" in header:
            lines = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.splitlines()]
            cells.append(nbformat.v4.new_markdown_cell("\n".join(lines)))
        else:
            cells.append(nbformat.v4.new_code_cell(body))
    return cells


def main(src: str, dest: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = parse(Path(src).read_text())
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(Path(dest).parent)}},
    )
    client.execute()
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"  # stable ids keep diffs small
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, dest)
    print(f"wrote {dest}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
