"""Each event loop's sync nodes are capped by that loop's own default thread limiter (anyio's, one per loop).

nbflow remembers a loop's limiter once found (nbflow/_engine/threads.py, ``_lane``: asking anyio costs ~6 µs a
call); these tests pin that what it remembers is the limiter of the loop the call runs on, not the first one seen.
"""

import asyncio
import threading
import time

import anyio.to_thread

import nbflow as nf


def _fan_out(width: int, running: list[int]) -> nf.Flow:
    """``width`` blocking sync nodes; ``running`` = [now, most at once]."""
    flow = nf.Flow("lanes")
    lock = threading.Lock()

    @flow.node
    def src() -> int:
        return 0

    for i in range(width):

        def blocking(src: int) -> int:
            with lock:
                running[0] += 1
                running[1] = max(running[1], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            return src

        flow.add(blocking, name=f"b{i}", thread=True)
    return flow


def _most_at_once(tokens: int | None, width: int) -> int:
    """Run the fan-out on a fresh loop whose default limiter has ``tokens`` (None: anyio's default)."""
    running = [0, 0]
    flow = _fan_out(width, running)

    async def main() -> None:
        if tokens is not None:
            anyio.to_thread.current_default_thread_limiter().total_tokens = tokens
        run = await flow.arun()
        assert run.status is nf.RunStatus.SUCCEEDED, run

    asyncio.run(main())
    return running[1]


def test_each_loop_caps_its_sync_nodes_by_its_own_limiter() -> None:
    assert _most_at_once(None, 4) == 4  # a first loop: anyio's 40 tokens
    assert _most_at_once(1, 4) == 1  # a new loop whose limiter has one token: one call at a time
    assert _most_at_once(2, 4) == 2
    assert _most_at_once(None, 4) == 4  # and the next loop has 40 again, not the last loop's few
