"""Process nodes: a worker starts when the node is defined, importing what its code imports, so the first
run finds it warm; a module that defines process nodes, imported in a worker, starts no pool there."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

import nbflow as nf
from nbflow._engine.executors import process_pool

pytest.importorskip("cloudpickle")

SLOW = 4.0  # seconds a worker spends importing the node's module (scikit-learn, torch, ... in real life)


def _slow_module(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh pool, and an importable module whose import takes SLOW seconds in any process but this one,
    noting the importing pid in the file returned."""
    process_pool.shutdown()  # no worker left by another test
    monkeypatch.syspath_prepend(str(tmp_path))
    mark = tmp_path / f"{name}.imported"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            import os, time
            if os.getpid() != {os.getpid()}:
                time.sleep({SLOW})
                with open({str(mark)!r}, "a") as f:
                    f.write(f"{{os.getpid()}}\\n")

            def double(x):
                return 2 * x
            """
        )
    )
    return mark


def _wait_for(path: Path, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.exists()


def test_defining_a_process_node_starts_its_worker_and_imports_its_modules_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = _slow_module(tmp_path, "slow_fit_module", monkeypatch)
    flow, slow = nf.Flow("warm_at_definition"), importlib.import_module("slow_fit_module")

    @flow.node
    def data(x: int) -> int:
        return x

    t0 = time.monotonic()

    @flow.node(executor="process")
    def fit(data: int) -> tuple[int, int]:
        return slow.double(data), os.getpid()

    assert time.monotonic() - t0 < 1.0  # defining does not wait for the worker
    # Nothing ran yet: the worker imports the node's module in the background (a notebook's next cell).
    assert _wait_for(mark), "no worker imported the node's module after its definition"
    time.sleep(1.0)  # (its last imports)
    t = time.monotonic()
    run = flow.run(x=21, show=False)
    took = time.monotonic() - t
    assert run.status is nf.RunStatus.SUCCEEDED, run.errors
    value, pid = run["fit"]
    assert value == 42 and pid == int(mark.read_text().split()[0])  # the worker that imported it ran it
    assert took < SLOW - 1.0, took  # the first call did not pay the import
    assert len(mark.read_text().split()) == 1  # one worker for one process node


def test_a_module_imported_after_the_definition_is_imported_in_the_waiting_worker_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = _slow_module(tmp_path, "late_module", monkeypatch)
    flow = nf.Flow("warm_top_up")
    holder: dict[str, object] = {}

    @flow.node(executor="process")
    def fit(x: int) -> tuple[int, int]:
        return LATE.double(x), os.getpid()  # type: ignore[name-defined]  # noqa: F821  (a later cell's import)

    time.sleep(1.0)
    holder["late"] = globals()["LATE"] = importlib.import_module("late_module")  # the import, a cell later
    try:
        run = flow.run(x=1, show=False)  # the run's start finds the idle worker lacks it: imported there first
        assert run.status is nf.RunStatus.SUCCEEDED, run.errors
        assert run["fit"][0] == 2
        assert _wait_for(mark, 1) and int(mark.read_text().split()[0]) == run["fit"][1]
        assert run.nodes["fit"].attempts[-1].queued  # it waited for that import, as queue time
        again = flow.run(x=2, show=False)
        assert again["fit"] == (4, run["fit"][1])  # the same worker, not a second one
    finally:
        globals().pop("LATE", None)


FLOW_MODULE = """
import glob, os, time
import nbflow as nf

flow = nf.Flow("nested_guard")


@flow.node(executor="process")
def children() -> list[int]:
    time.sleep(1.5)  # long enough for a pool started by importing this module here to show
    kids = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        kids += [int(pid) for pid in open(path).read().split()]
    return kids
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_importing_a_module_that_defines_process_nodes_starts_no_pool_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process_pool.shutdown()
    (tmp_path / "flow_with_process_nodes.py").write_text(FLOW_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("flow_with_process_nodes")  # defines the flow: its worker imports this module
    run = module.flow.run(show=False)
    assert run.status is nf.RunStatus.SUCCEEDED, run.errors
    assert run["children"] == []  # no worker of a worker


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_script_ending_while_its_worker_still_imports_exits_at_once_and_leaves_no_worker(tmp_path: Path) -> None:
    import subprocess

    mark = tmp_path / "importing"
    (tmp_path / "endless_import.py").write_text(
        f"import os, time\nif os.environ.get('PARENT') != str(os.getpid()):\n"
        f"    open({str(mark)!r}, 'w').write(str(os.getpid()))\n    time.sleep(120)\n"
    )
    script = textwrap.dedent(
        f"""
        import os, sys, time
        os.environ["PARENT"] = str(os.getpid())
        sys.path.insert(0, {str(tmp_path)!r})
        import endless_import
        import nbflow as nf

        flow = nf.Flow("ends_early")

        @flow.node(executor="process")
        def fit(x: int) -> int:
            return endless_import.__name__ and x

        deadline = time.monotonic() + 60
        while not os.path.exists({str(mark)!r}) and time.monotonic() < deadline:
            time.sleep(0.05)
        print("exiting", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "exiting"
    t = time.monotonic()
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - t < 10  # not held by the worker's import
    pid = int(mark.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"worker {pid} outlived the script that started it"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_timeout_while_the_worker_still_imports_stops_the_node_at_once_and_the_next_run_uses_that_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = _slow_module(tmp_path, "slow_timeout_module", monkeypatch)
    flow = nf.Flow("warm_timeout")
    slow = importlib.import_module("slow_timeout_module")

    @flow.node(executor="process", timeout=1.0)
    def fit(x: int) -> tuple[int, int]:
        return slow.double(x), os.getpid()

    t = time.monotonic()
    run = flow.run(x=1, show=False)  # at once: the worker started at the definition is still importing
    assert time.monotonic() - t < SLOW - 1.0
    assert run.nodes["fit"].status is nf.NodeStatus.FAILED and "timeout" in str(run.nodes["fit"].error).lower()
    assert _wait_for(mark)
    again = flow.run(x=2, show=False)
    assert again.status is nf.RunStatus.SUCCEEDED, again.errors
    assert again["fit"] == (4, int(mark.read_text().split()[0]))  # the worker it waited for, kept


def _import_from(folder: str, name: str) -> str:
    sys.path.insert(0, folder)
    return importlib.import_module(name).__name__


def _children() -> list[int]:
    import glob

    kids: list[int] = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        kids += [int(pid) for pid in Path(path).read_text().split()]
    return kids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_dask_worker_importing_a_module_that_defines_process_nodes_starts_no_pool(tmp_path: Path) -> None:
    import logging

    distributed = pytest.importorskip("distributed")
    (tmp_path / "flow_on_dask.py").write_text(FLOW_MODULE.replace("nested_guard", "on_dask"))
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    )
    client = distributed.Client(cluster)
    try:
        before = next(iter(client.run(_children).values()))
        client.run(_import_from, str(tmp_path), "flow_on_dask")  # defines a flow with a process node there
        time.sleep(3.0)  # long enough for a pool started by that definition to show
        after = next(iter(client.run(_children).values()))
        assert after == before, (before, after)  # the Dask worker is the process: no pool beside it
    finally:
        client.close()
        cluster.close()
