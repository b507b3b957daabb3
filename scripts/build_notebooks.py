"""Execute the notebooks from their jupytext sources: notebooks/src/NAME.py -> notebooks/NAME.ipynb.

    python scripts/build_notebooks.py                         # every notebook
    python scripts/build_notebooks.py 02_resilience 04_batch_eval

The sources are percent-format scripts paired with the notebooks (notebooks/jupytext.toml), so
JupyterLab with jupytext keeps both in step while you edit; this script re-executes a source from a
clean kernel (nbclient, the kernel named ``python3``) and saves the notebook with its outputs and
its widgets' state (the docs site renders the run views from it). Cell ids are stable (``cell-N``)
to keep diffs small. Run it through ``make notebooks-build``, which installs what it needs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SOURCES = NOTEBOOKS / "src"


def build(name: str) -> Path:
    src = SOURCES / f"{name}.py"
    if not src.is_file():
        known = ", ".join(sorted(p.stem for p in SOURCES.glob("*.py")))
        raise SystemExit(f"no notebook source {src}; known: {known}")
    nb = jupytext.read(src, fmt="py:percent")
    nb.metadata.pop("jupytext", None)  # the pairing lives in notebooks/jupytext.toml
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
        cell.get("metadata", {}).pop("execution", None)
    dest = NOTEBOOKS / f"{name}.ipynb"
    nbformat.write(nb, dest)
    return dest


def main(names: list[str]) -> None:
    for name in names or sorted(p.stem for p in SOURCES.glob("*.py")):
        print(f"executing {name} ...", flush=True)
        print(f"wrote {build(name).relative_to(NOTEBOOKS.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])
