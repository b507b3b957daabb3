"""Which process owns a running run, and whether that process is still alive.

A run that a store shows RUNNING may be running right now (in another kernel) or may have lost its
process (SIGKILL, a crashed kernel, a power cut). The store records the owner as
``host:pid:start`` (``start``: the process start time, so a reused pid is not mistaken for it) and
calls a run *interrupted* when its owner is on this host and is gone. A run owned by another host
cannot be checked from here: it counts as alive.
"""

from __future__ import annotations

import os
import socket
from functools import cache

__all__ = ["owner_alive", "owner_token"]


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


def owner_alive(token: str | None) -> bool:
    """False when the process ``token`` names is known to be gone (this host only)."""
    if not token:
        return False  # written before owners were recorded: nothing can be running it
    host, _, rest = token.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname():
        return True
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
