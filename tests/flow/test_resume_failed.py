"""Resuming a FAILED run (issue 12): ``run.resume()`` / ``flow.resume(run_id, store=...)`` /
``nf.load_run(db, id).resume()`` run the failed nodes and what they skipped again, and keep every other
succeeded node (counted: not executed again), with no cache."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

import nbflow as nf


def _flaky_flow(name: str, calls: Counter, broken: dict) -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def load(x: int) -> int:
        calls["load"] += 1
        return x * 10

    @flow.node
    def side(x: int) -> int:  # independent of the failure
        calls["side"] += 1
        return x + 1

    @flow.node
    def model(load: int) -> int:
        calls["model"] += 1
        if broken["model"]:
            raise ConnectionError("model server down")
        return load + 5

    @flow.node
    def report(model: int, side: int) -> str:
        calls["report"] += 1
        return f"{model}/{side}"

    return flow


def test_resume_in_memory_reruns_only_the_failed_node_and_what_it_skipped() -> None:
    calls: Counter = Counter()
    broken = {"model": True}
    flow = _flaky_flow("resume_failed_mem", calls, broken)
    run = flow.run(x=1, show=False)
    assert run.status is nf.RunStatus.FAILED and run.nodes["report"].status is nf.NodeStatus.SKIPPED
    broken["model"] = False
    assert run.resume() is run
    assert run.status is nf.RunStatus.SUCCEEDED and run.reason is None
    assert run["report"] == "15/2"
    assert calls == Counter(load=1, side=1, model=2, report=1)  # load and side kept, not run again


def test_resume_a_failed_run_from_its_checkpoint_by_id(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    calls: Counter = Counter()
    broken = {"model": True}
    flow = _flaky_flow("resume_failed_store", calls, broken)
    run_id = flow.run(x=2, show=False, store=db).run_id
    assert nf.load_run(db, run_id).status is nf.RunStatus.FAILED
    broken["model"] = False
    done = flow.resume(run_id, store=db)
    assert done.status is nf.RunStatus.SUCCEEDED and done["report"] == "25/3"
    assert calls == Counter(load=1, side=1, model=2, report=1)
    back = nf.load_run(db, run_id)
    assert back.status is nf.RunStatus.SUCCEEDED and back["report"] == "25/3" and back.reason is None
    with pytest.raises(nf.ResumeConflictError):
        back.resume()  # succeeded: nothing to resume


def test_a_failed_run_resumed_in_a_new_process_after_a_restart(tmp_path: Path) -> None:
    """The real thing: the run fails in one process; another (the fix deployed) resumes it from the file."""
    db = tmp_path / "runs.db"
    log = tmp_path / "calls.log"
    script = tmp_path / "flow.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            import nbflow as nf

            flow = nf.Flow("resume_failed_restart")

            def note(name):
                with open({str(log)!r}, "a") as f:
                    f.write(name + "\\n")

            @flow.node
            def load(x: int) -> int:
                note("load")
                return x * 10

            @flow.node
            def model(load: int) -> int:
                note("model")
                if sys.argv[1] == "broken":
                    raise ConnectionError("model server down")
                return load + 5

            if sys.argv[1] == "broken":
                print(flow.run(x=3, store={str(db)!r}, show=False).run_id)
            else:
                run = nf.load_run({str(db)!r}, sys.argv[2]).resume()
                print(run.status.value, run["model"])
            """
        )
    )
    first = subprocess.run([sys.executable, str(script), "broken"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    run_id = first.stdout.split()[-1]
    second = subprocess.run([sys.executable, str(script), "fixed", run_id], capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split()[-2:] == ["succeeded", "35"]
    assert log.read_text().split() == ["load", "model", "model"]  # load ran once


def test_failure_handlers_and_continue_consumers_run_again_with_the_node() -> None:
    calls: Counter = Counter()
    broken = {"a": True}
    flow = nf.Flow("resume_failed_handlers")

    @flow.node
    def a(x: int) -> int:
        calls["a"] += 1
        if broken["a"]:
            raise ValueError("bad")
        return x

    @flow.node(on_failure_of="a")
    def fallback(a: nf.ErrorInfo) -> str:
        calls["fallback"] += 1
        return f"handled {a.type}"

    @flow.node
    def b(x: int) -> int:
        calls["b"] += 1
        raise RuntimeError("b is broken too")

    @flow.node
    def c(b: int) -> int:
        calls["c"] += 1
        return b

    run = flow.run(x=1, show=False)
    assert run.status is nf.RunStatus.FAILED and run["fallback"] == "handled ValueError"
    broken["a"] = False
    run.resume()
    # a's handler does not run now that a succeeds; b failed again, c skipped again; nothing stale kept.
    assert run.nodes["a"].status is nf.NodeStatus.SUCCEEDED
    assert run.nodes["fallback"].status is nf.NodeStatus.SKIPPED
    assert run.status is nf.RunStatus.FAILED and run.nodes["c"].status is nf.NodeStatus.SKIPPED
    assert calls == Counter(a=2, fallback=1, b=2)


def test_resuming_a_failed_run_with_an_answer_or_twice_is_a_conflict(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    calls: Counter = Counter()
    flow = _flaky_flow("resume_failed_conflicts", calls, {"model": True})
    run = flow.run(x=1, show=False, store=db)
    with pytest.raises(nf.ResumeConflictError, match="no open question"):
        run.resume("yes")
    stale = nf.load_run(db, run.run_id)
    run.resume()  # fails again (still broken), but it was claimed
    assert run.status is nf.RunStatus.FAILED
    with pytest.raises(nf.ResumeConflictError, match="already resumed"):
        stale.resume()  # the store had it FAILED and claimed it since: this copy is stale
    assert calls["load"] == 1 and calls["model"] == 2


def _map_flow(name: str, calls: Counter, broken: set) -> nf.Flow:
    """A map of model calls over 6 documents; the items in ``broken`` fail (a server error), and the first
    failure cancels the items still waiting (the map's default errors="terminate")."""
    import asyncio

    flow = nf.Flow(name)

    @flow.node
    def docs(n: int) -> list[int]:
        calls["docs"] += 1
        return list(range(n))

    @flow.map(over="docs")
    async def summarize(docs: int, style: str) -> str:
        calls[docs] += 1
        # Items 0 and 1 finish before 2 fails (20 ms apart); while the server is broken, 3-5 are still waiting
        # when it does, and are cancelled.
        await asyncio.sleep(5 if broken and docs > 2 else 0.02 * docs)
        if docs in broken:
            raise ConnectionError(f"server error on doc {docs}")
        return f"{style}:{docs}"

    @flow.node
    def digest(summarize: list[str]) -> str:
        calls["digest"] += 1
        return "|".join(summarize)

    return flow


def test_a_resumed_failed_map_calls_only_the_items_that_did_not_succeed() -> None:
    calls: Counter = Counter()
    broken = {2}
    flow = _map_flow("resume_failed_map", calls, broken)
    run = flow.run(n=6, style="s", show=False)
    items = run.nodes["summarize"].items
    assert run.status is nf.RunStatus.FAILED and items is not None
    assert [i.status for i in items[:3]] == [nf.NodeStatus.SUCCEEDED] * 2 + [nf.NodeStatus.FAILED]
    assert all(i.status is nf.NodeStatus.CANCELLED for i in items[3:])
    broken.clear()
    calls.clear()
    run.resume()
    assert run.status is nf.RunStatus.SUCCEEDED and run["digest"] == "|".join(f"s:{i}" for i in range(6))
    assert calls == Counter({2: 1, 3: 1, 4: 1, 5: 1, "digest": 1})  # items 0 and 1 kept, docs not run again
    items = run.nodes["summarize"].items
    assert items is not None and all(i.status is nf.NodeStatus.SUCCEEDED and i.error is None for i in items)


def test_a_failed_map_resumed_from_its_checkpoint_keeps_its_succeeded_items(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    calls: Counter = Counter()
    broken = {2}
    flow = _map_flow("resume_failed_map_store", calls, broken)
    run_id = flow.run(n=6, style="s", show=False, store=db).run_id
    broken.clear()
    calls.clear()
    done = flow.resume(run_id, store=db)  # read back from the file: the items come from the checkpoint
    assert done.status is nf.RunStatus.SUCCEEDED and done["digest"] == "|".join(f"s:{i}" for i in range(6))
    assert calls == Counter({2: 1, 3: 1, 4: 1, 5: 1, "digest": 1})
    back = nf.load_run(db, run_id)
    assert back["digest"] == done["digest"] and back.nodes["summarize"].items is not None
    assert [i.status for i in back.nodes["summarize"].items] == [nf.NodeStatus.SUCCEEDED] * 6


def test_a_failed_map_whose_inputs_run_again_calls_every_item_again() -> None:
    """The map ran on an optional input that had failed: once that input runs again and succeeds, items
    computed without it must not be kept."""
    import asyncio

    calls: Counter = Counter()
    broken = {"hint": True}
    flow = nf.Flow("resume_failed_map_inputs")

    @flow.node
    def hint(x: int) -> str:
        if broken["hint"]:
            raise ConnectionError("hint service down")
        return "H"

    @flow.map(over="docs", inputs={"hint": nf.optional("hint")})
    async def summarize(docs: int, hint: str | nf.Missing) -> str:
        calls[docs] += 1
        await asyncio.sleep(0.02 * docs)
        if docs == 2 and hint is nf.MISSING:
            raise ValueError("doc 2 needs the hint")
        return f"{'-' if hint is nf.MISSING else hint}{docs}"

    run = flow.run(x=1, docs=[0, 1, 2, 3], show=False)
    assert run.status is nf.RunStatus.FAILED and run.nodes["summarize"].status is nf.NodeStatus.FAILED
    broken["hint"] = False
    calls.clear()
    run.resume()
    assert run.status is nf.RunStatus.SUCCEEDED and run["summarize"] == ["H0", "H1", "H2", "H3"]
    assert calls == Counter({0: 1, 1: 1, 2: 1, 3: 1})


def test_a_failed_map_resume_killed_midway_still_keeps_the_items_that_had_succeeded(tmp_path: Path) -> None:
    """SIGKILL during the resume of a failed map: the next resume (another process) still calls only the
    items that had not succeeded, as the claim stored them with the map's fresh record."""
    import os
    import signal
    import time

    db = tmp_path / "runs.db"
    log = tmp_path / "calls.log"
    script = tmp_path / "flow.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            import nbflow as nf

            flow = nf.Flow("resume_failed_map_kill")
            mode = sys.argv[1]

            @flow.map(over="docs")
            async def summarize(docs: int) -> str:
                with open({str(log)!r}, "a") as f:
                    f.write(f"{{mode}}:{{docs}}\\n")
                if mode == "broken":
                    await asyncio.sleep(5 if docs > 2 else 0.02 * docs)
                    if docs == 2:
                        raise ConnectionError("server error")
                if mode == "hang":
                    await asyncio.sleep(600)  # killed here
                return f"s{{docs}}"

            if mode == "broken":
                print(flow.run(docs=list(range(6)), store={str(db)!r}, show=False).run_id)
            else:
                run = nf.load_run({str(db)!r}, sys.argv[2]).resume()
                print(run.status.value, run["summarize"])
            """
        )
    )
    first = subprocess.run([sys.executable, str(script), "broken"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    run_id = first.stdout.split()[-1]
    hang = subprocess.Popen(
        [sys.executable, str(script), "hang", run_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every item called again is waiting: kill the process now
            if log.exists() and sum(line.startswith("hang:") for line in log.read_text().split()) == 4:
                break
            time.sleep(0.05)
        os.kill(hang.pid, signal.SIGKILL)
    finally:
        hang.wait(timeout=60)
    third = subprocess.run([sys.executable, str(script), "fixed", run_id], capture_output=True, text=True, timeout=120)
    assert third.returncode == 0, third.stderr
    assert "succeeded" in third.stdout and "'s0', 's1', 's2', 's3', 's4', 's5'" in third.stdout
    calls = log.read_text().split()
    assert sorted(c for c in calls if c.startswith("hang:")) == ["hang:2", "hang:3", "hang:4", "hang:5"]
    assert sorted(c for c in calls if c.startswith("fixed:")) == ["fixed:2", "fixed:3", "fixed:4", "fixed:5"]
