"""The loop of a process worker (``executor="process"``): read a call, run it, write the result.

Started by ``executors.ProcessPool``, loaded by its path (not importing the nbflow package). Frames on stdin/stdout
are an 8-byte length then a cloudpickle payload; the function's own prints go to stderr (stdout
carries the frames). This module imports nothing of nbflow's but the stdlib, cloudpickle and
(when installed) threadpoolctl, so a worker starts in a fraction of a second.
"""

from __future__ import annotations

import os
import struct
import sys
import traceback
from typing import Any, BinaryIO

_HEADER = struct.Struct("!Q")


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame, or None at the end of the stream (the other side is gone)."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _limited(threads: int | None) -> Any:
    if not threads:
        return None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=threads)


# Read by BLAS/OpenMP libraries when they load: a library first imported *inside* a call starts with the
# call's budget (threadpoolctl only reaches libraries already loaded). Set for the call only, and only
# when the user has not set them; later calls adjust the loaded libraries through threadpoolctl.
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def _env_budget(threads: int | None) -> list[str]:
    if not threads:
        return []
    added = [v for v in _THREAD_VARS if v not in os.environ]
    for v in added:
        os.environ[v] = str(threads)
    return added


def _result(func: Any, kwargs: dict[str, Any], threads: int | None) -> tuple[Any, ...]:
    limiter = _limited(threads)
    added = _env_budget(threads)
    try:
        return ("ok", func(**kwargs))
    except BaseException as exc:
        return ("error", exc, "".join(traceback.format_exception(exc)))
    finally:
        for v in added:
            os.environ.pop(v, None)
        if limiter is not None:
            limiter.restore_original_limits()


def main() -> None:
    import signal

    import cloudpickle

    # A kernel interrupt signals the whole process group: the parent decides what stops (it kills a
    # busy worker), so a worker ignores Ctrl-C rather than dying with a traceback while idle.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    channel = os.fdopen(os.dup(1), "wb")  # frames out; the function's prints go to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inbox = sys.stdin.buffer
    while True:
        frame = read_frame(inbox)
        if frame is None:
            return
        try:
            func, kwargs, threads = cloudpickle.loads(frame)
        except BaseException as exc:
            reply: tuple[Any, ...] = ("error", exc, "".join(traceback.format_exception(exc)))
        else:
            reply = _result(func, kwargs, threads)
        try:
            payload = cloudpickle.dumps(reply)
        except Exception as exc:  # the output or the exception cannot be pickled: say what
            if reply[0] == "ok":
                text = (
                    f"the node's output ({type(reply[1]).__name__}) cannot be sent back from the worker process: {exc}"
                )
                payload = cloudpickle.dumps(("unpicklable", text, ""))
            else:
                payload = cloudpickle.dumps(("unpicklable", f"{type(reply[1]).__name__}: {reply[1]}", reply[2]))
        write_frame(channel, payload)


if __name__ == "__main__":
    main()
