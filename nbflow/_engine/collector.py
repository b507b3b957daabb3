"""The garbage collector's young generation, eased while many runs or nodes are alive at once.

While a batch's rows or a wide run's branches wait, the collector's youngest generation is collected every
``GEN0`` net allocations instead of Python's 700. Each of them keeps objects alive across its awaits (records,
tasks, coroutines, futures), and a young collection walks all of them while they wait: at 250 batch rows in
flight that was ~11 µs of CPU per row (~10%), 1-2 µs with 5,000 (``benchmarks/batch_throughput.py --shape sync``);
in a 500-branch fan-out, 2-4% of its wall time (``benchmarks/io_fanout.py``, docs/benchmarks.md "Session 15").
Garbage with cycles is still collected, a little later. Everything easing it at the same time (batches, wide runs,
on any thread's loop) shares one setting, put back when the last of them ends, unless someone changed it
meanwhile; a collector switched off by its threshold (0) is left alone.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["GEN0", "ease", "restore"]

GEN0 = 5_000
_saved: list[tuple[int, int, int]] = []  # the threshold before the first user eased it
_users = [0]
_lock = threading.Lock()  # batches and runs may run on several threads' loops at once


def ease() -> None:
    """Raise the young generation's threshold until the matching ``restore``."""
    with _lock:
        _users[0] += 1
        if _users[0] == 1:
            current = gc.get_threshold()
            _saved[:] = [current]
            if 0 < current[0] < GEN0:  # (0: the collector is off by threshold; left alone)
                gc.set_threshold(GEN0, current[1], current[2])


def restore() -> None:
    """Undo one ``ease``; the last one puts the threshold back."""
    with _lock:
        _users[0] -= 1
        if _users[0] == 0 and _saved:
            saved = _saved.pop()
            now = gc.get_threshold()
            if now[0] == GEN0 and now[1:] == saved[1:]:  # not changed by anyone else meanwhile
                gc.set_threshold(*saved)
