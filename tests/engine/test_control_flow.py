"""Routing, merges, optional inputs, map, loops and sub-flows, through the public API."""

import anyio
import pytest

import nbflow as nf


def support_flow(calls: list[str] | None = None) -> nf.Flow:
    calls = calls if calls is not None else []
    flow = nf.Flow("support")

    @flow.node
    def classify(question: str) -> str:
        return "billing" if "invoice" in question else "tech" if "error" in question else "other"

    @flow.router(branches=["billing", "tech", "other"])
    def route(classify: str) -> str:
        return classify

    @flow.node(branch="route.billing")
    async def billing(question: str) -> str:
        calls.append("billing")
        return f"billing: {question}"

    @flow.node(branch="route.tech")
    def tech(question: str) -> str:
        calls.append("tech")
        return f"tech: {question}"

    @flow.node
    def tech_followup(tech: str) -> str:
        calls.append("tech_followup")
        return tech + " (follow-up)"

    @flow.node(inputs={"answer": nf.first_of("billing", "tech_followup")})
    def reply(answer: str) -> str:
        return answer.upper()

    return flow


def test_router_runs_the_chosen_branch_and_skips_the_rest():
    calls: list[str] = []
    run = support_flow(calls).run(question="my invoice")
    assert calls == ["billing"]
    assert run.status is nf.RunStatus.SUCCEEDED  # a branch not taken is not a failure
    assert run.nodes["tech"].status is nf.NodeStatus.SKIPPED
    assert run.nodes["tech"].skip_reason == "branch 'tech' of 'route' not taken"
    assert run.nodes["tech_followup"].skip_reason == "branch 'tech' of 'route' not taken"
    assert run["reply"] == "BILLING: MY INVOICE"


def test_merge_takes_whichever_branch_ran():
    run = support_flow().run(question="an error")
    assert run["reply"] == "TECH: AN ERROR (FOLLOW-UP)"
    assert run.nodes["billing"].status is nf.NodeStatus.SKIPPED


def test_merge_is_skipped_only_when_no_alternative_ran():
    run = support_flow().run(question="hello")  # 'other' has no nodes
    assert run.status is nf.RunStatus.SUCCEEDED
    assert run.nodes["reply"].status is nf.NodeStatus.SKIPPED
    assert run.nodes["reply"].skip_reason == "none of 'billing', 'tech_followup' produced an output for 'answer'"


def test_merge_takes_the_first_in_declared_order_when_several_ran():
    flow = nf.Flow("m")
    flow.add(lambda: "a", name="a")
    flow.add(lambda: "b", name="b")
    flow.add(lambda x: x, name="pick", inputs={"x": nf.first_of("b", "a")})
    assert flow.run()["pick"] == "b"


def test_router_choosing_an_unknown_branch_fails_clearly():
    flow = support_flow()

    @flow.router(branches=["billing", "tech", "other"])
    def route(classify: str) -> str:
        return "bilingual"

    run = flow.run(question="my invoice")
    err = run.nodes["route"].error
    assert isinstance(err, nf.RoutingError)
    assert "router 'route' chose 'bilingual'" in str(err) and "did you mean 'billing'" in str(err)
    assert run.nodes["billing"].skip_reason == "upstream 'route' failed"
    assert run.status is nf.RunStatus.FAILED


def test_router_may_take_several_branches():
    flow = support_flow()

    @flow.router(branches=["billing", "tech", "other"])
    def route(classify: str) -> list[str]:
        return ["billing", "tech"]

    calls: list[str] = []
    run = flow.run(question="x")
    assert {n for n, r in run.nodes.items() if r.status is nf.NodeStatus.SUCCEEDED} >= {"billing", "tech"}
    assert run["reply"].startswith("BILLING")  # first of, in declared order
    del calls


def test_branch_declaration_errors_are_caught_before_running():
    flow = support_flow()

    @flow.node(branch="route.biling")
    def typo(question: str) -> str:
        return question

    with pytest.raises(nf.GraphError, match=r"router 'route' has no branch 'biling' \(did you mean 'billing'\?\)"):
        flow.run(question="q")
    flow.remove("typo")

    @flow.node(branch="classify.x")
    def not_router(question: str) -> str:
        return question

    with pytest.raises(nf.GraphError, match=r"'classify' is not a router; declare it with @flow\.router"):
        flow.graph  # noqa: B018
    with pytest.raises(nf.FlowDefinitionError, match=r"should be 'router\.branch'"):
        flow.add(lambda q: q, name="bad", branch="route")


def test_router_branches_are_inferred_when_not_declared():
    flow = nf.Flow("r")

    @flow.router
    def pick(x: int) -> str:
        return "even" if x % 2 == 0 else "odd"

    flow.add(lambda x: f"{x} is even", name="even", branch="pick.even")
    flow.add(lambda x: f"{x} is odd", name="odd", branch="pick.odd")
    flow.add(lambda a: a, name="out", inputs={"a": nf.first_of("even", "odd")})
    assert flow.graph.nodes["pick"].branches == ("even", "odd")
    assert flow.run(x=3)["out"] == "3 is odd"


def test_a_skipped_upstream_skips_by_default_but_optional_receives_missing():
    flow = support_flow()

    @flow.node(inputs={"extra": nf.optional("tech")})
    def summary(question: str, extra: str | nf.Missing) -> str:
        return "no tech answer" if extra is nf.MISSING else extra

    @flow.node
    def strict(tech: str) -> str:
        return tech

    run = flow.run(question="my invoice")
    assert run["summary"] == "no tech answer"
    assert run.nodes["strict"].status is nf.NodeStatus.SKIPPED
    assert flow.run(question="an error")["summary"] == "tech: an error"


def test_optional_and_first_of_name_unknown_nodes_clearly():
    flow = nf.Flow("f")
    flow.add(lambda x: x, name="a", inputs={"x": nf.optional("nope")})
    with pytest.raises(nf.UnknownNodeError, match="'nope' is not a node"):
        flow.graph  # noqa: B018
    with pytest.raises(nf.FlowDefinitionError, match="two or more"):
        nf.first_of("a")


# --- map -----------------------------------------------------------------------------------------


def map_flow(errors: str, concurrency: int | None = None) -> nf.Flow:
    flow = nf.Flow("m")

    @flow.node
    def docs() -> list[str]:
        return ["alpha", "", "gamma", "", "epsilon"]

    @flow.map(over="docs", errors=errors, concurrency=concurrency)
    async def lengths(docs: str, bonus: int = 0) -> int:
        await anyio.sleep(0.001)
        if not docs:
            raise ValueError("empty document")
        return len(docs) + bonus

    return flow


def test_map_continue_keeps_order_and_marks_failed_items():
    run = map_flow("continue").run(bonus=1)
    out = run["lengths"]
    assert [o for o in out if o] == [6, 6, 8]
    assert isinstance(out[1], nf.ItemFailed) and out[1].index == 1 and out[1].error_type == "ValueError"
    assert not out[1]
    items = run.nodes["lengths"].items
    assert [i.status for i in items] == [
        nf.NodeStatus.SUCCEEDED,
        nf.NodeStatus.FAILED,
        nf.NodeStatus.SUCCEEDED,
        nf.NodeStatus.FAILED,
        nf.NodeStatus.SUCCEEDED,
    ]
    assert "empty document" in items[1].traceback and items[0].duration >= 0
    assert run.status is nf.RunStatus.SUCCEEDED


def test_map_drop_removes_failed_items():
    run = map_flow("drop").run()
    assert run["lengths"] == [5, 5, 7]


def test_map_terminate_fails_the_node_on_the_first_item_error():
    run = map_flow("terminate", concurrency=1).run()
    err = run.nodes["lengths"].error
    assert isinstance(err, nf.MapItemError) and err.index == 1
    assert "item 1 of 5 failed with ValueError: empty document" in str(err)
    statuses = [i.status for i in run.nodes["lengths"].items]
    assert statuses[:2] == [nf.NodeStatus.SUCCEEDED, nf.NodeStatus.FAILED]
    assert set(statuses[2:]) == {nf.NodeStatus.CANCELLED}


def test_map_concurrency_limit_holds():
    flow = nf.Flow("m")
    active = peak = 0

    @flow.map(over="xs", concurrency=3)
    async def work(xs: int) -> int:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0.002)
        active -= 1
        return xs * 2

    run = flow.run(xs=list(range(20)))
    assert run["work"] == [x * 2 for x in range(20)] and peak == 3


def test_map_over_a_non_list_is_a_clear_error():
    flow = nf.Flow("m")
    flow.map(over="xs", name="echo")(lambda xs: xs)
    run = flow.run(xs="abc")
    err = run.nodes["echo"].error
    assert isinstance(err, nf.TypeValidationError) and (err.node, err.parameter) == ("echo", "xs")
    assert "expected a list to map over" in str(err)


def test_map_and_loop_declaration_errors():
    flow = nf.Flow("m")
    with pytest.raises(nf.FlowDefinitionError, match="map over='nope' is not one of its parameters"):
        flow.map(over="nope", name="f")(lambda xs: xs)
    with pytest.raises(nf.FlowDefinitionError, match="errors='stop' is not one of"):
        flow.map(over="xs", errors="stop")
    with pytest.raises(nf.FlowDefinitionError, match="loop feed='d' is not one of its parameters"):
        flow.loop(feed="d", name="g")(lambda x: x)
    with pytest.raises(nf.FlowDefinitionError, match="max_iterations must be a positive int"):
        flow.loop(feed="x", max_iterations=0)


# --- loops ---------------------------------------------------------------------------------------


def refine_flow(on_max: str = "return", max_iterations: int = 5) -> nf.Flow:
    flow = nf.Flow("refine")

    @flow.loop(feed="draft", until=lambda d: d.count("!") >= 3, max_iterations=max_iterations, on_max=on_max)
    def refine(draft: str, mark: str = "!") -> str:
        return draft + mark

    @flow.node
    def publish(refine: str) -> str:
        return refine.upper()

    return flow


def test_loop_feeds_each_output_to_the_next_iteration_until_the_condition_holds():
    run = refine_flow().run(draft="hi")
    assert run["refine"] == "hi!!!" and run["publish"] == "HI!!!"
    its = run.nodes["refine"].iterations
    assert [i.output for i in its] == ["hi!", "hi!!", "hi!!!"]
    assert not run.nodes["refine"].capped


def test_loop_cap_is_reported_and_an_error_by_option():
    run = refine_flow(max_iterations=2).run(draft="x")
    assert run["refine"] == "x!!" and run.nodes["refine"].capped
    run = refine_flow(on_max="fail", max_iterations=2).run(draft="x")
    err = run.nodes["refine"].error
    assert isinstance(err, nf.LoopLimitError) and "max_iterations=2" in str(err)
    assert run.nodes["publish"].status is nf.NodeStatus.SKIPPED


def test_a_failing_iteration_fails_the_loop_and_is_recorded():
    flow = nf.Flow("f")

    @flow.loop(feed="n", until=lambda n: n > 10, max_iterations=5)
    def bump(n: int) -> int:
        if n == 3:
            raise RuntimeError("three is bad")
        return n + 1

    run = flow.run(n=1)
    rec = run.nodes["bump"]
    assert isinstance(rec.error, RuntimeError)
    assert [i.error is None for i in rec.iterations] == [True, True, False]


# --- sub-flows -----------------------------------------------------------------------------------


def summarize_flow() -> nf.Flow:
    sub = nf.Flow("summarize")

    @sub.node
    def clean(text: str) -> str:
        return " ".join(text.split())

    @sub.node
    def summary(clean: str, words: int = 2) -> str:
        if not clean:
            raise ValueError("nothing to summarize")
        return " ".join(clean.split()[:words])

    return sub


def test_a_flow_is_a_node_of_another_with_explicit_mapping():
    parent = nf.Flow("parent")

    @parent.node
    def doc() -> str:
        return "  the quick   brown fox "

    parent.add(summarize_flow(), name="summ", inputs={"text": "doc"}, output="summary")

    @parent.node
    def shout(summ: str) -> str:
        return summ.upper()

    run = parent.run()
    assert run["shout"] == "THE QUICK"
    assert run["summ.clean"] == "the quick brown fox"  # its nodes under the sub-flow's name
    assert run.nodes["summ"].subrun.status is nf.RunStatus.SUCCEEDED
    assert list(run.to_frame().index) == ["doc", "summ", "summ.clean", "summ.summary", "shout"]
    assert set(parent.inputs) == {"words"}  # the sub-flow's optional input surfaces, optional
    assert parent.run(words=3)["shout"] == "THE QUICK BROWN"


def test_sub_flow_without_output_returns_its_leaf_outputs_and_failures_propagate():
    parent = nf.Flow("parent")
    parent.add(summarize_flow(), name="summ")
    assert parent.run(text="a b c")["summ"] == {"summary": "a b"}
    run = parent.run(text="   ")
    err = run.nodes["summ"].error
    assert isinstance(err, nf.SubflowFailedError) and "'summary' (ValueError: nothing to summarize)" in str(err)
    assert run.record("summ.summary").status is nf.NodeStatus.FAILED


def test_sub_flow_keeps_its_own_validation():
    sub = nf.Flow("bad")
    sub.add(lambda b: b, name="a")
    sub.add(lambda a: a, name="b")
    parent = nf.Flow("p")
    parent.add(sub, name="inner")
    with pytest.raises(nf.CycleError):
        parent.graph  # noqa: B018
    with pytest.raises(nf.UnknownNodeError, match="sub-flow 'summarize' output 'nope'"):
        parent.add(summarize_flow(), name="x", output="nope")
    with pytest.raises(nf.FlowDefinitionError, match="cannot contain itself"):
        parent.add(parent)


def test_editing_a_sub_flow_after_adding_it_is_picked_up():
    sub = summarize_flow()
    parent = nf.Flow("p")
    parent.add(sub, name="summ", output="summary")
    assert parent.run(text="a b c")["summ"] == "a b"

    @sub.node
    def summary(clean: str) -> str:  # re-run cell in the sub-flow
        return clean[::-1]

    assert parent.run(text="abc")["summ"] == "cba"


def test_sub_flow_events_reach_the_parent_with_prefixed_names():
    parent = nf.Flow("p")
    parent.add(summarize_flow(), name="summ", output="summary")
    seen = []
    parent.run(text="a b", on_event=lambda e: seen.append(getattr(e, "node", None)))
    assert "summ.clean" in seen and "summ.summary" in seen and "summ" in seen


# --- nested combinations ---------------------------------------------------------------------------


def test_map_of_a_sub_flow_containing_a_router():
    sub = nf.Flow("triage")

    @sub.router(branches=["short", "long"])
    def size(text: str) -> str:
        if text == "boom":
            raise ValueError("cannot size")
        return "short" if len(text) < 5 else "long"

    sub.add(lambda text: f"S:{text}", name="as_short", branch="size.short")
    sub.add(lambda text: f"L:{text}", name="as_long", branch="size.long")
    sub.add(lambda r: r, name="result", inputs={"r": nf.first_of("as_short", "as_long")})

    parent = nf.Flow("p")
    parent.add(sub, name="each", inputs={"text": "texts"}, output="result", map=nf.Map("text", errors="continue"))
    run = parent.run(texts=["hi", "hello world", "boom"])
    out = run["each"]
    assert out[:2] == ["S:hi", "L:hello world"]
    assert isinstance(out[2], nf.ItemFailed) and out[2].error_type == "SubflowFailedError"
    items = run.nodes["each"].items
    assert items[0].run.nodes["as_long"].skip_reason == "branch 'long' of 'size' not taken"
    assert items[2].run.nodes["size"].status is nf.NodeStatus.FAILED


def test_a_loop_inside_a_map():
    sub = nf.Flow("grow")
    sub.loop(feed="word", until=lambda w: len(w) >= 4, max_iterations=10, name="extend")(lambda word: word + word[-1])
    body = "extend"
    parent = nf.Flow("p")
    parent.add(sub, name="grown", inputs={"word": "words"}, output=body, map=nf.Map("word", concurrency=2))
    assert parent.run(words=["a", "xy", "long"])["grown"] == ["aaaa", "xyyy", "longg"]


def test_a_loop_whose_body_is_a_sub_flow():
    body = nf.Flow("step")
    body.add(lambda draft: draft + "+", name="edit")
    parent = nf.Flow("p")
    parent.add(body, name="refine", output="edit", loop=nf.Loop("draft", until=lambda d: len(d) >= 3))
    run = parent.run(draft="a")
    assert run["refine"] == "a++"
    assert [i.run.status for i in run.nodes["refine"].iterations] == [nf.RunStatus.SUCCEEDED] * 2


@pytest.mark.anyio
async def test_cancelling_during_a_map_marks_items_and_keeps_finished_ones():
    flow = nf.Flow("m")

    @flow.map(over="xs", concurrency=1)
    async def slow(xs: int) -> int:
        if xs == 2:
            await anyio.sleep(600)
        return xs

    with anyio.move_on_after(0.3):
        await flow.arun(xs=[0, 1, 2, 3])
    rec = flow.last_run.nodes["slow"]
    assert rec.status is nf.NodeStatus.CANCELLED
    assert [i.status.name for i in rec.items] == ["SUCCEEDED", "SUCCEEDED", "CANCELLED", "CANCELLED"]
    assert [i.output for i in rec.items[:2]] == [0, 1]
