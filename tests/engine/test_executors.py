"""executor="process": sync nodes in worker processes that a cancel, timeout or interrupt kills;
thread nodes left running after a cancel are reported at once."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

import nbflow as nf
from nbflow._engine.executors import process_pool

pytestmark = pytest.mark.anyio


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_for(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def make_burner():
    # A local function travels by value (as a notebook cell's does): the worker need not import this module.
    def burn_forever(pidfile: str) -> int:
        import os
        from pathlib import Path

        Path(pidfile).write_text(str(os.getpid()))
        x = 0
        while True:
            x += 1

    return burn_forever


def test_a_process_node_runs_in_another_process_and_returns_its_output():
    flow = nf.Flow("proc")

    @flow.node(executor="process")
    def where(n: int) -> dict:
        return {"pid": os.getpid(), "square": n * n}

    @flow.node
    def after(where: dict) -> int:
        return where["square"] + 1

    run = flow.run(n=7, show=False)
    assert run.status is nf.RunStatus.SUCCEEDED
    assert run["where"]["pid"] != os.getpid()
    assert run["after"] == 50
    assert flow.nodes["where"].options["executor"] == "process"


def test_a_flow_default_runs_every_plain_sync_node_in_a_process():
    flow = nf.Flow("proc_default", executor="process")

    @flow.node
    def a() -> int:
        return os.getpid()

    @flow.node(thread=False)
    def inline(a: int) -> int:
        return os.getpid()

    @flow.node
    async def b(a: int) -> int:
        return os.getpid()

    run = flow.run(show=False)
    assert run["a"] != os.getpid()
    assert run["inline"] == os.getpid() and run["b"] == os.getpid()
    assert "executor" not in flow.nodes["b"].options


def test_a_timeout_kills_the_worker_process(tmp_path):
    pidfile = tmp_path / "pid"
    flow = nf.Flow("proc_timeout")
    flow.add(make_burner(), name="spin", executor="process", timeout=3.0)
    t0 = time.perf_counter()
    run = flow.run(pidfile=str(pidfile), show=False)
    assert time.perf_counter() - t0 < 10
    assert isinstance(run.nodes["spin"].error, nf.NodeTimeoutError)
    pid = int(pidfile.read_text())
    assert wait_for(lambda: not alive(pid)), f"worker {pid} still running after the timeout"
    assert pid in process_pool.killed


async def test_cancelling_a_run_kills_its_process_node(tmp_path):
    pidfile = tmp_path / "pid"
    flow = nf.Flow("proc_cancel")
    flow.add(make_burner(), name="spin", executor="process")
    handle = flow.start(pidfile=str(pidfile), show=False)
    for _ in range(600):
        if pidfile.exists() and pidfile.read_text():
            break
        await asyncio.sleep(0.05)
    pid = int(pidfile.read_text())
    assert alive(pid)
    handle.cancel()
    run = await handle
    assert run.nodes["spin"].status is nf.NodeStatus.CANCELLED
    for _ in range(600):
        if not alive(pid):
            break
        await asyncio.sleep(0.05)
    assert not alive(pid)


def test_an_exception_in_the_worker_is_the_nodes_error_with_the_remote_traceback():
    flow = nf.Flow("proc_err")

    @flow.node(executor="process")
    def bad(x: int) -> int:
        raise ValueError(f"x={x} is not allowed")

    run = flow.run(x=3, show=False)
    err = run.nodes["bad"].error
    assert isinstance(err, ValueError) and str(err) == "x=3 is not allowed"
    assert "in bad" in run.nodes["bad"].traceback  # the worker's frame of the user's function


def test_an_unpicklable_input_names_the_node_and_parameter():
    flow = nf.Flow("proc_pickle")

    @flow.node(executor="process")
    def use(lock: object) -> int:
        return 1

    run = flow.run(lock=threading.Lock(), show=False)
    err = run.nodes["use"].error
    assert isinstance(err, nf.ProcessNodeError) and isinstance(err, nf.NbflowError)
    assert err.node == "use" and "'lock'" in str(err) and "executor='process'" in str(err)


def test_a_worker_that_dies_fails_the_node_clearly_and_the_next_call_gets_a_fresh_one():
    flow = nf.Flow("proc_die")

    @flow.node(executor="process")
    def die(code: int) -> int:
        if code:
            os._exit(code)
        return os.getpid()

    run = flow.run(code=3, show=False)
    err = run.nodes["die"].error
    assert isinstance(err, nf.ProcessNodeError) and "died" in str(err) and "exit code 3" in str(err)
    assert flow.run(code=0, show=False).status is nf.RunStatus.SUCCEEDED


def test_batch_rows_of_a_process_node_run_on_several_workers_at_once(tmp_path):
    flow = nf.Flow("proc_batch")
    nf.config.process_workers = 2
    try:

        @flow.node(executor="process")
        def row(i: int, folder: str) -> int:
            # Each row waits (up to 20 s) until two rows are running at once.
            Path(folder, f"{i}").write_text("")
            deadline = time.monotonic() + 20
            while len(os.listdir(folder)) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            return os.getpid()

        df = flow.batch([{"i": i, "folder": str(tmp_path)} for i in range(2)], progress=False)
    finally:
        nf.config.process_workers = None
    assert list(df["status"]) == ["succeeded", "succeeded"]
    assert df["row"].nunique() == 2  # two worker processes, at the same time


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"executor": "gpu"}, "executor='gpu'"),
        ({"executor": "process", "thread": False}, "thread=False"),
    ],
)
def test_bad_executor_declarations_are_refused_where_written(kwargs, message):
    flow = nf.Flow("bad_exec")
    with pytest.raises(nf.FlowDefinitionError, match="node 'f'") as info:

        @flow.node(**kwargs)
        def f() -> int:
            return 1

    assert message in str(info.value)


def test_an_async_process_node_is_refused():
    flow = nf.Flow("bad_exec_async")
    with pytest.raises(nf.FlowDefinitionError, match="for sync functions"):

        @flow.node(executor="process")
        async def f() -> int:
            return 1


async def test_cancelling_a_run_while_a_thread_node_runs_says_so_naming_the_node():
    flow = nf.Flow("thread_left")
    release = threading.Event()

    @flow.node
    def train() -> int:
        release.wait(30)
        return 1

    handle = flow.start(show=False)
    await asyncio.sleep(0.3)
    with pytest.warns(nf.NodeStillRunningWarning, match=r"node 'train' is still running.*executor='process'"):
        handle.cancel()
        await handle
    release.set()


async def test_a_thread_node_that_finished_is_not_reported():
    flow = nf.Flow("thread_done")

    @flow.node
    def quick() -> int:
        return 1

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", nf.NodeStillRunningWarning)
        run = await flow.arun(show=False)
    assert run["quick"] == 1
