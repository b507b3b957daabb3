"""Run code cells in one real ipykernel (via nbclient), optionally interrupting a cell after t seconds."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.util import ensure_async


def output_text(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif out["output_type"] == "error":
            parts.append(f"!{out['ename']}: {out['evalue']}\n")
        elif "application/vnd.jupyter.widget-view+json" in out.get("data", {}):
            continue  # a widget (the live run view): not text output
        elif "text/plain" in out.get("data", {}):
            parts.append(out["data"]["text/plain"] + "\n")
    return "".join(parts)


async def _run(nb: Any, interrupt: dict[int, float], timeout: int) -> NotebookClient:
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True)
    async with client.async_setup_kernel():
        for i, cell in enumerate(nb.cells):
            t0 = time.perf_counter()
            task = asyncio.ensure_future(client.async_execute_cell(cell, i))
            if i in interrupt:
                await asyncio.sleep(interrupt[i])
                await ensure_async(client.km.interrupt_kernel())
            await task
            cell.metadata["wall_s"] = time.perf_counter() - t0
    return client


def run_cells(sources: list[str], interrupt: dict[int, float] | None = None, timeout: int = 60) -> Any:
    """Execute ``sources`` in order in a fresh kernel; returns the notebook with outputs."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    asyncio.run(_run(nb, interrupt or {}, timeout))
    return nb
