"""The worker awaits its node directly (``scheduler.py``'s ``plain_loop``): what that must keep.

A node that waits suspends the whole worker, so the scheduler hands the other ready nodes to
workers of their own at the next loop turn (``Scheduler.arm``); arguments go by position where a
plain function allows it, by name otherwise; a return value of exactly the hinted builtin type
skips its check, any other value is checked.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import pytest

import nbflow as nf


def test_a_waiting_node_does_not_hold_back_the_other_ready_nodes() -> None:
    """Branch ``wait`` waits for an event only branch ``go`` sets: both must run at once."""
    flow = nf.Flow("siblings")

    @flow.node
    async def src() -> asyncio.Event:
        return asyncio.Event()

    @flow.node
    async def wait(src: asyncio.Event) -> str:
        await asyncio.wait_for(src.wait(), 5)  # a TimeoutError here: go never ran meanwhile
        return "woken"

    @flow.node
    async def go(src: asyncio.Event) -> str:
        src.set()
        return "set"

    run = flow.run(show=False, concurrency=4)
    assert run.status is nf.RunStatus.SUCCEEDED, run.summary()
    assert run.outputs == {"src": run["src"], "wait": "woken", "go": "set"}


def test_waiting_branches_of_a_fan_out_overlap() -> None:
    flow = nf.Flow("overlap")

    @flow.node
    async def src() -> int:
        return 0

    for k in range(6):

        @flow.node(name=f"b{k}")
        async def branch(src: int) -> int:
            await asyncio.sleep(0.2)
            return src + 1

    t0 = time.perf_counter()
    run = flow.run(show=False)
    took = time.perf_counter() - t0
    assert run.status is nf.RunStatus.SUCCEEDED
    assert took < 0.2 * 3, f"six 0.2 s branches took {took:.2f} s: they did not overlap"


def test_a_node_that_never_waits_runs_without_a_loop_turn() -> None:
    """A chain of nodes that do not wait runs inside one worker: no other task gets the loop."""
    flow = nf.Flow("no-turn")
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    @flow.node
    async def n0() -> int:
        return 0

    for i in range(1, 20):

        async def step(x: int) -> int:
            return x + 1

        flow.add(step, name=f"n{i}", inputs={"x": f"n{i - 1}"})

    async def main() -> nf.Run:
        task = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        before = turns
        run = await flow.arun(show=False)
        seen = turns - before
        task.cancel()
        assert seen <= 1, f"the loop turned {seen} times during a run of 20 nodes that never wait"
        return run

    run = asyncio.run(main())
    assert run["n19"] == 19


class _Adder:
    async def __call__(self, value: int) -> int:
        return value + 100


def _wrapped(f: Any) -> Any:
    @functools.wraps(f)
    async def inner(*args: Any, **kwargs: Any) -> Any:
        return await f(*args, **kwargs)

    return inner


@pytest.mark.parametrize("kind", ["plain", "keyword_only", "default", "partial", "object", "wrapped", "renamed"])
def test_arguments_reach_every_shape_of_node_function(kind: str) -> None:
    flow = nf.Flow(f"shapes-{kind}")

    @flow.node
    async def src() -> int:
        return 1

    if kind == "plain":

        async def f(src: int) -> int:
            return src + 100

        flow.add(f, name="out")
    elif kind == "keyword_only":

        async def g(*, src: int) -> int:
            return src + 100

        flow.add(g, name="out")
    elif kind == "default":

        async def h(src: int, extra: int = 100) -> int:
            return src + extra

        flow.add(h, name="out")
    elif kind == "partial":

        async def p(src: int, extra: int) -> int:
            return src + extra

        flow.add(functools.partial(p, extra=100), name="out")
    elif kind == "object":
        flow.add(_Adder(), name="out", inputs={"value": "src"})
    elif kind == "wrapped":

        async def w(src: int) -> int:
            return src + 100

        flow.add(_wrapped(w), name="out")
    else:

        async def r(value: int) -> int:
            return value + 100

        flow.add(r, name="out", inputs={"value": "src"})

    assert flow.run(show=False)["out"] == 101


def test_a_fan_in_gets_each_parameter_its_own_upstream_whatever_the_order() -> None:
    flow = nf.Flow("fan-in")
    names = [f"m{k}" for k in range(30)]
    for k, name in enumerate(names):
        flow.add(lambda k=k: k * 10, name=name)  # type: ignore[misc]

    # Parameters declared in reverse order of the nodes; two of them renamed by inputs=.
    params = list(reversed(names))
    ns: dict[str, Any] = {}
    exec(f"async def sink({', '.join(params)}):\n    return [{', '.join(params)}]", ns)
    flow.add(ns["sink"], name="sink")

    async def swapped(m1: int, m0: int) -> tuple[int, int]:
        return m1, m0

    flow.add(swapped, name="swapped", inputs={"m1": "m0", "m0": "m1"})
    run = flow.run(show=False)
    assert run["sink"] == [int(p[1:]) * 10 for p in params]
    assert run["swapped"] == (0, 10)


def test_a_return_value_of_another_type_is_still_checked() -> None:
    flow = nf.Flow("returns")

    @flow.node
    async def as_int() -> int:
        return "12"  # type: ignore[return-value]  # converted by the check, as before

    @flow.node
    async def bad() -> int:
        return "twelve"  # type: ignore[return-value]

    @flow.node
    async def subclass() -> int:
        return True  # a bool is not exactly an int: it goes through the check

    run = flow.run(show=False)
    assert run["as_int"] == 12 and type(run["as_int"]) is int
    assert run.nodes["bad"].error_type == "TypeValidationError"
    assert run["subclass"] == 1 and type(run["subclass"]) is int  # pydantic's int, not the bool
