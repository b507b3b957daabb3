"""Tracebacks as users want them: their own frames, not the engine's."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import traceback

import anyio
import anyio.to_thread

# Frames from these folders are dropped from the top of a node's traceback: users see their code.
_HIDDEN_DIRS = (
    *(os.path.dirname(m.__file__ or "") + os.sep for m in (anyio, asyncio, concurrent.futures)),
    os.path.dirname(os.path.dirname(__file__)) + os.sep,
)


LOOP_HINT = (
    "nbflow hint: an object used by this node is bound to another event loop (SDK clients such as "
    "openai.AsyncOpenAI or httpx.AsyncClient keep connections bound to the loop they first ran on). "
    "Create it in a @flow.resource factory instead of at module level, and name a node parameter after "
    "the resource: nbflow builds one instance per event loop and closes it with that loop "
    "(docs/resources.md)."
)
_LOOP_ERRORS = (
    "event loop is closed",
    "bound to a different event loop",
    "attached to a different loop",
    "different event loop",
    "is bound to a different",
)


def add_loop_hint(exc: BaseException) -> None:
    """Add LOOP_HINT as a note to ``exc`` when it (or its cause) says a loop was closed or is another loop."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 10:
        text = str(e).lower()
        if isinstance(e, RuntimeError | ValueError) and any(m in text for m in _LOOP_ERRORS):
            if LOOP_HINT not in getattr(exc, "__notes__", ()):
                exc.add_note(LOOP_HINT)
            return
        e = e.__cause__ or e.__context__
        seen += 1


def format_user_traceback(exc: BaseException) -> str:
    """The traceback text with nbflow's, anyio's and asyncio's frames removed from the top."""
    add_loop_hint(exc)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_HIDDEN_DIRS):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))
