"""The flow and the driver the SIGKILL tests run in real child processes (tests/store/test_crash_recovery.py)."""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
import traceback
from typing import Any

import nbflow as nf
from nbflow._store.checkpoint import open_store

flow = nf.Flow("crash_recovery")


@flow.node
async def a(x: int) -> int:
    await asyncio.sleep(random.random() * 0.03)
    return x + 1


@flow.node(retry=nf.Retry(attempts=10, backoff=0.0))
def b(a: int) -> int:
    time.sleep(random.random() * 0.03)
    if random.random() < 0.3:
        raise ConnectionError("flaky")
    return a * 2


@flow.node
async def c(a: int) -> str:
    answer = await nf.ask("approve?", data=a)
    return f"{a}:{answer}"


@flow.node
def d(b: int, c: str) -> list:
    time.sleep(random.random() * 0.03)
    return [b, c]


EXPECTED_PREFIX = {"a": 4, "b": 8}


def drive(path: str, answer: str, ready: Any = None) -> None:
    """Start, or load and resume, the one run in ``path`` until it SUCCEEDED; exit 0 then, 3 on an error.

    ``ready`` (an Event) is set once the child is about to open the store, so the parent's kill lands
    in the store work rather than in the process start.
    """
    random.seed(os.getpid() ^ time.monotonic_ns())
    if ready is not None:
        ready.set()
    try:
        for _ in range(30):
            ids = open_store(path).run_ids()
            if not ids:
                run = flow.run(x=3, store=path, show=False)
            else:
                run = nf.load_run(path, ids[0][0])
                if run.status is nf.RunStatus.SUCCEEDED:
                    os._exit(0)
                if run.status is not nf.RunStatus.PAUSED:
                    raise AssertionError(f"cannot be continued: {run!r} {run.reason!r}")
                run.resume(answer) if run.pending else run.resume()
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(3)
    os._exit(5)


def _warm_up() -> None:
    """Done once in the fork server, so each forked child starts running at once (no thread is started)."""
    import anyio._backends._asyncio  # noqa: F401  (imported lazily by the first run otherwise)

    flow.graph  # noqa: B018  (compiles the graph and its pydantic validators)
    flow._resolved_policies()


_warm_up()
