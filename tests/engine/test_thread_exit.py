"""An abandoned sync node never holds up interpreter exit (issue 12): nbflow's worker threads are daemon
threads. Real child processes, exit times measured from the moment run() returned."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import nbflow as nf

    flow = nf.Flow("abandoned")

    @flow.node(timeout=0.3)
    def slow(x: int) -> int:
        time.sleep(10)
        open(sys.argv[1], "w").write("the abandoned call finished")
        return x

    @flow.node
    def quick(x: int) -> int:
        return x + 1

    HOW = sys.argv[2]
    if HOW == "deadline":
        flow.add(lambda x: time.sleep(10) or x, name="slow_no_timeout", thread=True)
        run = flow.run(x=1, show=False, timeout=0.5)
    else:
        run = flow.run(x=1, show=False)
    print(f"RETURNED {time.time():.6f} {run.status.value} {run['quick']}", flush=True)
    """
)


@pytest.mark.parametrize("how", ["node-timeout", "deadline"])
def test_a_script_exits_promptly_while_an_abandoned_sync_node_still_runs(tmp_path: Path, how: str) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    marker = tmp_path / "finished.txt"
    proc = subprocess.Popen(
        [sys.executable, "-W", "ignore", str(script), str(marker), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=120)
    exited = time.time()
    assert proc.returncode == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("RETURNED"))
    _, returned, status, quick = line.split()
    assert status in ("failed", "cancelled") and quick == "2"
    # The node sleeps 10 s after run() returned; the process must not wait for it (was: ~10 s).
    assert exited - float(returned) < 3.0, f"exit took {exited - float(returned):.1f}s after run() returned"
    assert not marker.exists()  # the abandoned call was dropped with the process, not waited for


def test_calls_that_were_not_abandoned_are_awaited_and_keep_their_context() -> None:
    import contextvars

    import nbflow as nf

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    flow = nf.Flow("threads_context")

    @flow.node(thread=True)
    def reads(x: int) -> tuple[int, str, str]:
        import threading

        time.sleep(0.2)
        return x, var.get(), threading.current_thread().name

    var.set("from the caller")
    run = flow.run(x=3, show=False)
    assert run["reads"] == (3, "from the caller", "nbflow-worker")
    frame = flow.batch([{"x": i} for i in range(30)], concurrency=30)
    assert list(frame.status) == ["succeeded"] * 30 and [r[0] for r in frame.reads] == list(range(30))
