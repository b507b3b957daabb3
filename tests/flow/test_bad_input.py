"""Bad input gets a clear NbflowError before anything runs (issue 12's edge list)."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbflow as nf


def _flow(name: str = "bad_input") -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def one(x: int) -> int:
        return x + 1

    return flow


@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_concurrency_must_be_a_positive_int(value: object) -> None:
    with pytest.raises(nf.NbflowError, match="concurrency"):
        _flow().run(x=1, concurrency=value, show=False)  # type: ignore[arg-type]
    with pytest.raises(nf.NbflowError, match="concurrency"):
        nf.Flow("c", concurrency=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("store", [123, "", 1.5, object()])
def test_store_must_be_a_path(store: object) -> None:
    with pytest.raises(nf.NbflowError, match="store="):
        _flow().run(x=1, store=store, show=False)
    with pytest.raises(nf.NbflowError, match="store="):
        nf.Flow("s", store=store)
    with pytest.raises(nf.NbflowError, match="store="):
        _flow().batch([{"x": 1}], store=store)  # type: ignore[arg-type]


def test_on_event_must_be_callable() -> None:
    with pytest.raises(nf.NbflowError, match="on_event"):
        _flow().run(x=1, on_event="x", show=False)  # type: ignore[arg-type]


def test_empty_targets_and_outputs_are_refused() -> None:
    with pytest.raises(nf.NbflowError, match=r"targets=\[\]"):
        _flow().run(x=1, targets=[], show=False)
    with pytest.raises(nf.NbflowError, match=r"outputs=\[\]"):
        _flow().batch([{"x": 1}], outputs=[])


@pytest.mark.parametrize(
    ("option", "value"),
    [("timeout", float("nan")), ("row_timeout", float("nan")), ("timeout", True), ("row_timeout", float("inf"))],
)
def test_batch_timeouts_must_be_finite_positive_numbers(option: str, value: object) -> None:
    with pytest.raises(nf.NbflowError, match=option):
        _flow().batch([{"x": 1}], **{option: value})  # type: ignore[arg-type]


def test_max_consecutive_failures_true_is_refused() -> None:
    with pytest.raises(nf.NbflowError, match="max_consecutive_failures"):
        _flow().batch([{"x": 1}], max_consecutive_failures=True)


def test_run_timeouts_nan_and_bool_are_refused() -> None:
    for value in (float("nan"), True):
        with pytest.raises(nf.NbflowError, match="timeout"):
            _flow().run(x=1, timeout=value, show=False)


def test_sync_generator_functions_are_not_nodes() -> None:
    flow = nf.Flow("gen")
    with pytest.raises(nf.FlowDefinitionError, match=r"generator function.*`async def` to stream"):

        @flow.node
        def items(n: int):  # type: ignore[no-untyped-def]
            yield from range(n)

    # an async generator is a streaming node (tests/engine/test_streaming.py)
    @flow.node
    async def aitems(n: int):  # type: ignore[no-untyped-def]
        yield n

    assert flow.run(n=3, show=False)["aitems"] == [3]


@pytest.mark.parametrize("name", ["status", "latency", "run_id", "error_type"])
def test_output_nodes_named_like_batch_columns_are_refused_before_running(name: str) -> None:
    flow = nf.Flow("reserved")
    ran = []

    def fn(x: int) -> int:
        ran.append(x)
        return x

    flow.add(fn, name=name)
    with pytest.raises(nf.BatchError, match=f"output node {name!r}"):
        flow.batch([{"x": 1}, {"x": 2}])
    assert ran == []


def test_sys_exit_in_a_node_fails_that_node_not_the_program() -> None:
    import sys

    flow = nf.Flow("exits")

    @flow.node
    def quits(x: int) -> int:
        sys.exit(3)

    @flow.node(retry=2)
    def quits_with_policy(x: int) -> int:
        sys.exit(4)

    @flow.node
    def fine(x: int) -> int:
        return x

    run = flow.run(x=1, show=False)
    assert run.nodes["quits"].status is nf.NodeStatus.FAILED
    assert "sys.exit(3)" in str(run.nodes["quits"].error)
    assert run.nodes["quits_with_policy"].status is nf.NodeStatus.FAILED
    assert run["fine"] == 1
    frame = flow.batch([{"x": i} for i in range(5)])
    assert list(frame.status) == ["failed"] * 5 and list(frame.fine) == list(range(5))


def test_a_node_raising_cancelled_error_itself_fails_that_node() -> None:
    import asyncio

    flow = nf.Flow("self_cancel")

    @flow.node
    async def cancels(x: int) -> int:
        raise asyncio.CancelledError

    @flow.node
    def fine(x: int) -> int:
        return x

    run = flow.run(x=1, show=False)
    assert run.nodes["cancels"].status is nf.NodeStatus.FAILED
    assert "CancelledError itself" in str(run.nodes["cancels"].error)
    assert run.status is nf.RunStatus.FAILED and run["fine"] == 1


def _flow_taking(name: str, *, default: bool = False) -> nf.Flow:
    flow = nf.Flow(f"input_named_{name}")
    ns: dict = {}
    exec(f"def use(x, {name}{'=None' if default else ''}):\n    return (x, {name})", ns)
    flow.add(ns["use"], name="use")
    return flow


OPTION_VALUES = {
    "store": "runs.db",
    "show": False,
    "targets": ["use"],
    "overrides": {},
    "concurrency": 2,
    "on_event": print,
    "keep": ["use"],
    "save": {},
    "trace": False,
    "timeout": 30,
}


def test_run_options_list_every_keyword_option_of_run_arun_and_start() -> None:
    import inspect

    from nbflow._core.errors import RUN_OPTIONS

    for method in (nf.Flow.run, nf.Flow.arun, nf.Flow.start):
        keywords = [p.name for p in inspect.signature(method).parameters.values() if p.kind is p.KEYWORD_ONLY]
        assert sorted(keywords) == sorted(RUN_OPTIONS) == sorted(OPTION_VALUES)


@pytest.mark.parametrize("name", sorted(OPTION_VALUES))
def test_a_missing_input_named_like_a_run_option_says_to_use_the_dict(name: str) -> None:
    flow = _flow_taking(name)
    with pytest.raises(nf.MissingInputError) as info:
        flow.run(x=1)
    message = str(info.value)
    assert f"run({{'{name}': ...}})" in message and f"{name}=" in message and "'use'" in message
    assert f"Pass {name}=... to run()" not in message  # the advice that cannot work
    run = flow.run({name: "value"}, x=1, show=False)  # the advice works
    assert run["use"] == (1, "value")


@pytest.mark.parametrize("name", sorted(OPTION_VALUES))
@pytest.mark.parametrize("default", [False, True], ids=["required", "has-default"])
def test_an_option_given_while_the_flow_has_an_input_of_that_name_is_refused(
    name: str, default: bool, tmp_path: Path
) -> None:
    flow = _flow_taking(name, default=default)
    value = str(tmp_path / "runs.db") if name == "store" else OPTION_VALUES[name]
    with pytest.raises(nf.FlowDefinitionError) as info:
        flow.run(x=1, **{name: value})
    message = str(info.value)
    assert f"input named {name!r}" in message and f"parameter {name!r} of node 'use'" in message
    assert f"run({{'{name}': ...}})" in message
    assert not (tmp_path / "runs.db").exists()  # nothing ran, no store was created
    # Both given: the input in the dict and the option as a keyword.
    run = flow.run({name: "in"}, x=1, **{name: value})
    assert run["use"] == (1, "in")
