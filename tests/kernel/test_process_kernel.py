"""Interrupting a notebook cell stops a process node's work for real; a thread node left running is named."""

from __future__ import annotations

import pytest

from tests.helpers.kernel import output_text, run_cells

pytestmark = pytest.mark.kernel

DEFINE = """
import os, time, pathlib, tempfile, nbflow as nf
flow = nf.Flow("fit_flow")
PIDFILE = pathlib.Path(tempfile.mkdtemp()) / "pid"

@flow.node
def data() -> list:
    return list(range(10))

@flow.node(executor="process")
def fit(data: list) -> float:
    pathlib.Path(PIDFILE).write_text(str(os.getpid()))
    x = 0.0
    while True:  # a training loop that never ends: only killing the worker stops it
        x += sum(data) * 1e-9

# Warm the worker pool, so the interrupt lands while fit is running.
warm = nf.Flow("warm")
warm.add(lambda: os.getpid(), name="w", executor="process")
warm.run(show=False)
print("ready")
"""

CHECK = """
def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def alive(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

pid = int(PIDFILE.read_text())
deadline = time.monotonic() + 20
while alive(pid) and time.monotonic() < deadline:
    time.sleep(0.05)
before = cpu_seconds(os.getpid()); t0 = time.monotonic()
time.sleep(2.0)
busy = (cpu_seconds(os.getpid()) - before) / (time.monotonic() - t0)
print("worker alive:", alive(pid))
print("kernel cpu share:", round(busy, 2))
print(flow.last_run.nodes["fit"].status.name, flow.last_run.nodes["data"].status.name)
"""


def test_interrupting_a_process_node_kills_its_worker_and_leaves_no_cpu_busy():
    nb = run_cells([DEFINE, "run = flow.run(show=False)", CHECK], {1: 6.0}, timeout=120)
    assert "ready" in output_text(nb.cells[0])
    assert "!RunInterrupted" in output_text(nb.cells[1])
    assert nb.cells[1].metadata["wall_s"] < 20
    out = output_text(nb.cells[2])
    assert "worker alive: False" in out, out
    share = float(out.split("kernel cpu share:")[1].split()[0])
    assert share < 0.2, out  # nothing left computing in the kernel (a running fit would be ~1.0)
    assert "CANCELLED SUCCEEDED" in out


THREAD = """
import threading, time, nbflow as nf
flow = nf.Flow("thread_fit")
stop = threading.Event()

@flow.node
def train() -> int:
    stop.wait(60)  # a thread Python cannot stop
    return 1
"""


def test_interrupting_a_thread_node_names_it_and_the_fix_at_once():
    nb = run_cells([THREAD, "run = flow.run(show=False)", "stop.set(); print('released')"], {1: 2.0}, timeout=120)
    out = output_text(nb.cells[1])
    assert "!RunInterrupted" in out
    assert "node 'train' is still running in a worker thread" in out, out
    assert "executor='process'" in out
    assert nb.cells[1].metadata["wall_s"] < 15
