"""The run record: outputs, per-node records, frame, raise_for_status, reprs, events."""

import anyio
import pandas as pd
import pytest

import nbflow as nf

pytestmark = pytest.mark.anyio


def _flow():
    flow = nf.Flow("rec")

    @flow.node
    def a(x: int) -> int:
        return x + 1

    @flow.node
    def b(a: int) -> int:
        raise KeyError("missing key")

    @flow.node
    def c(b: int) -> int:
        return b

    @flow.node
    def d(a: int) -> dict:
        return {"a": a}

    return flow


def test_outputs_getitem_and_node_output_errors():
    run = _flow().run(x=1)
    assert run.outputs == {"a": 2, "d": {"a": 2}}
    assert run["a"] == 2 and "a" in run and "c" not in run
    with pytest.raises(nf.NodeOutputError, match=r"node 'b' has no output: it is FAILED: KeyError"):
        run["b"]
    with pytest.raises(nf.NodeOutputError, match=r"'c' has no output: it is SKIPPED \(upstream 'b' failed\)"):
        run["c"]
    with pytest.raises(nf.UnknownNodeError, match="did you mean 'a'"):
        run["aa"]
    assert run.nodes["c"].output is nf.MISSING
    assert run.errors.keys() == {"b"}


def test_raise_for_status_chains_the_first_error():
    run = _flow().run(x=1)
    with pytest.raises(nf.RunFailedError, match=r"failed nodes: 'b': KeyError") as info:
        run.raise_for_status()
    assert isinstance(info.value.__cause__, KeyError)
    assert info.value.run is run
    ok = _flow()
    ok.remove("b")
    ok.remove("c")
    run2 = ok.run(x=1)
    assert run2.raise_for_status() is run2


def test_to_frame_has_one_row_per_node():
    run = _flow().run(x=1)
    df = run.to_frame()
    assert isinstance(df, pd.DataFrame)
    assert list(df.index) == ["a", "b", "c", "d"]
    assert df.loc["b", "status"] == "failed" and df.loc["b", "error_type"] == "KeyError"
    assert df.loc["c", "reason"] == "upstream 'b' failed"
    assert df.loc["a", "output"] == 2 and df.loc["a", "attempts"] == 1
    assert df["duration_s"].notna().sum() == 3


def test_text_repr_is_readable():
    run = _flow().run(x=1)
    assert repr(run).startswith(f"<Run {run.run_id} flow='rec' FAILED in ")
    text = run.summary()
    assert "'b' FAILED" in text and "KeyError" in text and "'c' SKIPPED reason=\"upstream 'b' failed\"" in text
    assert "output=2" in text
    assert repr(run.nodes["a"]).startswith("<NodeRecord 'a' SUCCEEDED")


def test_on_event_receives_typed_frozen_events_in_order():
    events = []
    run = _flow().run(x=1, on_event=events.append)
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    assert events[-1].status is nf.RunStatus.FAILED
    by_node = {}
    for e in events:
        if isinstance(e, nf.NodeEvent):
            by_node.setdefault(e.node, []).append(type(e).__name__)
    assert by_node == {
        "a": ["NodeStarted", "NodeSucceeded"],
        "b": ["NodeStarted", "NodeFailed"],
        "c": ["NodeSkipped"],
        "d": ["NodeStarted", "NodeSucceeded"],
    }
    failed = next(e for e in events if isinstance(e, nf.NodeFailed))
    assert failed.error_type == "KeyError" and failed.run_id == run.run_id
    with pytest.raises(AttributeError):
        failed.node = "x"  # frozen


def test_a_broken_subscriber_is_dropped_with_a_warning_and_the_run_goes_on():
    def broken(event):
        raise RuntimeError("subscriber bug")

    with pytest.warns(nf.NbflowWarning, match="subscriber bug"):
        run = _flow().run(x=1, on_event=broken)
    assert run.nodes["a"].status is nf.NodeStatus.SUCCEEDED


async def test_async_event_iterator_over_a_background_run():
    flow = nf.Flow("bg")

    @flow.node
    async def a() -> int:
        await anyio.sleep(0.01)
        return 1

    @flow.node
    async def b(a: int) -> int:
        return a + 1

    handle = flow.start()
    seen = [type(e).__name__ async for e in handle.events()]
    assert seen == ["RunStarted", "NodeStarted", "NodeSucceeded", "NodeStarted", "NodeSucceeded", "RunFinished"]
    run = await handle
    assert run["b"] == 2
