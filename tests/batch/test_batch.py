"""flow.batch / flow.abatch: rows × grid -> DataFrame, column mapping, failures, stops, progress."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import pandas as pd
import pydantic
import pytest

import nbflow as nf


def qa_flow(fail_on: set[str] | None = None) -> nf.Flow:
    flow = nf.Flow("qa")
    fail_on = fail_on or set()

    @flow.node
    def retrieve(question: str) -> str:
        return f"doc({question})"

    @flow.node
    async def answer(question: str, retrieve: str, prompt: str = "plain") -> str:
        if question in fail_on:
            raise ValueError(f"model refused {question}")
        return f"{prompt}:{question}"

    @flow.node
    def score(answer: str, expected: str) -> bool:
        return answer.endswith(expected)

    return flow


ROWS = [
    {"question": "a", "expected": "a", "tag": "x"},
    {"question": "b", "expected": "zz", "tag": "y"},
    {"question": "c", "expected": "c", "tag": "z"},
]


def test_list_of_dicts_gives_one_row_per_input_in_order_with_leaf_outputs():
    df = qa_flow().batch(ROWS)
    assert list(df.columns) == [
        "question",
        "expected",
        "tag",
        "score",
        "status",
        "error_type",
        "error_message",
        "error_node",
        "attempts",
        "latency",
        "run_id",
    ]
    assert df["question"].tolist() == ["a", "b", "c"]
    assert df["tag"].tolist() == ["x", "y", "z"]  # extra column carried through untouched
    assert df["score"].tolist() == [True, False, True]
    assert (df["status"] == "succeeded").all()
    assert (df["attempts"] == 1).all()
    assert (df["latency"] >= 0).all()
    assert df["run_id"].nunique() == 3


def test_dataframe_rows_column_mapping_and_intermediate_outputs():
    rows = pd.DataFrame({"q": ["a", "b"], "expected": ["a", "b"]})
    df = qa_flow().batch(rows, columns={"q": "question"}, outputs=["retrieve", "answer", "score"])
    assert df["q"].tolist() == ["a", "b"]
    assert "question" not in df.columns
    assert df["retrieve"].tolist() == ["doc(a)", "doc(b)"]
    assert df["answer"].tolist() == ["plain:a", "plain:b"]


def test_outputs_limit_what_runs():
    calls: list[str] = []
    flow = nf.Flow("f")

    @flow.node
    def first(x: int) -> int:
        calls.append("first")
        return x

    @flow.node
    def second(first: int) -> int:
        calls.append("second")
        return first

    df = flow.batch([{"x": 1}], outputs="first")
    assert list(df["first"]) == [1]
    assert calls == ["first"]


def test_grid_runs_every_row_with_every_combination_and_keys_become_columns():
    flow = qa_flow()
    df = flow.batch(ROWS, grid={"prompt": ["p1", "p2"], "model": ["m1", "m2", "m3"]}, outputs=["answer"])
    assert len(df) == 3 * 2 * 3
    assert df[["question", "prompt", "model"]].head(6).values.tolist() == [
        ["a", "p1", "m1"],
        ["a", "p1", "m2"],
        ["a", "p1", "m3"],
        ["a", "p2", "m1"],
        ["a", "p2", "m2"],
        ["a", "p2", "m3"],
    ]
    # "prompt" feeds the flow, "model" is not an input: carried as a column only
    assert df.loc[3, "answer"] == "p2:a"
    assert df.attrs["grid"] == ["prompt", "model"]


def test_a_failing_row_does_not_touch_the_others():
    df = qa_flow(fail_on={"b"}).batch(ROWS, grid={"prompt": ["p"]})
    assert df["status"].tolist() == ["succeeded", "failed", "succeeded"]
    bad = df.iloc[1]
    assert bad["error_type"] == "ValueError"
    assert bad["error_message"] == "model refused b"
    assert bad["error_node"] == "answer"
    assert pd.isna(bad["score"])
    assert df["score"].tolist()[0] is True and df["score"].tolist()[2] is True


def test_a_bad_value_fails_only_its_row():
    flow = nf.Flow("typed")

    @flow.node
    def double(n: int) -> int:
        return 2 * n

    df = flow.batch([{"n": 1}, {"n": "not a number"}, {"n": 3}])
    assert df["status"].tolist() == ["succeeded", "failed", "succeeded"]
    assert df.loc[1, "error_type"] == "TypeValidationError"
    assert df["double"].tolist()[::2] == [2, 6]


def test_missing_input_column_is_one_clear_error_before_anything_runs():
    ran: list[int] = []
    flow = nf.Flow("f")

    @flow.node
    def answer(question: str) -> str:
        ran.append(1)
        return question

    with pytest.raises(nf.MissingColumnError) as info:
        flow.batch([{"qestion": "a"}])
    msg = str(info.value)
    assert "'question'" in msg and "columns={'qestion': 'question'}" in msg and "'answer'" in msg
    assert info.value.missing == {"question": ("answer",)}
    assert ran == []
    assert isinstance(info.value, nf.BatchError) and isinstance(info.value, nf.NbflowError)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"columns": {"nope": "question"}}, "'nope', which is not a column"),
        ({"columns": {"question": "nope"}}, "which is not an input of flow 'qa'"),
        ({"grid": {"tag": ["x"]}}, "grid key 'tag' is also a column"),
        ({"grid": {"prompt": "p1"}}, "wrap a single value in a list"),
        ({"grid": {"prompt": []}}, "grid['prompt'] is empty"),
        ({"concurrency": 0}, "concurrency= is the number of rows in flight"),
        ({"resume": True}, "resume=True needs store="),
        ({"max_consecutive_failures": 0}, "max_consecutive_failures="),
        ({"progress": "yes"}, "progress= must be"),
    ],
)
def test_bad_requests_raise_batch_errors_naming_the_fix(kwargs, needle):
    with pytest.raises(nf.BatchError) as info:
        qa_flow().batch(ROWS, **kwargs)
    assert needle in str(info.value)


def test_bad_rows_and_unknown_outputs():
    flow = qa_flow()
    with pytest.raises(nf.BatchError, match="iterable of mappings"):
        flow.batch({"question": ["a"]})
    with pytest.raises(nf.BatchError, match="row 1 is a str"):
        flow.batch([ROWS[0], "b"])
    with pytest.raises(nf.UnknownNodeError, match="output 'scor' is not a node"):
        flow.batch(ROWS, outputs=["scor"])
    with pytest.raises(nf.BatchError, match="column 'score' has the name of an output node"):
        flow.batch([{**ROWS[0], "score": 1}])
    with pytest.raises(nf.BatchError, match="fed by two columns"):
        flow.batch([{**ROWS[0], "q": "a"}], columns={"q": "question"})


def test_empty_rows_give_an_empty_frame_with_the_columns():
    df = qa_flow().batch([], outputs=["answer"])
    assert len(df) == 0
    assert "answer" in df.columns and "status" in df.columns


def test_concurrency_caps_rows_in_flight():
    flow = nf.Flow("cap")
    live = {"now": 0, "max": 0}

    @flow.node
    async def work(i: int) -> int:
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        await asyncio.sleep(0.002)
        live["now"] -= 1
        return i

    df = flow.batch([{"i": i} for i in range(40)], concurrency=3)
    assert live["max"] == 3
    assert df["work"].tolist() == list(range(40))


def test_each_row_is_its_own_run_and_flow_level_concurrency_still_applies_per_run():
    flow = nf.Flow("f", concurrency=1)

    @flow.node
    def a(x: int) -> int:
        return x

    @flow.node
    def b(x: int) -> int:
        return -x

    df = flow.batch([{"x": 1}, {"x": 2}], concurrency=2)
    assert df["run_id"].nunique() == 2
    assert df[["a", "b"]].values.tolist() == [[1, -1], [2, -2]]


def test_flatten_expands_dicts_models_and_dataclasses():
    class Verdict(pydantic.BaseModel):
        label: str
        confidence: float

    @dataclasses.dataclass
    class Cost:
        tokens: int

    flow = nf.Flow("nested")

    @flow.node
    def verdict(text: str) -> Verdict:
        return Verdict(label=text.upper(), confidence=0.5)

    @flow.node
    def meta(text: str) -> dict:
        return {"length": len(text)}

    @flow.node
    def cost(text: str) -> Cost:
        return Cost(tokens=len(text) * 2)

    rows = [{"text": "ab"}, {"text": "cde"}]
    kept = flow.batch(rows)
    assert isinstance(kept.loc[0, "verdict"], Verdict)  # nested outputs stay objects by default
    flat = flow.batch(rows, flatten=True)
    assert flat["verdict.label"].tolist() == ["AB", "CDE"]
    assert flat["meta.length"].tolist() == [2, 3]
    assert flat["cost.tokens"].tolist() == [4, 6]
    assert "verdict" not in flat.columns


@pytest.mark.anyio
async def test_abatch_runs_on_the_current_loop():
    df = await qa_flow().abatch(ROWS, grid={"prompt": ["p"]})
    assert df["score"].tolist() == [True, False, True]


def test_batch_works_inside_a_running_loop_like_a_notebook_cell():
    async def cell():
        return qa_flow().batch(ROWS)

    df = asyncio.run(cell())
    assert df["status"].tolist() == ["succeeded"] * 3


def slow_flow(block: set[int], started: list[int] | None = None) -> nf.Flow:
    flow = nf.Flow("slow")

    @flow.node
    async def work(i: int) -> int:
        if started is not None:
            started.append(i)
        if i in block:
            await asyncio.sleep(600)
        return i * 10

    @flow.node
    def after(work: int) -> int:
        return work + 1

    return flow


def test_keyboard_interrupt_in_a_row_keeps_every_finished_row():
    flow = nf.Flow("kb")

    @flow.node
    async def work(i: int) -> int:
        if i == 5:
            raise KeyboardInterrupt
        if i > 5:
            await asyncio.sleep(600)
        return i

    with pytest.raises(nf.BatchInterrupted) as info:
        flow.batch([{"i": i} for i in range(20)], concurrency=3)
    frame = info.value.frame
    assert isinstance(info.value, KeyboardInterrupt)
    assert frame["status"].tolist()[:5] == ["succeeded"] * 5
    assert frame["work"].tolist()[:5] == [0, 1, 2, 3, 4]
    assert set(frame["status"].tolist()[5:]) <= {"cancelled", "pending"}
    assert frame["status"].tolist()[-1] == "pending"
    assert "5 of 20 rows finished" in str(info.value)
    assert flow.last_batch is frame


def test_interrupting_a_blocking_batch_inside_a_loop_keeps_finished_rows():
    """What a kernel interrupt does to ``flow.batch()`` in a cell: KeyboardInterrupt in the main thread."""
    import _thread

    started: list[int] = []
    flow = slow_flow(block={3, 4, 5, 6}, started=started)

    def interrupt_once_rows_3_to_6_run() -> None:
        # rows 4-6 start only when rows 0-2 are completely done (4 workers)
        while not {3, 4, 5, 6} <= set(started):
            time.sleep(0.01)
        _thread.interrupt_main()

    async def cell():
        threading.Thread(target=interrupt_once_rows_3_to_6_run, daemon=True).start()
        with pytest.raises(nf.BatchInterrupted) as info:
            flow.batch([{"i": i} for i in range(10)], concurrency=4)
        return info.value.frame

    loop = asyncio.new_event_loop()
    try:
        frame = loop.run_until_complete(cell())
    finally:
        loop.close()
    assert frame["status"].tolist()[:3] == ["succeeded"] * 3
    assert frame["after"].tolist()[:3] == [1, 11, 21]
    assert frame["status"].tolist()[3:7] == ["cancelled"] * 4
    assert frame["status"].tolist()[7:] == ["pending"] * 3


@pytest.mark.anyio
async def test_cancelling_abatch_propagates_and_keeps_the_partial_frame_on_the_flow():
    started: list[int] = []
    flow = slow_flow(block={2}, started=started)
    task = asyncio.ensure_future(flow.abatch([{"i": i} for i in range(4)], concurrency=1))
    while 2 not in started:  # rows 0 and 1 are done, row 2 blocks
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    frame = flow.last_batch
    assert frame["status"].tolist() == ["succeeded", "succeeded", "cancelled", "pending"]
    assert frame["after"].tolist()[:2] == [1, 11]
    assert frame.attrs["counts"] == {"succeeded": 2, "cancelled": 1, "pending": 1}


def test_circuit_breaker_stops_starting_rows_and_says_so():
    flow = nf.Flow("breaker")
    ran: list[int] = []

    @flow.node
    def call(i: int, api_key: str) -> int:
        ran.append(i)
        raise PermissionError("invalid api key")

    rows = [{"i": i, "api_key": "typo"} for i in range(100)]
    with pytest.warns(nf.NbflowWarning, match=r"circuit breaker: 5 consecutive rows failed"):
        df = flow.batch(rows, concurrency=1, max_consecutive_failures=5)
    assert ran == [0, 1, 2, 3, 4]
    assert df["status"].tolist() == ["failed"] * 5 + ["pending"] * 95
    assert "PermissionError: invalid api key" in df.attrs["stopped"]
    assert df.attrs["counts"] == {"pending": 95, "failed": 5}


def test_circuit_breaker_counts_only_consecutive_failures():
    flow = nf.Flow("flaky")

    @flow.node
    def call(i: int) -> int:
        if i % 3:
            raise RuntimeError("flaky")
        return i

    df = flow.batch([{"i": i} for i in range(12)], concurrency=1, max_consecutive_failures=3)
    assert (df["status"] != "pending").all()
    assert df.attrs["stopped"] is None


def test_row_timeout_fails_the_row_and_batch_timeout_returns_the_partial_frame():
    flow = slow_flow(block={1})
    # deadlines far above what the quick rows need (even on a loaded machine), far below 600 s
    df = flow.batch([{"i": i} for i in range(3)], row_timeout=1.0)
    assert df["status"].tolist() == ["succeeded", "failed", "succeeded"]
    assert df.loc[1, "error_type"] == "TimeoutError"
    assert df.loc[1, "error_node"] == "work"
    assert "row_timeout=1.0" in df.loc[1, "error_message"]

    with pytest.warns(nf.NbflowWarning, match="timeout"):
        df = flow.batch([{"i": i} for i in range(4)], concurrency=1, timeout=1.0)
    assert df["status"].tolist() == ["succeeded", "cancelled", "pending", "pending"]
    assert df.attrs["stopped"].startswith("timeout")


class Recorder:
    def __init__(self) -> None:
        self.updates: list[tuple[int, int]] = []
        self.closed: nf.BatchProgress | None = None

    def update(self, state: nf.BatchProgress) -> None:
        self.updates.append((state.done, state.in_flight))

    def close(self, state: nf.BatchProgress) -> None:
        self.closed = state


def test_progress_renderer_gets_throttled_updates_and_the_final_state():
    rec = Recorder()
    flow = nf.Flow("p")

    @flow.node
    async def work(i: int) -> int:
        await asyncio.sleep(0.01)
        if i == 3:
            raise ValueError("x")
        return i

    flow.batch([{"i": i} for i in range(60)], concurrency=2, progress=rec)
    assert rec.closed is not None
    assert (rec.closed.done, rec.closed.failed, rec.closed.succeeded, rec.closed.in_flight) == (60, 1, 59, 0)
    assert rec.closed.total == 60
    assert "60/60 done (1 failed)" in rec.closed.text()
    # ≤ 4 refreshes a second (never one per row): far fewer updates than rows
    assert len(rec.updates) < 60


def test_a_broken_progress_display_never_breaks_the_batch():
    class Broken(Recorder):
        def close(self, state: nf.BatchProgress) -> None:
            raise RuntimeError("display gone")

    with pytest.warns(nf.NbflowWarning, match="display gone"):
        df = qa_flow().batch(ROWS, progress=Broken())
    assert (df["status"] == "succeeded").all()


def test_a_dataframe_keeps_its_own_index_repeated_per_grid_combination():
    rows = pd.DataFrame(ROWS, index=pd.Index(["r1", "r2", "r3"], name="case"))
    df = qa_flow().batch(rows.iloc[1:], grid={"prompt": ["p", "q"]}, outputs="answer")
    assert df.index.tolist() == ["r2", "r2", "r3", "r3"]  # like DataFrame.explode
    assert df.index.name == "case"
    assert df.loc["r3", "answer"].tolist() == ["p:c", "q:c"]
    plain = qa_flow().batch(pd.DataFrame(ROWS), outputs="answer")
    assert plain.index.tolist() == [0, 1, 2]


def test_shared_named_limits_hold_across_rows_and_retries_count_as_attempts():
    limit = nf.Limit(max_concurrency=2)
    flow = nf.Flow("limited", limits={"llm": limit}, clock=nf.FakeClock())
    live = {"now": 0, "max": 0}
    tries: dict[int, int] = {}

    @flow.node(uses="llm", retry=nf.Retry(attempts=3, backoff=1.0))
    async def call(i: int) -> int:
        tries[i] = tries.get(i, 0) + 1
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        await asyncio.sleep(0.002)
        live["now"] -= 1
        if i % 4 == 0 and tries[i] == 1:
            raise ConnectionError("transient")  # the first try of every 4th row fails once
        return i

    df = flow.batch([{"i": i} for i in range(20)], concurrency=10)
    assert live["max"] == 2  # 10 rows in flight, but the flow's named limit is shared by all of them
    assert (df["status"] == "succeeded").all()
    assert df["attempts"].tolist() == [2 if i % 4 == 0 else 1 for i in range(20)]
    assert limit.in_flight == 0
