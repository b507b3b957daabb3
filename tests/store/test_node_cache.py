"""Node caching: hits and misses, edits invalidate downstream only, files, secrets, and the interplay
with batches, retries, error strategies, pauses, targets and overrides (docs/caching.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter

import pytest

import nbflow as nf

PROMPT = "Summarise: {}"  # a global a node reads: editing it must invalidate that node
SETTINGS = {"model": "small"}
node_runs = 0  # a global counter a node assigns: state, not a setting


def chain(calls: Counter[str], **flow_kw: object) -> nf.Flow:
    """a -> b -> c, and a -> d."""
    flow = nf.Flow("chain", cache=True, **flow_kw)  # type: ignore[arg-type]

    @flow.node
    def a(x: int) -> int:
        calls["a"] += 1
        return x + 1

    @flow.node
    def b(a: int) -> int:
        calls["b"] += 1
        return a * 2

    @flow.node
    def c(b: int) -> int:
        calls["c"] += 1
        return b + 100

    @flow.node
    def d(a: int) -> str:
        calls["d"] += 1
        return f"d{a}"

    return flow


def cached(run: nf.Run) -> dict[str, bool]:
    return {n: r.cached for n, r in run.nodes.items()}


def test_the_same_inputs_hit_and_a_hit_is_succeeded_without_attempts():
    calls: Counter[str] = Counter()
    flow = chain(calls)
    first = flow.run(x=1)
    events: list[nf.Event] = []
    second = flow.run(x=1, on_event=events.append)
    assert first.outputs == second.outputs == {"a": 2, "b": 4, "c": 104, "d": "d2"}
    assert calls == Counter(a=1, b=1, c=1, d=1)
    assert cached(first) == dict.fromkeys("abcd", False)
    assert cached(second) == dict.fromkeys("abcd", True)
    rec = second.nodes["c"]
    assert rec.status is nf.NodeStatus.SUCCEEDED and rec.attempts == [] and rec.duration == 0
    assert rec.cache_key == first.nodes["c"].cache_key
    succeeded = [e for e in events if isinstance(e, nf.NodeSucceeded)]
    assert [e.cached for e in succeeded] == [True] * 4 and all(e.duration == 0 for e in succeeded)
    assert not any(isinstance(e, nf.NodeStarted) for e in events)
    frame = second.to_frame()
    assert frame["cached"].tolist() == [True] * 4
    assert first.to_frame()["cached"].tolist() == [False] * 4


def test_a_different_input_misses():
    calls: Counter[str] = Counter()
    flow = chain(calls)
    flow.run(x=1)
    run = flow.run(x=2)
    assert run["c"] == 106 and calls == Counter(a=2, b=2, c=2, d=2)
    assert cached(run) == dict.fromkeys("abcd", False)
    flow.run(x=1)
    assert calls == Counter(a=2, b=2, c=2, d=2)  # both are kept


def test_editing_a_node_reruns_it_and_its_descendants_only():
    calls: Counter[str] = Counter()
    flow = chain(calls)
    flow.run(x=1)

    @flow.node
    def b(a: int) -> int:  # the cell defining b is edited and run again
        calls["b2"] += 1
        return a * 3

    run = flow.run(x=1)
    assert run.outputs == {"a": 2, "d": "d2", "b": 6, "c": 106}
    assert calls == Counter(a=1, b=1, b2=1, c=2, d=1)
    assert cached(run) == {"a": True, "d": True, "b": False, "c": False}
    again = flow.run(x=1)
    assert all(cached(again).values()) and calls["b2"] == 1


def test_editing_a_global_the_node_reads_invalidates_it(monkeypatch):
    flow = nf.Flow("g", cache=True)
    calls: Counter[str] = Counter()

    @flow.node
    def summary(text: str) -> str:
        calls["summary"] += 1
        return PROMPT.format(text)

    assert flow.run(text="t")["summary"] == "Summarise: t"
    assert flow.run(text="t").nodes["summary"].cached
    monkeypatch.setattr(sys.modules[__name__], "PROMPT", "Shorten: {}")
    assert flow.run(text="t")["summary"] == "Shorten: t"
    assert calls["summary"] == 2


def test_a_settings_dict_counts_and_a_global_counter_does_not(monkeypatch):
    flow = nf.Flow("settings", cache=True)

    @flow.node
    def reply(q: str) -> str:
        global node_runs
        node_runs += 1
        return f"{SETTINGS['model']}: {q}"

    start = node_runs
    flow.run(q="x")
    assert flow.run(q="x").nodes["reply"].cached and node_runs == start + 1
    monkeypatch.setitem(SETTINGS, "model", "large")
    assert flow.run(q="x")["reply"] == "large: x" and node_runs == start + 2


def test_cache_false_always_runs_and_its_output_value_keys_the_downstream():
    calls: Counter[str] = Counter()
    flow = nf.Flow("optout", cache=True)
    state = {"now": 1}

    @flow.node(cache=False)
    def clock() -> int:
        calls["clock"] += 1
        return state["now"]

    @flow.node
    def report(clock: int) -> str:
        calls["report"] += 1
        return f"t={clock}"

    flow.run()
    run = flow.run()
    assert calls == Counter(clock=2, report=1) and cached(run) == {"clock": False, "report": True}
    state["now"] = 2
    run = flow.run()
    assert run["report"] == "t=2" and calls == Counter(clock=3, report=2)


def test_a_node_can_opt_in_while_the_flow_cache_is_off():
    calls: Counter[str] = Counter()
    flow = nf.Flow("optin")
    assert flow.cache is None

    @flow.node(cache=True)
    def slow(q: str) -> str:
        calls["slow"] += 1
        return q.upper()

    @flow.node
    def fast(slow: str) -> str:
        calls["fast"] += 1
        return slow + "!"

    flow.run(q="hi")
    run = flow.run(q="hi")
    assert run["fast"] == "HI!" and calls == Counter(slow=1, fast=2)
    assert cached(run) == {"slow": True, "fast": False}
    assert flow.clear_cache() == 1


def test_clear_cache_per_node_reruns_it_and_downstream():
    calls: Counter[str] = Counter()
    flow = chain(calls)
    flow.run(x=1)
    assert flow.clear_cache("b") == 1
    run = flow.run(x=1)
    assert cached(run) == {"a": True, "b": False, "c": False, "d": True}
    assert flow.clear_cache() == 5  # b and c were stored again; c's old entry is still there
    assert len(flow.cache or []) == 0
    with pytest.raises(nf.UnknownNodeError, match="'bb'"):
        flow.clear_cache("bb")


def test_an_unhashable_input_runs_uncached_with_one_warning():
    calls: Counter[str] = Counter()
    flow = nf.Flow("unhashable", cache=True)

    @flow.node
    def use(client: object, q: str) -> str:
        calls["use"] += 1
        return q

    @flow.node
    def after(use: str) -> str:
        calls["after"] += 1
        return use + "."

    client = lambda: None  # noqa: E731  (a lambda cannot be pickled)
    with pytest.warns(nf.NbflowWarning, match=r"node 'use' of flow 'unhashable' runs uncached: its input 'client'"):
        flow.run(client=client, q="a")
    with pytest.warns() as seen:  # not again
        run = flow.run(client=client, q="a")
        import warnings

        warnings.warn("marker", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["marker"]
    assert run.status is nf.RunStatus.SUCCEEDED and calls == Counter(use=2, after=1)
    assert cached(run) == {"use": False, "after": True}  # the downstream is keyed by use's output value


def test_bad_cache_options_are_clear_errors(tmp_path):
    with pytest.raises(nf.FlowDefinitionError, match="cache=3"):
        nf.Flow("bad", cache=3)  # type: ignore[arg-type]
    flow = nf.Flow("bad")
    with pytest.raises(nf.FlowDefinitionError, match="node 'n': cache='yes'"):
        flow.add(lambda: 1, name="n", cache="yes")  # type: ignore[arg-type]
    inner = nf.Flow("inner")
    inner.add(lambda: 1, name="one")
    with pytest.raises(nf.FlowDefinitionError, match="sub-flow node is not cached as a whole"):
        flow.add(inner, cache=True)
    with pytest.raises(nf.StoreError, match="does not exist"):
        nf.Flow("bad", cache=tmp_path / "no" / "cache.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(nf.StoreError, match="not a readable nbflow store"):
        nf.Flow("bad", cache=junk)


def test_a_file_cache_survives_a_new_flow_object(tmp_path):
    path = tmp_path / "cache.db"
    calls: Counter[str] = Counter()

    def build() -> nf.Flow:
        flow = nf.Flow("filed", cache=str(path))

        @flow.node
        def ask_llm(q: str) -> dict[str, str]:
            calls["llm"] += 1
            return {"q": q, "a": q[::-1]}

        return flow

    assert build().run(q="abc")["ask_llm"] == {"q": "abc", "a": "cba"}
    run = build().run(q="abc")
    assert run["ask_llm"] == {"q": "abc", "a": "cba"} and run.nodes["ask_llm"].cached
    assert calls["llm"] == 1
    assert len(nf.NodeCache(path)) == 1


def test_a_file_cache_survives_a_new_process(tmp_path):
    script = tmp_path / "flow_script.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import nbflow as nf

            flow = nf.Flow("proc", cache=sys.argv[1])

            @flow.node
            def expensive(q: str) -> str:
                print("RAN expensive")
                return q * 2

            @flow.node
            def shout(expensive: str) -> str:
                print("RAN shout")
                return expensive.upper()

            run = flow.run(q="ab")
            print(run["shout"], [n for n, r in run.nodes.items() if r.cached])
            """
        )
    )
    db = str(tmp_path / "c.db")

    def go() -> str:
        done = subprocess.run([sys.executable, str(script), db], capture_output=True, text=True, check=True)
        return done.stdout

    assert go().splitlines() == ["RAN expensive", "RAN shout", "ABAB []"]
    assert go().splitlines() == ["ABAB ['expensive', 'shout']"]


def test_secrets_change_the_key_but_never_reach_the_file(tmp_path):
    path = tmp_path / "cache.db"
    calls: Counter[str] = Counter()
    flow = nf.Flow("secret", cache=path)

    @flow.node
    def answer(api_key: str, q: str) -> str:
        calls["answer"] += 1
        return f"answer to {q}"

    @flow.node
    def config(api_key: str) -> dict[str, str]:  # returns the secret itself: never written
        calls["config"] += 1
        return {"key": api_key}

    with pytest.warns(nf.NbflowWarning, match="node 'config'.*holds the value of a secret input"):
        flow.run(api_key=nf.Secret("sk-TOPSECRET-1"), q="q")
    run = flow.run(api_key=nf.Secret("sk-TOPSECRET-1"), q="q")
    assert cached(run) == {"answer": True, "config": False}
    assert run["config"]["key"] == "sk-TOPSECRET-1"
    other = flow.run(api_key=nf.Secret("sk-TOPSECRET-2"), q="q")
    assert cached(other) == {"answer": False, "config": False}
    assert calls == Counter(answer=2, config=3)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("cache.db"))
    assert b"answer to q" in raw  # the check below can see values
    assert b"TOPSECRET" not in raw


def test_a_second_batch_over_the_same_rows_is_all_hits_and_shared_work_runs_once():
    calls: Counter[str] = Counter()
    flow = nf.Flow("batched", cache=True)

    @flow.node
    async def retrieve(question: str) -> str:
        calls["retrieve"] += 1
        return f"docs for {question}"

    @flow.node
    async def answer(retrieve: str, style: str) -> str:
        calls["answer"] += 1
        return f"{style}: {retrieve}"

    rows = [{"question": q} for q in ("a", "b", "c")]
    grid = {"style": ["short", "long"]}
    first = flow.batch(rows, grid=grid)
    assert (first["status"] == "succeeded").all()
    # Each question is retrieved once for both styles (the second variant waits for the first).
    assert calls == Counter(retrieve=3, answer=6)
    second = flow.batch(rows, grid=grid)
    assert second["answer"].tolist() == first["answer"].tolist()
    assert calls == Counter(retrieve=3, answer=6)


def test_retried_successes_are_cached_failures_and_recoveries_are_not():
    calls: Counter[str] = Counter()
    flow = nf.Flow("resilient", cache=True, clock=nf.FakeClock())
    flaky_left = {"n": 1}

    @flow.node(retry=nf.Retry(attempts=3, backoff=1.0))
    def flaky(x: int) -> int:
        calls["flaky"] += 1
        if flaky_left["n"]:
            flaky_left["n"] -= 1
            raise ConnectionError("blip")
        return x

    @flow.node(on_error=nf.Default(-1))
    def recovered(x: int) -> int:
        calls["recovered"] += 1
        raise ValueError("always")

    @flow.node(on_error="continue")
    def failing(x: int) -> int:
        calls["failing"] += 1
        raise ValueError("nope")

    @flow.node
    def handler(failing: object) -> str:
        calls["handler"] += 1
        return type(failing).__name__

    first = flow.run(x=5)
    assert len(first.nodes["flaky"].attempts) == 2 and first["recovered"] == -1
    second = flow.run(x=5)
    assert cached(second) == {"flaky": True, "recovered": False, "failing": False, "handler": False}
    assert second["flaky"] == 5 and second.nodes["flaky"].attempts == []
    assert calls == Counter(flaky=2, recovered=2, failing=2, handler=2)  # handler was fed a failure


def test_a_node_that_asked_is_not_cached_and_a_resumed_run_works():
    calls: Counter[str] = Counter()
    flow = nf.Flow("review", cache=True)

    @flow.node
    def draft(topic: str) -> str:
        calls["draft"] += 1
        return f"post on {topic}"

    @flow.node
    async def review(draft: str) -> str:
        calls["review"] += 1
        return await nf.ask("ok?", data=draft, options=["yes", "no"])

    @flow.node
    def publish(review: str, draft: str) -> str:
        calls["publish"] += 1
        return draft if review == "yes" else "-"

    run = flow.run(topic="t")
    assert run.status is nf.RunStatus.PAUSED
    run = run.resume("yes")
    assert run.status is nf.RunStatus.SUCCEEDED and run["publish"] == "post on t"
    again = flow.run(topic="t")
    assert again.status is nf.RunStatus.PAUSED  # asked again: the answer is not cached
    assert again.nodes["draft"].cached
    again = again.resume("no")
    assert again["publish"] == "-" and not again.nodes["publish"].cached
    assert calls == Counter(draft=1, review=4, publish=2)


def test_targets_and_overrides():
    calls: Counter[str] = Counter()
    flow = chain(calls)
    part = flow.run(x=1, targets="b")
    assert set(part.nodes) == {"a", "b"}
    full = flow.run(x=1)
    assert cached(full) == {"a": True, "b": True, "c": False, "d": False}
    # An override is keyed by its value (a's entry id keyed the earlier runs): one miss, then hits.
    over = flow.run(x=1, overrides={"a": 2})
    assert cached(over) == {"a": False, "b": False, "c": False, "d": False} and over.nodes["a"].overridden
    over = flow.run(x=1, overrides={"a": 2})
    assert cached(over) == {"a": False, "b": True, "c": True, "d": True}
    changed = flow.run(x=1, overrides={"a": 10})
    assert changed["c"] == 120 and not changed.nodes["b"].cached
    assert calls == Counter(a=1, b=3, c=3, d=3)


def test_a_map_node_is_cached_whole_unless_an_item_failed():
    calls: Counter[str] = Counter()
    flow = nf.Flow("mapped", cache=True)

    @flow.map("item", errors="continue")
    def each(item: int) -> int:
        calls["each"] += 1
        if item < 0:
            raise ValueError("negative")
        return item * 10

    flow.run(item=[1, 2])
    run = flow.run(item=[1, 2])
    assert run["each"] == [10, 20] and run.nodes["each"].cached and calls["each"] == 2
    flow.run(item=[1, -1])
    flow.run(item=[1, -1])
    assert calls["each"] == 6  # a result with a failed item is never kept


def test_the_graph_and_text_views_say_cached():
    calls: Counter[str] = Counter()
    flow = chain(calls)
    flow.run(x=1)
    run = flow.run(x=1)
    assert "cached" in repr(run.nodes["a"])
    from nbflow._show.draw import text_graph, to_dot

    assert "  a <- <x>  [succeeded, cached]" in text_graph(flow.graph, run)
    assert "succeeded (cached)" in to_dot(flow.graph, run).source


@pytest.mark.anyio
async def test_subflow_nodes_are_cached_by_the_subflow_cache():
    calls: Counter[str] = Counter()
    inner = nf.Flow("inner", cache=True)

    @inner.node
    def work(v: int) -> int:
        calls["work"] += 1
        return v + 1

    outer = nf.Flow("outer", cache=True)

    @outer.node
    def v(n: int) -> int:
        return n

    outer.add(inner, name="sub")
    await outer.arun(n=1, show=False)
    run = await outer.arun(n=1, show=False)
    assert run["sub"] == {"work": 2} and calls["work"] == 1
    assert not run.nodes["sub"].cached and run.record("sub.work").cached


def test_routers_and_loops_are_cached_whole_and_branches_still_skip():
    calls: Counter[str] = Counter()
    flow = nf.Flow("routed", cache=True)

    @flow.router(branches=["short", "long"])
    def route(text: str) -> str:
        calls["route"] += 1
        return "short" if len(text) < 5 else "long"

    @flow.node(branch="route.short")
    def echo(text: str) -> str:
        calls["echo"] += 1
        return text

    @flow.loop("value", until=lambda v: v >= 8)
    def grow(value: int, text: str) -> int:
        calls["grow"] += 1
        return value * 2

    flow.run(text="hi", value=1)
    run = flow.run(text="hi", value=1)
    assert cached(run) == {"route": True, "echo": True, "grow": True}
    assert run["grow"] == 8 and run["echo"] == "hi"
    assert calls == Counter(route=1, echo=1, grow=3)
    run = flow.run(text="a long text", value=1)
    assert run.nodes["echo"].status is nf.NodeStatus.SKIPPED and not run.nodes["route"].cached
    run = flow.run(text="a long text", value=1)
    assert run.nodes["route"].cached and run.nodes["echo"].status is nf.NodeStatus.SKIPPED


def test_a_run_paused_with_a_checkpoint_store_resumes_from_the_file(tmp_path):
    calls: Counter[str] = Counter()
    store = tmp_path / "runs.db"
    flow = nf.Flow("stored", cache=tmp_path / "cache.db", store=store)

    @flow.node
    def draft(topic: str) -> str:
        calls["draft"] += 1
        return f"post on {topic}"

    @flow.node
    async def review(draft: str) -> str:
        return await nf.ask("ok?", options=["yes", "no"])

    flow.run(topic="t").resume("yes")
    paused = flow.run(topic="t")
    assert paused.status is nf.RunStatus.PAUSED and paused.nodes["draft"].cached
    loaded = nf.load_run(store, paused.run_id)
    assert loaded["draft"] == "post on t"
    done = loaded.resume("no")
    assert done.status is nf.RunStatus.SUCCEEDED and done["review"] == "no"
    assert calls["draft"] == 1
