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


def format_user_traceback(exc: BaseException) -> str:
    """The traceback text with nbflow's, anyio's and asyncio's frames removed from the top."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_HIDDEN_DIRS):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))
