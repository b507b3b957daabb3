"""In a real kernel: a process node defined in one cell has its worker warm when a later cell runs the flow,
and a kernel shut down while that worker is still importing exits at once, leaving no worker behind."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel


def _module(tmp_path: Path, seconds: float) -> Path:
    """``slow_dep``: its import takes ``seconds`` in a worker (a heavy library), none in the kernel."""
    mark = tmp_path / "imported"
    (tmp_path / "slow_dep.py").write_text(
        textwrap.dedent(
            f"""
            import os, time
            if os.environ.get("KERNEL_PID") != str(os.getpid()):
                with open({str(mark)!r}, "a") as f:
                    f.write(f"{{os.getpid()}}\\n")
                time.sleep({seconds})

            def fit(x):
                return x + 1
            """
        )
    )
    return mark


def _define(tmp_path: Path) -> str:
    return textwrap.dedent(
        f"""
        import os, sys, time
        os.environ["KERNEL_PID"] = str(os.getpid())
        sys.path.insert(0, {str(tmp_path)!r})
        import slow_dep
        import nbflow as nf

        flow = nf.Flow("notebook_shape")

        @flow.node
        def data() -> int:
            return 41

        @flow.node(executor="process")
        def model(data: int) -> int:
            return slow_dep.fit(data)

        print("defined")
        """
    )


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_process_node_defined_in_one_cell_is_warm_when_a_later_cell_runs_it(tmp_path: Path) -> None:
    mark = _module(tmp_path, 4.0)
    wait = f"""
import pathlib
deadline = time.monotonic() + 60  # the user reads the cell's output and runs the next one
while not pathlib.Path({str(mark)!r}).exists() and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(5.0)
print("waited")
"""
    run = """
t = time.monotonic()
run = flow.run(show=False)
print("result", run["model"], "took", round(time.monotonic() - t, 2))
"""
    nb = run_cells([_define(tmp_path), wait, run], timeout=180)
    assert "defined" in output_text(nb.cells[0])
    assert nb.cells[0].metadata["wall_s"] < 4.0  # the definition did not wait for the worker's import
    out = output_text(nb.cells[2])
    assert "result 42" in out, out
    assert float(out.split("took")[1].split()[0]) < 2.0, out  # the worker's 4 s import was paid before the run
    assert len(mark.read_text().split()) == 1  # one worker, started at the definition


def test_a_kernel_shut_down_while_a_worker_is_still_importing_exits_at_once_and_leaves_none(tmp_path: Path) -> None:
    mark = _module(tmp_path, 60.0)  # still importing when the kernel goes
    wait = f"""
import pathlib
deadline = time.monotonic() + 60
while not pathlib.Path({str(mark)!r}).exists() and time.monotonic() < deadline:
    time.sleep(0.05)
print("importing")
"""
    t = time.monotonic()
    nb = run_cells([_define(tmp_path), wait], timeout=180)
    assert "importing" in output_text(nb.cells[1])
    shutdown = time.monotonic() - t - sum(c.metadata["wall_s"] for c in nb.cells)
    assert shutdown < 20, shutdown  # not held by the worker's 60 s import
    pid = int(mark.read_text().split()[0])
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"worker {pid} outlived its kernel"
    assert pid != os.getpid()
