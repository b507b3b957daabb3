"""Forged or malformed front-end messages (a hostile page, a stale front end, a fuzzer on the comm): every message
of the run view and of the explorer is checked before anything acts on it; a malformed one changes nothing, the
view shows why (``message_error``, the explorer's note), and no exception escapes the handler into the cell."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbflow as nf
from nbflow.widgets import RunView
from tests.helpers import widget_comm
from tests.helpers.widget_comm import frontend_sends


@pytest.fixture(scope="module")
def comm_log() -> Any:
    patch = pytest.MonkeyPatch()
    log = widget_comm.install(patch)
    yield log
    patch.undo()


def _paused_run() -> nf.Run:
    inner = nf.Flow("forged_inner")
    inner.add(lambda text: text.upper(), name="shout")
    flow = nf.Flow("forged")

    @flow.node
    def draft(topic: str) -> str:
        return f"post about {topic}"

    flow.add(inner, name="polish", inputs={"text": "draft"})

    @flow.node
    async def review(polish: Any) -> str:
        return await nf.ask("Publish?", options=["approve", "reject"])

    run = flow.run(topic="bees", show=False)
    assert run.status is nf.RunStatus.PAUSED
    return run


def _paused_frame() -> Any:
    flow = nf.Flow("forged_rows")

    @flow.node
    async def review(topic: str) -> str:
        return await nf.ask(f"OK {topic}?", options=["yes", "no"])

    return flow.batch([{"topic": "a"}, {"topic": "b"}, {"topic": "c"}], progress=False)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def test_each_malformed_run_view_message_is_refused_and_shown(comm_log: Any) -> None:
    run = _paused_run()
    view = RunView(run)
    (card,) = view.questions
    before = (list(view.collapsed), view.selected)
    for content in (
        {"kind": "fold", "node": "no_such_node", "folded": False},  # raised UnknownNodeError into the cell
        {"kind": "fold", "node": "draft", "folded": True},  # not a sub-flow
        {"kind": "fold", "node": "polish", "folded": "no"},  # not a bool ("no" is true)
        {"kind": "answer", "key": card["key"], "value": ["approve"]},  # unhashable: TypeError into the cell
        {"kind": "answer", "key": card["key"], "value": {"a": 1}},
        {"kind": "answer", "key": card["key"], "value": "publish it all"},  # not an option
        {"kind": "answer", "key": "review#9", "value": "approve"},  # no such question: resumed the run!
        {"kind": "select", "node": ["draft"]},
        {"kind": "resync", "seq": "x"},
        {"kind": "explode"},
    ):
        view._on_msg(view, content, [])  # the handler itself: nothing may escape it
        assert view.message_error.startswith("refused"), content
        assert run.status is nf.RunStatus.PAUSED and getattr(view, "_answer_task", None) is None, content
        assert (list(view.collapsed), view.selected) == before, content
    frontend_sends(view, kind="fold", node="polish", folded=False)  # a valid message clears the error
    assert view.message_error == ""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["fold", "answer", "select", "resync", "timeline", "cancel", "nope", None, 3]),
    fields=st.dictionaries(st.sampled_from(["node", "key", "value", "folded", "seq", "comment", "how"]), JSON),
)
def test_fuzzed_run_view_messages_never_raise_nor_answer(comm_log: Any, kind: Any, fields: dict[str, Any]) -> None:
    run = _FUZZ_RUN[0] if _FUZZ_RUN else _FUZZ_RUN.append(_paused_run()) or _FUZZ_RUN[0]
    view = RunView(run)
    view._on_msg(view, {"kind": kind, **fields}, [])
    view._on_msg(view, [kind, fields], [])  # not even an object
    if not (kind == "answer" and fields.get("value") in ("approve", "reject")):
        assert run.status is nf.RunStatus.PAUSED and getattr(view, "_answer_task", None) is None


_FUZZ_RUN: list[nf.Run] = []


def test_each_malformed_explorer_message_is_refused_and_shown(comm_log: Any) -> None:
    df = _paused_frame()
    view = nf.explore(df)
    for content in (
        {"type": "query", "page": "abc"},  # ValueError into the cell
        {"type": "query", "sort": "x"},  # not a sort: ValueError unpacking
        {"type": "query", "status": ["paused"]},
        {"type": "open", "pos": "x"},
        {"type": "open", "pos": 99},
        {"type": "answer", "pos": -1, "answer": "yes"},  # answered the last row
        {"type": "answer", "pos": 0, "answer": ["yes"]},
        {"type": "answer", "pos": 0, "answer": "maybe"},  # outside the options: AnswerError into the cell
        {"type": "answer", "pos": True, "answer": "yes"},
        "not a dict",
    ):
        view.table._handle_custom_msg(content, [])
        view._on_msg(view.table, content, [])
        assert "refused" in view.table.note or "AnswerError" in view.table.note, content
        assert list(df["status"]) == ["paused"] * 3, content
    view.table._handle_custom_msg({"type": "answer", "pos": 2, "answer": "yes"}, [])  # a valid one still works
    assert list(df["status"]) == ["paused", "paused", "succeeded"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["query", "open", "answer", "nope", None]),
    fields=st.dictionaries(
        st.sampled_from(["pos", "answer", "page", "status", "sort", "variant", "mode", "regressions", "x"]), JSON
    ),
)
def test_fuzzed_explorer_messages_never_raise_nor_answer(comm_log: Any, kind: Any, fields: dict[str, Any]) -> None:
    if not _FUZZ_FRAME:
        _FUZZ_FRAME.append(_paused_frame())
    df = _FUZZ_FRAME[0]
    view = nf.explore(df)
    fields.pop("answer", None) if fields.get("answer") in ("yes", "no") else None
    view._on_msg(view.table, {"type": kind, **fields}, [])
    assert list(df["status"]) == ["paused"] * 3


_FUZZ_FRAME: list[Any] = []
