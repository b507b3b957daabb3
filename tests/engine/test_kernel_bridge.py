"""Running in a script, from inside a running loop (as in a notebook cell), in the background; cancelling."""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import anyio
import pytest

import nbflow as nf


def _slow_flow(ran: list[str] | None = None) -> nf.Flow:
    flow = nf.Flow("slow")

    @flow.node
    async def quick() -> int:
        return 1

    @flow.node
    async def forever(quick: int) -> int:
        if ran is not None:
            ran.append("forever started")
        await anyio.sleep(600)
        return quick

    @flow.node
    def after(forever: int) -> int:
        return forever

    return flow


def test_run_blocks_inside_a_running_loop_like_a_notebook_cell():
    flow = nf.Flow("f")
    loop_threads = []

    @flow.node
    async def a() -> int:
        loop_threads.append(threading.get_ident())
        return 41

    @flow.node
    def b(a: int) -> int:
        return a + 1

    async def cell():  # the kernel's loop is running while the cell calls the blocking API
        return flow.run()

    run = anyio.run(cell)
    assert run["b"] == 42
    assert loop_threads[0] != threading.get_ident()  # ran on the worker thread's loop


def test_run_inside_a_running_loop_when_sniffio_says_asyncio_runs():
    """sniffio (installed with openai, httpx) marks the caller's context as running asyncio; the
    worker thread's copy of that context must not, or its loop refuses to start."""
    import sniffio

    flow = nf.Flow("f")

    @flow.node
    async def a() -> int:
        return 1

    async def cell():
        assert sniffio.current_async_library() == "asyncio"
        return flow.run()

    assert anyio.run(cell)["a"] == 1


def test_start_without_a_running_loop_says_what_to_do():
    with pytest.raises(nf.RunnerError, match=r"use flow.run\(...\) to block"):
        _slow_flow().start()


@pytest.mark.anyio
async def test_cancelling_a_background_run_keeps_finished_outputs():
    ran: list[str] = []
    flow = _slow_flow(ran)
    handle = flow.start()
    with anyio.fail_after(5):
        while not ran:
            await anyio.sleep(0.005)
    assert not handle.done()
    handle.cancel()
    run = await handle
    assert run is handle.run is flow.last_run
    assert run.status is nf.RunStatus.CANCELLED
    assert run["quick"] == 1
    assert run.nodes["forever"].status is nf.NodeStatus.CANCELLED
    assert run.nodes["forever"].skip_reason == "run cancelled while the node was running"
    assert run.nodes["after"].status is nf.NodeStatus.CANCELLED
    assert run.nodes["after"].skip_reason == "run cancelled before the node started"


@pytest.mark.anyio
async def test_cancelling_arun_from_an_outer_scope_propagates_and_records():
    ran: list[str] = []
    flow = _slow_flow(ran)
    with anyio.move_on_after(0.2) as scope:
        await flow.arun()
    assert scope.cancelled_caught
    run = flow.last_run
    assert run.status is nf.RunStatus.CANCELLED and run["quick"] == 1
    assert run.counts() == {"succeeded": 1, "cancelled": 2}


@pytest.mark.anyio
async def test_cancelling_a_sync_node_in_a_thread_returns_promptly():
    flow = nf.Flow("f")
    release = threading.Event()

    @flow.node
    def blocking() -> int:
        release.wait(10)
        return 1

    with pytest.warns(nf.NodeStillRunningWarning, match="'blocking'"), anyio.fail_after(5), anyio.move_on_after(0.2):
        await flow.arun()
    release.set()
    assert flow.last_run.nodes["blocking"].status is nf.NodeStatus.CANCELLED


SCRIPT = textwrap.dedent(
    """
    import sys, anyio, nbflow as nf
    flow = nf.Flow("script")

    @flow.node
    async def quick() -> int:
        return 7

    @flow.node
    async def slow(quick: int) -> int:
        print("slow started", flush=True)
        await anyio.sleep(600)
        return quick

    try:
        flow.run()
    except nf.RunInterrupted as exc:
        run = exc.run
        print("interrupted", run.status.name, run["quick"], run.nodes["slow"].status.name, flush=True)
        sys.exit(3)
    """
)


def test_ctrl_c_in_a_script_raises_run_interrupted_with_the_record(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "slow started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 3, err
    assert out.strip() == "interrupted CANCELLED 7 CANCELLED"


def test_interrupt_during_a_blocking_run_inside_a_loop_cancels_and_keeps_the_record():
    """What a kernel interrupt does to ``flow.run()`` in a cell: KeyboardInterrupt in the main thread."""
    import _thread
    import asyncio

    ran: list[str] = []
    flow = _slow_flow(ran)

    async def cell():
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        with pytest.raises(nf.RunInterrupted) as info:
            flow.run()
        return info.value.run

    loop = asyncio.new_event_loop()  # like the kernel's loop: no SIGINT handler of asyncio's own
    try:
        run = loop.run_until_complete(cell())
    finally:
        loop.close()
    assert run.status is nf.RunStatus.CANCELLED
    assert run["quick"] == 1
    assert run.nodes["forever"].status is nf.NodeStatus.CANCELLED
