"""Which process owns a running run, and whether that process is still alive.

A run that a store shows RUNNING may be running right now (in another kernel) or may have lost its
process (SIGKILL, a crashed kernel, a power cut). The store records the owner as
``host:pid:start`` (``start``: the process start time, so a reused pid is not mistaken for it) and
calls a run *interrupted* when its owner is on this host and is gone. A process on another host
cannot be checked from here: its owner rewrites a heartbeat (a time) every ``HEARTBEAT`` seconds while it
holds the run or batch, and it counts as gone once its heartbeat is older than ``STALE`` seconds (a
re-created container, a renamed laptop, a shared folder). Without a heartbeat (a file written by an older
nbflow) it counts as alive: only an explicit force takes it over.
"""

from __future__ import annotations

import os
import socket
import time
from functools import cache

__all__ = ["HEARTBEAT", "STALE", "owner_alive", "owner_host", "owner_token"]

HEARTBEAT = 10.0  # seconds between two heartbeats of a live owner
STALE = 60.0  # a heartbeat older than this: the owner on another host is gone


def _stat(pid: int) -> list[bytes]:
    """The fields of /proc/<pid>/stat after the command name ([] where there is none)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return []
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat[stat.rfind(b")") + 2 :].split()


def _start_time(pid: int) -> str:
    """The process start time (Linux: clock ticks since boot), or "" where it cannot be read."""
    fields = _stat(pid)
    return fields[19].decode() if len(fields) > 19 else ""


@cache
def owner_token() -> str:
    """This process: ``host:pid:start``."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def _fork_reset() -> None:
    owner_token.cache_clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fork_reset)


def owner_host(token: str) -> str:
    """The host named by an owner ``token``."""
    return token.partition(":")[0]


def owner_alive(token: str | None, heartbeat: float | None = None) -> bool:
    """False when the process ``token`` names is known to be gone: on this host, by its pid and start time;
    on another host, by its ``heartbeat`` older than ``STALE`` seconds (None: unknown, so alive)."""
    if not token:
        return False  # written before owners were recorded: nothing can be running it
    host, _, rest = token.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname():
        return heartbeat is None or time.time() - heartbeat <= STALE
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    if pid == os.getpid():
        return start == _start_time(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    except OSError:
        return False
    fields = _stat(pid)
    if fields and fields[0] in (b"Z", b"X"):
        return False  # killed, not yet reaped by its parent
    now = fields[19].decode() if len(fields) > 19 else ""
    return not (start and now and start != now)
