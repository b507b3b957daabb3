"""Process nodes: the BLAS thread budget also holds for a library first imported inside the call,
and the rows of a batch starting together share the cores from their first call."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbflow as nf
from nbflow._engine.executors import cores, process_pool

pytest.importorskip("threadpoolctl")
pytest.importorskip("numpy")


def test_rows_starting_together_each_get_their_share_even_for_a_library_imported_in_the_call(tmp_path: Path) -> None:
    process_pool.shutdown()  # fresh workers: numpy not yet imported in any of them
    n = cores()
    flow = nf.Flow("blas_budget")

    @flow.node(executor="process")
    def probe(i: int, folder: str = "") -> int:
        import os
        import time

        import numpy as np  # first imported here, inside the call
        from threadpoolctl import threadpool_info

        np.ones((40, 40)) @ np.ones((40, 40))
        if folder:  # the rows overlap: one may get the worker started at definition, the others a cold one
            open(os.path.join(folder, str(i)), "w").close()
            deadline = time.monotonic() + 30
            while len(os.listdir(folder)) < n and time.monotonic() < deadline:
                time.sleep(0.01)
        return max(x["num_threads"] for x in threadpool_info() if x["user_api"] == "blas")

    df = flow.batch([{"i": i, "folder": str(tmp_path)} for i in range(n)], concurrency=n, progress=False)
    assert (df["status"] == "succeeded").all(), df["error_message"].tolist()
    assert df["probe"].tolist() == [max(1, cores() // n)] * n  # not the library's default of every core each

    # A single call alone still gets every core.
    alone = flow.run(i=0, show=False)
    assert alone["probe"] == cores()
