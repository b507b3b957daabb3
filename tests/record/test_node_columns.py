"""A run's node records are views onto per-run columns (``_record/run.py``: ``NodeColumns``).

The engine writes the columns directly and builds no record unless somebody reads one; what a
user sees through ``run.nodes`` must be what a dict of records gave: the same mapping API, the same
record while it is alive, live values mid-run (from another thread too), and pickles that load
like the records of every stored checkpoint.
"""

from __future__ import annotations

import asyncio
import copyreg
import gc
import pickle
import threading
import time
import weakref

import pytest

import nbflow as nf


def small_flow() -> nf.Flow:
    flow = nf.Flow("cols")

    @flow.node
    async def a(x: int) -> int:
        return x + 1

    @flow.node
    def b(a: int) -> int:
        return a * 2

    @flow.node
    async def c(a: int, b: int) -> int:
        return a + b

    return flow


def test_run_nodes_reads_like_the_dict_it_replaces() -> None:
    run = small_flow().run(x=1, show=False)
    nodes = run.nodes
    assert list(nodes) == ["a", "b", "c"] == list(nodes.keys())
    assert len(nodes) == 3 and "b" in nodes and "zz" not in nodes
    assert [r.name for r in nodes.values()] == ["a", "b", "c"]
    assert [(n, r.output) for n, r in nodes.items()] == [("a", 2), ("b", 4), ("c", 6)]
    assert next(reversed(nodes)) == "c"
    assert nodes.get("zz") is None and nodes.get("zz", 5) == 5 and nodes.get("a") is nodes["a"]
    assert dict(nodes) == nodes.copy() == {n: nodes[n] for n in nodes}
    assert nodes == {n: nodes[n] for n in nodes}  # Mapping equality
    with pytest.raises(KeyError):
        nodes["zz"]
    assert "'c': <NodeRecord 'c' SUCCEEDED" in repr(nodes)
    assert run.outputs == {"a": 2, "b": 4, "c": 6}
    assert run.counts() == {"succeeded": 3}
    assert run.errors == {}


def test_a_record_is_the_same_object_while_it_is_alive_and_no_cycle_keeps_a_run() -> None:
    flow = small_flow()
    run = flow.run(x=1, show=False)
    flow.last_run = None
    rec = run.nodes["b"]
    assert run.nodes["b"] is rec and run.record("b") is rec
    # Records and their columns do not form reference cycles: a finished run nobody holds is freed
    # by reference counting, records read or not.
    ref = weakref.ref(run)
    gc.disable()
    try:
        del run, rec
        assert ref() is None
    finally:
        gc.enable()


def test_the_fields_of_a_lean_node_and_its_one_attempt_are_made_from_the_columns() -> None:
    run = small_flow().run(x=1, show=False)
    rec = run.nodes["c"]
    assert rec.status is nf.NodeStatus.SUCCEEDED and rec.output == 6 and dict(rec.inputs) == {"a": 2, "b": 4}
    assert rec.error is None and rec.traceback is None and rec.skip_reason is None
    assert not rec.cached and not rec.recovered and not rec.overridden and rec.subrun is None
    [attempt] = rec.attempts
    assert attempt.number == 1 and attempt.error is None
    assert attempt.started_at == rec.started_at and attempt.finished_at == rec.finished_at
    assert rec.finished_at is not None and rec.started_at is not None
    assert run.started_at is not None and run.finished_at is not None
    assert run.started_at <= rec.started_at <= rec.finished_at <= run.finished_at
    assert rec.attempts is rec.attempts  # made once, then kept


def test_usage_read_mid_node_on_the_lean_path_lands_on_the_attempt_that_ends_with_the_node() -> None:
    flow = nf.Flow("usage")

    @flow.node
    async def ask(x: int) -> int:
        nf.usage(input_tokens=7, output_tokens=3, cost=0.5)  # reads the attempt while the node runs
        await asyncio.sleep(0.01)
        return x

    run = flow.run(x=1, show=False)
    rec = run.nodes["ask"]
    [attempt] = rec.attempts
    assert attempt.usage.input_tokens == 7 and attempt.usage.cost == 0.5
    assert attempt.finished_at == rec.finished_at and attempt.finished_at - attempt.started_at >= 0.009


def test_a_record_read_from_another_thread_mid_run_sees_the_engine_s_writes() -> None:
    flow = nf.Flow("live")
    gate = threading.Event()

    @flow.node
    def first() -> int:
        return 1

    @flow.node
    async def slow(first: int) -> int:
        while not gate.is_set():
            await asyncio.sleep(0.005)
        return first + 1

    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def watch(handle: nf.RunHandle) -> None:
        rec = handle.run.nodes["slow"]  # made from this thread while the run goes on in the loop's
        deadline = time.monotonic() + 10
        while rec.status is not nf.NodeStatus.RUNNING and time.monotonic() < deadline:
            time.sleep(0.002)
        seen.append(("slow", rec.status.value))
        seen.append(("first", handle.run.nodes["first"].status.value))
        gate.set()
        while rec.status is not nf.NodeStatus.SUCCEEDED and time.monotonic() < deadline:
            time.sleep(0.002)
        seen.append(("slow", rec.status.value))
        done.set()

    async def main() -> nf.Run:
        handle = flow.start(show=False)
        thread = threading.Thread(target=watch, args=(handle,))
        thread.start()
        run = await handle
        await asyncio.to_thread(thread.join, 10)
        return run

    run = asyncio.run(main())
    assert done.is_set()
    assert seen == [("slow", "running"), ("first", "succeeded"), ("slow", "succeeded")]
    assert run["slow"] == 2


def test_records_pickle_in_the_stored_format_and_load_back() -> None:
    run = small_flow().run(x=1, show=False)
    rec = run.nodes["c"]
    reduced = rec.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    # The format of every stored checkpoint: the class made empty, then its fields by name.
    assert reduced[0] is copyreg.__newobj__  # type: ignore[attr-defined]
    fields = reduced[2][1]
    assert fields["name"] == "c" and fields["output"] == 6 and fields["status"] is nf.NodeStatus.SUCCEEDED
    back = pickle.loads(pickle.dumps(rec))
    assert (back.name, back.status, back.output, dict(back.inputs)) == ("c", rec.status, 6, {"a": 2, "b": 4})
    assert back.attempts[0].finished_at == rec.finished_at

    again = pickle.loads(pickle.dumps(run))
    assert list(again.nodes) == ["a", "b", "c"] and again.outputs == run.outputs
    assert again.nodes["b"].attempts[0].started_at == run.nodes["b"].started_at

    # A pickle written before records were views: the same format with every field, some missing.
    old = pickle.dumps(rec)
    assert pickle.loads(old).cache_key is None


def test_putting_a_record_in_keeps_what_the_replaced_one_held() -> None:
    run = small_flow().run(x=1, show=False)
    old = run.nodes["b"]
    run.nodes["b"] = nf.NodeRecord("b")
    assert run.nodes["b"].status is nf.NodeStatus.PENDING and run.nodes["b"].output is nf.MISSING
    assert old.status is nf.NodeStatus.SUCCEEDED and old.output == 4  # kept, no longer the run's
    run.nodes["extra"] = nf.NodeRecord("extra")
    assert list(run.nodes) == ["a", "b", "c", "extra"]
    assert run.nodes.setdefault("extra", nf.NodeRecord("other")) is run.nodes["extra"]
    # A second run of the same plan shares its index but not this change.
    other = small_flow().run(x=1, show=False)
    assert list(other.nodes) == ["a", "b", "c"]


def test_a_failed_lean_node_has_its_error_on_the_record_and_the_attempt() -> None:
    flow = nf.Flow("fails")

    @flow.node
    async def boom(x: int) -> int:
        raise ValueError(f"bad {x}")

    run = flow.run(x=3, show=False)
    rec = run.nodes["boom"]
    assert rec.status is nf.NodeStatus.FAILED and rec.error_message == "bad 3"
    assert rec.attempts[0].error is rec.error and "ValueError: bad 3" in (rec.traceback or "")
    assert run.errors == {"boom": rec.error}
    assert run.counts() == {"failed": 1}


def test_column_walk_reads_every_node_of_the_run_and_its_sub_runs_as_walk_does() -> None:
    """``Run._column_walk`` (the live view's last redraw reads it): the same paths, states and inputs as
    ``walk``, nested sub-flows included, and no record made."""
    inner = nf.Flow("inner")

    @inner.node
    def clean(text: str) -> str:
        return text.strip()

    @inner.node
    def shout(clean: str) -> str:
        if clean == "boom":
            raise ValueError("boom")
        return clean.upper()

    middle = nf.Flow("middle")

    @middle.node
    def pre(text: str) -> str:
        return text

    middle.add(inner, name="deep", inputs={"text": "pre"}, output="shout")
    outer = nf.Flow("outer")

    @outer.node
    def doc(word: str) -> str:
        return word

    outer.add(middle, name="mid", inputs={"text": "doc"}, output="deep")
    outer.add(inner, name="side", inputs={"text": "doc"}, output="shout")
    for word in ("  hi ", "boom"):
        run = outer.run(word=word, show=False)
        walked = {path: (rec.status, dict(rec.inputs)) for path, rec in run.walk()}
        assert {"mid.deep.shout", "side.clean"} <= walked.keys()
        gc.collect()
        made = sum(1 for r in gc.get_objects() if type(r) is nf.NodeRecord)
        columns = {
            prefix + name: (status, dict(inputs or {}))
            for prefix, c in run._column_walk()
            for name, status, inputs in zip(c.names, c.status, c.inputs, strict=True)
        }
        assert columns == walked
        assert sum(1 for r in gc.get_objects() if type(r) is nf.NodeRecord) == made  # no record was made
