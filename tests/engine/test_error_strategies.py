"""Error strategies: fail (default), Default(value), continue (a Failed marker), and failure handlers."""

from __future__ import annotations

import pytest

import nbflow as nf

pytestmark = pytest.mark.anyio


class QuotaError(Exception):
    pass


def llm_flow(*, fail: bool, **options) -> nf.Flow:
    flow = nf.Flow("f", clock=nf.FakeClock())

    @flow.node(**options)
    async def call_llm(question: str) -> str:
        if fail:
            raise QuotaError(f"quota exceeded for {question!r}")
        return f"answer to {question}"

    @flow.node
    async def shout(call_llm: str) -> str:
        return call_llm.upper()

    @flow.node
    async def independent() -> int:
        return 1

    return flow


async def test_fail_is_the_default_descendants_skipped_independent_branches_go_on():
    run = await llm_flow(fail=True).arun(question="q")
    assert run.status is nf.RunStatus.FAILED
    assert run.nodes["call_llm"].status is nf.NodeStatus.FAILED
    assert run.nodes["shout"].status is nf.NodeStatus.SKIPPED
    assert run.nodes["shout"].skip_reason == "upstream 'call_llm' failed"
    assert run["independent"] == 1


async def test_default_value_replaces_the_output_and_the_record_keeps_the_error():
    events: list[nf.Event] = []
    run = await llm_flow(fail=True, on_error=nf.Default("no answer")).arun(question="q", on_event=events.append)
    rec = run.nodes["call_llm"]
    assert run.status is nf.RunStatus.SUCCEEDED
    assert rec.status is nf.NodeStatus.SUCCEEDED and rec.recovered
    assert run["call_llm"] == "no answer"
    assert run["shout"] == "NO ANSWER"
    assert isinstance(rec.error, QuotaError) and "QuotaError" in (rec.traceback or "")
    assert "recovered from QuotaError" in repr(rec)
    assert run.errors == {"call_llm": rec.error}
    succeeded = [e for e in events if isinstance(e, nf.NodeSucceeded) and e.node == "call_llm"]
    assert len(succeeded) == 1 and succeeded[0].recovered
    assert not [e for e in events if isinstance(e, nf.NodeFailed)]
    assert bool(run.to_frame().loc["call_llm", "recovered"]) is True


async def test_default_is_not_used_when_the_node_succeeds():
    run = await llm_flow(fail=False, on_error=nf.Default("no answer")).arun(question="q")
    rec = run.nodes["call_llm"]
    assert run["call_llm"] == "answer to q" and not rec.recovered and rec.error is None


async def test_default_none_is_a_real_value_when_asked_for():
    run = await llm_flow(fail=True, on_error=nf.Default(None)).arun(question="q")
    assert run["call_llm"] is None and run.nodes["shout"].status is nf.NodeStatus.FAILED  # None.upper()


async def test_retries_then_default():
    flow = nf.Flow("f", clock=nf.FakeClock())
    calls = []

    @flow.node(retry=nf.Retry(attempts=3), on_error=nf.Default(-1))
    async def flaky() -> int:
        calls.append(1)
        raise ConnectionError("down")

    run = await flow.arun()
    assert run["flaky"] == -1 and len(calls) == 3 and len(run.nodes["flaky"].attempts) == 3


async def test_continue_fails_the_node_but_descendants_receive_a_failed_marker():
    flow = nf.Flow("f")
    seen = []

    @flow.node(on_error="continue")
    async def call_llm() -> str:
        raise QuotaError("quota")

    @flow.node
    async def report(call_llm: str) -> str:  # the hint is not checked against the marker
        seen.append(call_llm)
        if isinstance(call_llm, nf.Failed):
            return f"{call_llm.node} failed with {call_llm.type}: {call_llm.message}"
        return call_llm

    run = await flow.arun()
    assert run.nodes["call_llm"].status is nf.NodeStatus.FAILED
    assert run["report"] == "call_llm failed with QuotaError: quota"
    marker = seen[0]
    assert isinstance(marker, nf.Failed) and isinstance(marker, nf.ErrorInfo)
    assert marker is not None and not marker  # explicit and falsy, never None
    assert isinstance(marker.error, QuotaError) and "QuotaError" in marker.traceback and marker.attempts == 1
    assert repr(marker) == "<Failed 'call_llm': QuotaError: quota>"
    assert run.status is nf.RunStatus.SUCCEEDED  # the failure was passed on as data, by request
    with pytest.raises(nf.NodeOutputError):
        run["call_llm"]


async def test_continue_when_the_descendant_does_not_cope_fails_the_run():
    flow = nf.Flow("f")

    @flow.node(on_error="continue")
    async def call_llm() -> str:
        raise QuotaError("quota")

    @flow.node
    async def shout(call_llm: str) -> str:
        return call_llm.upper()

    run = await flow.arun()
    assert run.nodes["shout"].status is nf.NodeStatus.FAILED
    assert isinstance(run.nodes["shout"].error, AttributeError)
    assert run.status is nf.RunStatus.FAILED


async def test_continue_passes_the_real_output_when_the_node_succeeds():
    run = await llm_flow(fail=False, on_error="continue").arun(question="q")
    assert run["shout"] == "ANSWER TO Q"


def handler_flow(*, fail: bool, handler_fails: bool = False) -> tuple[nf.Flow, list[str]]:
    flow = nf.Flow("f")
    ran: list[str] = []

    @flow.node
    async def call_llm(question: str) -> str:
        ran.append("call_llm")
        if fail:
            raise QuotaError("quota")
        return f"answer to {question}"

    @flow.node
    async def polish(call_llm: str) -> str:
        ran.append("polish")
        return call_llm + "!"

    @flow.node(on_failure_of="call_llm")
    async def apologise(call_llm: nf.ErrorInfo, question: str) -> str:
        ran.append("apologise")
        if handler_fails:
            raise RuntimeError("handler broke")
        return f"sorry, no answer to {question} ({call_llm.type}: {call_llm.message})"

    @flow.node(inputs={"answer": nf.first_of("polish", "apologise")})  # whichever branch ran
    async def reply(answer: str) -> str:
        ran.append("reply")
        return answer

    return flow, ran


async def test_failure_handler_runs_only_on_failure_and_the_normal_branch_is_skipped():
    flow, ran = handler_flow(fail=True)
    run = await flow.arun(question="q")
    assert run.status is nf.RunStatus.SUCCEEDED  # the failure was handled
    assert run.nodes["call_llm"].status is nf.NodeStatus.FAILED
    assert run.nodes["polish"].status is nf.NodeStatus.SKIPPED
    assert "failure handler 'apologise' runs instead" in (run.nodes["polish"].skip_reason or "")
    assert run["apologise"] == "sorry, no answer to q (QuotaError: quota)"
    assert run["reply"] == "sorry, no answer to q (QuotaError: quota)"
    assert ran == ["call_llm", "apologise", "reply"]


async def test_failure_handler_is_skipped_with_a_reason_when_the_node_succeeds():
    flow, ran = handler_flow(fail=False)
    run = await flow.arun(question="q")
    assert run.status is nf.RunStatus.SUCCEEDED
    assert run.nodes["apologise"].status is nf.NodeStatus.SKIPPED
    assert run.nodes["apologise"].skip_reason == "'call_llm' did not fail, so its failure handler did not run"
    assert run["reply"] == "answer to q!"
    assert ran == ["call_llm", "polish", "reply"]


async def test_a_failing_handler_fails_the_run():
    flow, _ = handler_flow(fail=True, handler_fails=True)
    run = await flow.arun(question="q")
    assert run.status is nf.RunStatus.FAILED
    assert run.nodes["apologise"].status is nf.NodeStatus.FAILED
    assert run.nodes["reply"].status is nf.NodeStatus.SKIPPED
    assert run.nodes["reply"].skip_reason == "none of 'polish', 'apologise' produced an output for 'answer'"


async def test_handler_receives_the_error_info_with_traceback_and_attempts():
    flow = nf.Flow("f", clock=nf.FakeClock())
    got: list[nf.ErrorInfo] = []

    @flow.node(retry=nf.Retry(attempts=2))
    async def call_llm() -> str:
        raise ConnectionError("unreachable")

    @flow.node(on_failure_of="call_llm")
    def handle(call_llm: nf.ErrorInfo) -> str:
        got.append(call_llm)
        return "handled"

    run = await flow.arun()
    info = got[0]
    assert (info.node, info.type, info.message, info.attempts) == ("call_llm", "ConnectionError", "unreachable", 2)
    assert "raise ConnectionError" in info.traceback and isinstance(info.error, ConnectionError)
    assert str(info) == "call_llm failed: ConnectionError: unreachable"
    assert run["handle"] == "handled"


async def test_a_handler_needs_no_parameter_for_the_error():
    flow = nf.Flow("f")

    @flow.node
    async def call_llm() -> str:
        raise QuotaError("quota")

    @flow.node(on_failure_of="call_llm")
    async def notify() -> str:
        return "notified"

    run = await flow.arun()
    assert run["notify"] == "notified" and run.status is nf.RunStatus.SUCCEEDED


async def test_handler_of_a_node_skipped_by_an_unhandled_failure_is_skipped_and_the_run_fails():
    flow = nf.Flow("f")

    @flow.node
    async def fetch() -> str:
        raise QuotaError("quota")

    @flow.node
    async def call_llm(fetch: str) -> str:
        return fetch

    @flow.node(on_failure_of="call_llm")
    async def apologise(call_llm: nf.ErrorInfo) -> str:
        return "sorry"

    @flow.node(inputs={"answer": nf.first_of("call_llm", "apologise")})
    async def reply(answer: str) -> str:
        return "reply"

    run = await flow.arun()
    assert run.status is nf.RunStatus.FAILED
    for name in ("call_llm", "apologise"):
        assert run.nodes[name].status is nf.NodeStatus.SKIPPED
        assert run.nodes[name].skip_reason == "upstream 'fetch' failed"
    assert run.nodes["reply"].status is nf.NodeStatus.SKIPPED
    assert run.nodes["reply"].skip_reason == "none of 'call_llm', 'apologise' produced an output for 'answer'"


async def test_a_node_needing_both_branches_is_skipped_but_the_handled_run_succeeds():
    flow = nf.Flow("f")

    @flow.node
    async def call_llm() -> str:
        raise QuotaError("quota")

    @flow.node(on_failure_of="call_llm")
    async def apologise() -> str:
        return "sorry"

    @flow.node
    async def needs_answer(call_llm: str, apologise: str) -> str:
        return call_llm

    run = await flow.arun()
    assert run.nodes["needs_answer"].status is nf.NodeStatus.SKIPPED
    assert run.nodes["needs_answer"].skip_reason == (
        "upstream 'call_llm' failed; its failure handler 'apologise' runs instead"
    )
    assert run.status is nf.RunStatus.SUCCEEDED  # handled; the skip is the branch not taken


async def test_a_handler_outside_the_targets_does_not_handle():
    flow, ran = handler_flow(fail=True)
    run = await flow.arun(question="q", targets="polish")
    assert ran == ["call_llm"]
    assert run.status is nf.RunStatus.FAILED
    assert run.nodes["polish"].skip_reason == "upstream 'call_llm' failed"


def test_handler_declaration_errors_name_the_node_and_the_fix():
    flow = nf.Flow("f")

    @flow.node
    async def call_llm() -> str:
        return "x"

    @flow.node(on_failure_of="call_lm")
    async def apologise() -> str:
        return "sorry"

    with pytest.raises(
        nf.UnknownNodeError, match=r"node 'apologise': on_failure_of 'call_lm'.*did you mean 'call_llm'"
    ):
        flow.graph  # noqa: B018

    flow.add(apologise, on_failure_of="call_llm")

    @flow.node(on_failure_of="call_llm")
    async def second() -> str:
        return "again"

    with pytest.raises(nf.FlowDefinitionError, match="already handles"):
        flow.graph  # noqa: B018
    flow.remove("second")

    flow.add(call_llm, on_error=nf.Default("x"))
    with pytest.raises(nf.FlowDefinitionError, match="not both"):
        flow.graph  # noqa: B018

    with pytest.raises(nf.FlowDefinitionError, match="on_failure_of"):
        flow.add(apologise, on_failure_of=3)  # type: ignore[arg-type]


def test_a_node_handling_its_own_failure_is_a_cycle():
    flow = nf.Flow("f")

    @flow.node(on_failure_of="selfish")
    async def selfish() -> str:
        return "x"

    with pytest.raises(nf.CycleError):
        flow.graph  # noqa: B018


@pytest.mark.parametrize("bad", ["ignore", "contine", None, 3])
def test_bad_on_error_is_refused(bad):
    flow = nf.Flow("f")
    with pytest.raises(nf.FlowDefinitionError, match="node 'n': on_error"):
        flow.add(lambda: 1, name="n", on_error=bad)


def test_on_error_typo_gets_a_suggestion():
    flow = nf.Flow("f")
    with pytest.raises(nf.FlowDefinitionError, match="did you mean 'continue'"):
        flow.add(lambda: 1, name="n", on_error="contineu")  # type: ignore[arg-type]


async def test_strategies_combined_retry_timeout_default_handler_and_continue():
    import asyncio

    flow = nf.Flow("f", clock=nf.FakeClock())
    attempts: dict[str, int] = {}

    def count(name: str) -> int:
        attempts[name] = attempts.get(name, 0) + 1
        return attempts[name]

    @flow.node(timeout=0.05, retry=nf.Retry(attempts=2), on_error=nf.Default("default"))
    async def hangs() -> str:
        count("hangs")
        await asyncio.sleep(60)
        return "never"

    @flow.node(retry=nf.Retry(attempts=3))
    async def flaky_then_ok() -> str:
        if count("flaky_then_ok") < 3:
            raise ConnectionError("blip")
        return "ok"

    @flow.node(retry=nf.Retry(attempts=3))
    async def broken() -> str:
        count("broken")
        raise ValueError("bug")  # not retried

    @flow.node(on_failure_of="broken")
    async def fallback(broken: nf.ErrorInfo) -> str:
        return f"fallback for {broken.type}"

    @flow.node(on_error="continue")
    async def soft() -> int:
        raise QuotaError("soft")

    @flow.node(inputs={"answer": nf.first_of("broken", "fallback")})
    async def combine(hangs: str, flaky_then_ok: str, soft: int, answer: str) -> str:
        soft_text = "failed" if isinstance(soft, nf.Failed) else str(soft)
        return f"{hangs}|{flaky_then_ok}|{answer}|{soft_text}"

    run = await flow.arun()
    assert run["combine"] == "default|ok|fallback for ValueError|failed"
    assert attempts == {"hangs": 2, "flaky_then_ok": 3, "broken": 1}
    assert run.status is nf.RunStatus.SUCCEEDED
    assert set(run.errors) == {"hangs", "broken", "soft"}


async def test_the_error_can_reach_the_handler_through_a_renamed_parameter():
    flow = nf.Flow("f")

    @flow.node
    async def call_llm() -> str:
        raise QuotaError("quota")

    @flow.node(on_failure_of="call_llm", inputs={"err": "call_llm"})
    async def handle(err: nf.ErrorInfo) -> str:
        return err.type

    run = await flow.arun()
    assert run["handle"] == "QuotaError"


async def test_default_also_covers_an_input_that_fails_its_hint():
    flow = nf.Flow("f")

    @flow.node
    def source() -> str:
        return "not an int"

    @flow.node(on_error=nf.Default(0))
    async def consumer(source: int) -> int:
        return source

    run = await flow.arun()
    assert run["consumer"] == 0 and isinstance(run.nodes["consumer"].error, nf.TypeValidationError)


async def test_an_optional_input_from_a_continue_node_gets_the_failed_marker_not_missing():
    flow = nf.Flow("f")

    @flow.node(on_error="continue")
    async def enrich() -> str:
        raise QuotaError("quota")

    @flow.node(on_failure_of="fails")
    async def handler() -> str:
        return "h"

    @flow.node
    async def fails() -> str:
        raise QuotaError("other")

    @flow.node(inputs={"notes": nf.optional("enrich"), "other": nf.optional("fails")})
    async def final(notes: str, other: str) -> str:
        return f"{type(notes).__name__}/{other!r}"

    run = await flow.arun()
    assert run["final"] == "Failed/nbflow.MISSING"  # a handled failure's value is simply missing


async def test_continue_feeds_a_node_on_a_router_branch():
    flow = nf.Flow("f")

    @flow.router(branches=["a", "b"])
    def route() -> str:
        return "a"

    @flow.node(on_error="continue")
    async def soft() -> str:
        raise QuotaError("soft")

    @flow.node(branch="route.a")
    async def on_a(soft: str) -> str:
        return "marker" if isinstance(soft, nf.Failed) else soft

    run = await flow.arun()
    assert run["on_a"] == "marker"


async def test_policies_apply_to_control_flow_and_sub_flow_nodes():
    clock = nf.FakeClock()
    sub = nf.Flow("sub", clock=clock)
    sub_calls = []

    @sub.node(retry=nf.Retry(attempts=2))
    async def inner(text: str) -> str:
        sub_calls.append(text)
        if len(sub_calls) == 1:
            raise ConnectionError("blip")
        return text.upper()

    flow = nf.Flow("f", clock=clock)
    flow.add(sub, name="summ", output="inner")
    map_calls = []

    @flow.map(over="items", retry=nf.Retry(attempts=3), on_error=nf.Default([]))
    async def each(items: int) -> int:
        map_calls.append(items)
        raise ConnectionError("down")

    run = await flow.arun(text="x", items=[1, 2])
    assert run["summ"] == "X" and sub_calls == ["x", "x"]  # the sub-flow kept its node's retry
    assert run["each"] == [] and run.nodes["each"].recovered
    assert len(run.nodes["each"].attempts) == 3  # the whole map is retried


def test_the_drawing_shows_the_fail_branch():
    flow, _ = handler_flow(fail=True)
    source = flow.to_dot().source
    assert source.count("call_llm -> apologise") == 1  # one edge, drawn as the fail branch
    assert 'call_llm -> apologise [label="on failure"' in source
    assert "apologise <- call_llm (on failure), <question>" in flow._repr_mimebundle_()["text/plain"]


async def test_a_retried_map_calls_again_only_the_items_that_did_not_succeed():
    import asyncio
    from collections import Counter

    calls: Counter = Counter()
    flaky = {2}
    flow = nf.Flow("map_retry_items")

    @flow.map(over="docs", retry=nf.Retry(attempts=2, backoff=0))
    async def summarize(docs: int) -> str:
        calls[docs] += 1
        # 0 and 1 finish before 2 fails; 3-5 are still waiting then (cancelled: called again by the retry).
        await asyncio.sleep(5 if flaky and docs > 2 else 0.02 * docs)
        if docs in flaky:
            flaky.discard(docs)
            raise ConnectionError(f"blip on {docs}")
        return f"s{docs}"

    run = await flow.arun(docs=list(range(6)))
    assert run.status is nf.RunStatus.SUCCEEDED and run["summarize"] == [f"s{i}" for i in range(6)]
    assert len(run.nodes["summarize"].attempts) == 2
    assert calls == Counter({0: 1, 1: 1, 2: 2, 3: 2, 4: 2, 5: 2})
    items = run.nodes["summarize"].items
    assert items is not None and all(i.status is nf.NodeStatus.SUCCEEDED for i in items)
    assert [i.error for i in items] == [None] * 6  # item 2 succeeded on the retry: no error of its first try
