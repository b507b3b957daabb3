"""@flow.resource: built once per event loop, shared, closed with the loop; wired by name; errors."""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import threading
from typing import ClassVar

import cloudpickle
import pytest

import nbflow as nf


class Client:
    """A stand-in SDK client that counts its instances and closes (and is bound to its loop)."""

    made: ClassVar[list[Client]] = []

    def __init__(self, tag: str = "c") -> None:
        self.tag = tag
        self.loop = asyncio.get_running_loop()
        self.closed = 0
        Client.made.append(self)

    async def aclose(self) -> None:
        assert asyncio.get_running_loop() is self.loop, "closed on another loop"
        self.closed += 1

    async def ask(self, q: str) -> str:
        assert asyncio.get_running_loop() is self.loop, "used on another loop"
        if self.closed:
            raise RuntimeError("client is closed")
        await asyncio.sleep(0)
        return f"{self.tag}:{q}"


@pytest.fixture(autouse=True)
def _fresh():
    Client.made = []
    yield


def llm_flow(kind: str = "async") -> tuple[nf.Flow, list[str]]:
    flow = nf.Flow(f"res_{kind}")
    log: list[str] = []
    if kind == "async":

        @flow.resource
        async def llm() -> Client:
            log.append("open")
            return Client()
    elif kind == "async_generator":

        @flow.resource
        async def llm():
            log.append("open")
            c = Client()
            yield c
            await c.aclose()
            log.append("close")
    elif kind == "generator":

        @flow.resource
        def llm():
            log.append("open")
            yield {"tag": "g"}
            log.append("close")
    else:

        @flow.resource
        def llm() -> Client:
            log.append("open")
            return Client()

    @flow.node
    async def answer(q: str, llm) -> str:
        if isinstance(llm, dict):
            return f"{llm['tag']}:{q}"
        return await llm.ask(q)

    return flow, log


@pytest.mark.parametrize("kind", ["async", "async_generator", "generator", "sync"])
def test_one_instance_per_loop_shared_by_runs_and_closed_when_the_loop_ends(kind):
    flow, log = llm_flow(kind)

    async def main():
        runs = [await flow.arun(q=str(i), show=False) for i in range(3)]
        rows = await asyncio.gather(*(flow.arun(q=f"x{i}", show=False) for i in range(20)))
        return runs + list(rows)

    runs = asyncio.run(main())
    assert all(r.status is nf.RunStatus.SUCCEEDED for r in runs), [r.summary() for r in runs]
    assert log.count("open") == 1
    if kind == "generator":
        assert runs[0]["answer"] == "g:0"
        assert log == ["open", "close"]
    else:
        assert runs[0]["answer"] == "c:0"
        assert len(Client.made) == 1 and Client.made[0].closed == 1
        if kind == "async_generator":
            assert log == ["open", "close"]
    # a second loop builds (and closes) its own
    asyncio.run(flow.arun(q="again", show=False))
    assert log.count("open") == 2
    if kind != "generator":
        assert [c.closed for c in Client.made] == [1, 1]


def test_blocking_runs_in_a_script_each_get_a_loop_and_close_their_instance():
    flow, log = llm_flow("async_generator")
    outs = [flow.run(q=str(i), show=False)["answer"] for i in range(3)]
    assert outs == ["c:0", "c:1", "c:2"]
    assert log == ["open", "close"] * 3


def test_the_resource_is_never_in_inputs_records_or_the_frame():
    flow, _ = llm_flow("async")
    run = asyncio.run(flow.arun(q="a", show=False))
    assert "llm" not in run.inputs
    assert "llm" not in run.nodes["answer"].inputs
    assert "llm" not in flow.inputs
    assert "llm" not in " ".join(run.to_frame().columns) if hasattr(run, "to_frame") else True


def test_resources_depend_on_resources_and_flow_inputs():
    flow = nf.Flow("res_deps")
    made: list[tuple[str, str]] = []

    @flow.resource
    def settings(base_url: str, retries: int = 2) -> dict:
        return {"base_url": base_url, "retries": retries}

    @flow.resource
    async def llm(settings: dict):
        made.append(("llm", settings["base_url"]))
        yield f"client@{settings['base_url']}/{settings['retries']}"

    @flow.node
    def answer(q: str, llm: str) -> str:
        return f"{llm} {q}"

    assert set(flow.inputs) == {"q", "base_url", "retries"}
    assert flow.inputs["base_url"].required_by == ("answer",)

    async def main():
        a = await flow.arun(q="1", base_url="http://a", show=False)
        b = await flow.arun(q="2", base_url="http://a", show=False)
        c = await flow.arun(q="3", base_url="http://b", show=False)
        return a, b, c

    a, _b, c = asyncio.run(main())
    assert a["answer"] == "client@http://a/2 1"
    assert c["answer"] == "client@http://b/2 3"
    assert made == [("llm", "http://a"), ("llm", "http://b")]  # one instance per input value
    with pytest.raises(nf.MissingInputError, match="base_url"):
        flow.run(q="x", show=False)


def test_a_name_both_node_and_resource_is_a_graph_error():
    flow = nf.Flow("res_clash")

    @flow.resource
    def llm() -> str:
        return "x"

    @flow.node
    def llm_node(q: str) -> str:
        return q

    flow.add(lambda q: q, name="llm")
    with pytest.raises(nf.GraphError, match="'llm' is both a node and a resource"):
        flow.graph  # noqa: B018


def test_a_resource_depending_on_a_node_or_on_itself_is_refused():
    flow = nf.Flow("res_bad")

    @flow.node
    def prompt(q: str) -> str:
        return q

    @flow.resource
    def llm(prompt: str) -> str:
        return prompt

    with pytest.raises(nf.GraphError, match="resource 'llm': parameter 'prompt' names a node"):
        flow.graph  # noqa: B018

    flow2 = nf.Flow("res_cycle")

    @flow2.resource
    def a(b):
        return 1

    @flow2.resource
    def b(a):
        return 2

    @flow2.node
    def n(a) -> int:
        return a

    with pytest.raises(nf.GraphError, match="cycle: a -> b -> a"):
        flow2.graph  # noqa: B018


def test_a_failing_factory_fails_the_nodes_that_need_it_with_its_traceback_and_is_retried():
    flow = nf.Flow("res_fail")
    calls = {"n": 0}

    @flow.resource
    def llm() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("the endpoint is down")
        return "ok"

    @flow.node
    def plain(q: str, llm: str) -> str:
        return llm + q

    run = flow.run(q="!", show=False)
    rec = run.nodes["plain"]
    assert rec.status is nf.NodeStatus.FAILED
    assert isinstance(rec.error, nf.ResourceError) and rec.error.resource == "llm"
    assert "resource 'llm' could not be created: ConnectionError: the endpoint is down" in str(rec.error)
    assert "raise ConnectionError" in rec.traceback and "def llm" not in rec.traceback
    assert isinstance(rec.error.__cause__, ConnectionError)
    # next run builds it again
    assert flow.run(q="!", show=False)["plain"] == "ok!"

    calls["n"] = 0
    retried = nf.Flow("res_retry")
    retried.resource(llm)

    @retried.node(retry=nf.Retry(attempts=2, backoff=0))
    def node(q: str, llm: str) -> str:
        return llm + q

    run = retried.run(q="?", show=False)
    assert run["node"] == "ok?" and len(run.nodes["node"].attempts) == 2 and calls["n"] == 2


def test_a_resource_param_is_never_validated():
    flow = nf.Flow("res_noval")

    @flow.resource
    def llm() -> object:
        return object()

    @flow.node
    def n(llm: int) -> str:  # a wrong hint on purpose: a resource is not checked
        return type(llm).__name__

    assert flow.run(show=False)["n"] == "object"


def test_redefining_a_resource_closes_its_old_instances():
    flow, log = llm_flow("async_generator")

    async def main():
        await flow.arun(q="a", show=False)
        assert log == ["open"]

        @flow.resource
        async def llm():
            log.append("open2")
            yield Client("new")
            log.append("close2")

        await asyncio.sleep(0.01)  # the old instance closes on this (running) loop
        assert log == ["open", "close"]
        return await flow.arun(q="b", show=False)

    run = asyncio.run(main())
    assert run["answer"] == "new:b"
    assert log == ["open", "close", "open2", "close2"]


def test_flow_close_and_aclose_close_the_instances_and_the_next_run_builds_new_ones():
    flow, log = llm_flow("async_generator")

    async def main():
        await flow.arun(q="a", show=False)
        await flow.aclose()
        assert log == ["open", "close"]
        await flow.arun(q="b", show=False)
        assert log == ["open", "close", "open"]

    asyncio.run(main())
    assert log == ["open", "close", "open", "close"]


def test_flow_close_from_another_thread_closes_on_the_instances_own_loop():
    flow, _log = llm_flow("async")
    ready, stop = threading.Event(), threading.Event()

    def other():
        async def main():
            await flow.arun(q="a", show=False)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.01)

        asyncio.run(main())

    t = threading.Thread(target=other)
    t.start()
    ready.wait(10)
    flow.close()  # the instance lives on a loop running in the other thread: closed there
    assert Client.made[0].closed == 1
    stop.set()
    t.join(10)
    assert Client.made[0].closed == 1  # not twice


def test_loop_errors_get_a_hint_naming_flow_resource():
    flow = nf.Flow("res_hint")
    event = asyncio.Event()  # a module-level object bound to the first loop that waits on it

    @flow.node
    async def use(q: str) -> str:
        try:
            await asyncio.wait_for(event.wait(), 0.01)  # never set: waits, which binds it to this loop
        except TimeoutError:
            pass
        return q

    assert flow.run(q="1", show=False)["use"] == "1"
    run = flow.run(q="2", show=False)  # a blocking run in a script: another loop
    rec = run.nodes["use"]
    assert rec.status is nf.NodeStatus.FAILED
    assert "different event loop" in str(rec.error)
    assert "@flow.resource" in rec.error_message
    assert "@flow.resource" in rec.traceback


def test_pickled_flows_carry_the_factory_and_build_their_own():
    flow, _log = llm_flow("sync")
    asyncio.run(flow.arun(q="a", show=False))
    copy = cloudpickle.loads(cloudpickle.dumps(flow))
    assert "llm" in copy.resources
    out = asyncio.run(copy.arun(q="b", show=False))
    assert out["answer"] == "c:b"
    assert len(Client.made) == 2
    with pytest.raises(Exception):  # noqa: B017 - the instance itself is never what travels
        pickle.dumps(Client.made[0].loop)


def test_the_cache_key_counts_the_resource_definition_not_the_object():
    flow = nf.Flow("res_cache", cache=True)
    calls = {"n": 0}

    @flow.resource
    def llm() -> Client:
        return Client("v1")

    @flow.node
    async def answer(q: str, llm) -> str:
        calls["n"] += 1
        return await llm.ask(q)

    assert asyncio.run(flow.arun(q="a", show=False))["answer"] == "v1:a"
    run = asyncio.run(flow.arun(q="a", show=False))  # a new loop, a new client: still a hit
    assert run.nodes["answer"].cached and calls["n"] == 1

    @flow.resource
    def llm() -> Client:  # noqa: F811 - redefined: the cached answers came from another client
        return Client("v2")

    run = asyncio.run(flow.arun(q="a", show=False))
    assert not run.nodes["answer"].cached and run["answer"] == "v2:a" and calls["n"] == 2


def test_the_graph_view_draws_resources_apart_with_their_users():
    flow, _ = llm_flow("async")
    dot = flow.to_dot().source
    assert "resource__llm [label=llm" in dot and "cluster_resources" in dot
    assert "resource__llm -> answer" in dot and "dotted" in dot
    assert '-> "node-answer"' not in dot  # the node's DOT name, not its SVG id (that drew a node of its own)
    from nbflow._show.draw import text_graph

    assert "[resource] llm: used by answer" in text_graph(flow.graph)
    assert "<llm>" not in text_graph(flow.graph)  # not an input
    from nbflow._show.draw import render_svg

    svg = render_svg(flow.graph)
    assert svg is not None and 'id="resource&#45;llm"' in svg


def test_a_run_resumed_on_another_loop_gets_that_loops_instance():
    flow = nf.Flow("res_resume")

    @flow.resource
    async def llm() -> Client:
        return Client()

    @flow.node
    async def first(q: str, llm: Client) -> str:
        return await llm.ask(q)

    @flow.node
    def gate(first: str) -> str:
        return nf.ask("go on?", options=["yes", "no"])

    @flow.node
    async def second(gate: str, llm: Client) -> str:
        return await llm.ask(gate)  # Client asserts it is used on its own loop

    with _loop_in_thread() as other:  # stays alive (like the kernel's loop): its instance is not closed
        run = asyncio.run_coroutine_threadsafe(flow.arun(q="a", show=False), other).result(30)
        assert run.status is nf.RunStatus.PAUSED and len(Client.made) == 1
        done = flow.resume(run, "yes")  # no loop running here: a new loop, which builds its own instance
    assert done.status is nf.RunStatus.SUCCEEDED, done.summary()
    assert done["second"] == "c:yes" and len(Client.made) == 2
    assert done._resources is None  # a finished run keeps no instance alive
    assert "_resources" not in done.__getstate__()  # never pickled into a checkpoint


def test_a_resource_closed_during_a_run_is_resolved_again_by_its_later_nodes():
    flow = nf.Flow("res_close_mid")

    @flow.resource
    async def llm() -> Client:
        return Client()

    @flow.node
    async def first(q: str, llm: Client) -> str:
        out = await llm.ask(q)
        await flow.aclose()  # e.g. flow.close() from another cell while the run goes on
        return out

    @flow.node
    async def second(first: str, llm: Client) -> str:
        return await llm.ask(first)  # a closed Client raises: the run's table must not hand it out

    run = asyncio.run(flow.arun(q="a", show=False))
    assert run.status is nf.RunStatus.SUCCEEDED, run.summary()
    assert run["second"] == "c:c:a" and len(Client.made) == 2 and Client.made[0].closed == 1


def test_a_sub_flow_paused_on_one_loop_and_resumed_on_another_uses_that_loops_instance():
    child = nf.Flow("res_child")

    @child.resource
    async def llm() -> Client:
        return Client()

    @child.node
    async def before(q: str, llm: Client) -> str:
        return await llm.ask(q)

    @child.node
    def gate(before: str) -> str:
        return nf.ask("go on?", options=["yes", "no"])

    @child.node
    async def after(gate: str, llm: Client) -> str:
        return await llm.ask(gate)

    parent = nf.Flow("res_parent")
    parent.add(child, name="sub")

    with _loop_in_thread() as other:  # stays alive (like the kernel's loop): its instance is not closed
        run = asyncio.run_coroutine_threadsafe(parent.arun(q="a", show=False), other).result(30)
        assert run.status is nf.RunStatus.PAUSED
        done = parent.resume(run, "yes")  # here, a new loop: the sub-flow's later node gets this loop's instance
    assert done.status is nf.RunStatus.SUCCEEDED, done.summary()
    assert len(Client.made) == 2


@contextlib.contextmanager
def _loop_in_thread():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
