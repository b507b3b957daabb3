"""Two processes resuming one stored batch never run the same rows: the second is refused while the first
runs (a StoreError naming the batch and the other process), and takes the batch over once that process
is gone. Real subprocesses, a real SQLite file; every execution is counted in a side file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf

N = 2000

CHILD = """
import os, sys, asyncio
import pandas as pd
import nbflow as nf

db, log, n, pause, gate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
flow = nf.Flow("two_resumers")

@flow.node
async def work(x: int) -> int:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{x}\\n".encode())  # one small O_APPEND write: lines never interleave
    os.close(fd)
    await asyncio.sleep(pause)
    while x >= 1000 and not os.path.exists(gate):  # the test opens the gate when it has seen enough
        await asyncio.sleep(0.05)
    return x * 2

try:
    frame = flow.batch(pd.DataFrame({"x": range(n)}), store=db, batch_id="shared", resume=True,
                       concurrency=8, progress=False)
except nf.StoreError as exc:
    print("REFUSED", exc, flush=True)
    sys.exit(3)
ok = (frame["status"] == "succeeded").sum()
assert list(frame["work"]) == [2 * x for x in range(n)], "wrong outputs"
print("DONE", len(frame), ok, flush=True)
"""


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    db, log, child = tmp_path / "runs.db", tmp_path / "executions.log", tmp_path / "child.py"
    child.write_text(CHILD)
    s = {"db": db, "log": log, "child": child, "gate": tmp_path / "gate"}
    # The batch ran its first 500 rows before (a resume picks up the other 1500).
    before = _start(s, pause=0.0, n=500)
    out, err = before.communicate(timeout=300)
    assert before.returncode == 0 and "DONE 500 500" in out, (out, err)
    log.unlink()
    return s


def _start(s: dict[str, Path], pause: float, n: int = N) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(s["child"]), str(s["db"]), str(s["log"]), str(n), str(pause), str(s["gate"])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _executions(log: Path) -> Counter[int]:
    return Counter(int(line) for line in log.read_text().split()) if log.exists() else Counter()


def _wait_for_rows(log: Path, at_least: int, proc: subprocess.Popen[str], limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while sum(_executions(log).values()) < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first process ran no rows"
        time.sleep(0.05)


def test_a_second_resumer_is_refused_while_the_first_runs(setup: dict[str, Path]) -> None:
    first = _start(setup, pause=0.0)  # rows from 1000 on wait for the gate: it runs until the test opens it
    _wait_for_rows(setup["log"], 20, first)
    second = _start(setup, pause=0.0)
    out2, err2 = second.communicate(timeout=180)
    setup["gate"].touch()
    out1, err1 = first.communicate(timeout=300)
    assert first.returncode == 0 and f"DONE {N} {N}" in out1, (out1, err1)
    assert second.returncode == 3, (out2, err2)
    assert "batch 'shared' is being run by process" in out2 and str(first.pid) in out2, out2
    executions = _executions(setup["log"])
    assert set(executions) == set(range(500, N)) and max(executions.values()) == 1  # each row once
    with nf.BatchStore(setup["db"]) as store:
        assert len(store.rows("shared")) == N


def test_a_killed_resumers_batch_is_taken_over_and_completed(setup: dict[str, Path]) -> None:
    first = _start(setup, pause=0.0)
    _wait_for_rows(setup["log"], 500, first)  # 500 rows finished or running, the rest wait for the gate
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=60)
    ran_before = _executions(setup["log"])
    setup["gate"].touch()
    second = _start(setup, pause=0.0)
    out2, err2 = second.communicate(timeout=300)
    assert second.returncode == 0 and f"DONE {N} {N}" in out2, (out2, err2)  # the dead claim was taken over
    executions = _executions(setup["log"])
    assert set(executions) == set(range(500, N))
    twice = [x for x, c in executions.items() if c > 1]
    assert all(ran_before[x] == 1 for x in twice) and len(twice) <= 8  # only rows in flight at the kill


def test_two_concurrent_batches_of_one_store_in_one_process(tmp_path: Path) -> None:
    import asyncio

    db = tmp_path / "runs.db"
    flow = nf.Flow("same_process")
    started = asyncio.Event()

    @flow.node
    async def work(x: int) -> int:
        started.set()
        await asyncio.sleep(0.01)
        return x

    async def both() -> None:
        rows = pd.DataFrame({"x": range(100)})
        first = asyncio.create_task(flow.abatch(rows, store=db, batch_id="b", concurrency=4, progress=False))
        await started.wait()
        with pytest.raises(nf.StoreError, match=r"batch 'b' is being run by another call in this process"):
            await flow.abatch(rows, store=db, batch_id="b", resume=True, progress=False)
        assert len(await first) == 100
        again = await flow.abatch(rows, store=db, batch_id="b", resume=True, progress=False)  # released
        assert (again["status"] == "succeeded").all()

    asyncio.run(both())
