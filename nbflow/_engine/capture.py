"""What a node printed, logged and warned, kept per attempt (``Attempt.output``), its secrets redacted.

The node a task (or a worker thread it started) runs is ``CURRENT_NODE`` (a context variable the
scheduler sets once per worker task, copied into the threads sync nodes run in), so concurrent nodes
never mix their output: what a thread writes goes to the attempt of the node that thread runs.

Three hooks, installed at the first run and left in place (each costs nothing while no node writes):

* ``sys.stdout`` / ``sys.stderr`` become tees: the text still goes where it went (the cell, the
  terminal), and a copy goes to the running node's attempt;
* ``logging.Logger.callHandlers``: a record logged inside a node (at a level its logger lets through:
  the logging configuration decides, as everywhere) is added once as ``LEVEL logger: message``, whatever
  its handlers do with it. Records of nbflow's own loggers are left out;
* ``warnings.showwarning``: a warning shown inside a node is added as ``Category: message``.

Output of a process node (``executor="process"``) is its worker process's, not captured. An
attempt keeps at most ``LIMIT`` characters (the rest is counted, not kept).
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
import weakref
from typing import Any

from nbflow._core.secrets import Redactor
from nbflow._core.usage import CURRENT_NODE

__all__ = ["LIMIT", "install"]

LIMIT = 64_000
_MORE = "\n[... output cut at {} characters]\n"
_redactors: weakref.WeakKeyDictionary[Any, Redactor] = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # appends from several threads of one node keep whole chunks
_installed = False


def _attempt() -> Any:
    """The attempt of the node this task or thread runs, or None (outside a node)."""
    where = CURRENT_NODE.get()
    if where is None:
        return None
    rec = where.node
    if rec is None:
        return None
    attempts = rec.attempts
    return attempts[-1] if attempts else None


def _add(text: str) -> None:
    where = CURRENT_NODE.get()
    attempt = _attempt()
    if attempt is None or not text:
        return
    root = where.run._root if where.run is not None else None
    redact = _redactors.get(root) if root is not None else None
    if redact is None and root is not None:
        redact = _redactors[root] = Redactor.for_inputs(root.inputs)
    if redact:
        text = redact(text)
    with _lock:
        have = attempt.output or ""
        if len(have) >= LIMIT:
            return
        if len(have) + len(text) > LIMIT:
            text = text[: LIMIT - len(have)] + _MORE.format(LIMIT)
        attempt.output = have + text


class _Tee:
    """A text stream that also copies what a node writes into its attempt."""

    def __init__(self, stream: Any) -> None:
        self._nbflow_stream = stream

    def write(self, text: str) -> int:
        if CURRENT_NODE.get() is not None and isinstance(text, str):
            _add(text)
        return self._nbflow_stream.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding, isatty, buffer, ...
        return getattr(self._nbflow_stream, name)


def install() -> None:
    """Make sure the hooks are in place (cheap when they are: pytest and IPython replace the streams)."""
    global _installed
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and type(stream) is not _Tee:
            setattr(sys, name, _Tee(stream))
    if not getattr(warnings.showwarning, "_nbflow", False):  # (warnings.catch_warnings puts back its own)
        _hook_warnings()
    if _installed:
        return
    _installed = True
    handlers = logging.Logger.callHandlers

    def call_handlers(self: logging.Logger, record: logging.LogRecord) -> None:
        if CURRENT_NODE.get() is None:
            return handlers(self, record)
        if not record.name.startswith("nbflow"):
            try:
                _add(f"{record.levelname} {record.name}: {record.getMessage()}\n")
            except Exception:  # a bad format string: logging itself reports it
                pass
        token = CURRENT_NODE.set(None)  # a handler writing to the tee'd stderr: the record is in once
        try:
            return handlers(self, record)
        finally:
            CURRENT_NODE.reset(token)

    logging.Logger.callHandlers = call_handlers  # type: ignore[method-assign]


def _hook_warnings() -> None:
    show = warnings.showwarning

    def showwarning(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        if CURRENT_NODE.get() is None:
            return show(message, category, filename, lineno, file, line)
        _add(f"{category.__name__}: {message}\n")
        token = CURRENT_NODE.set(None)
        try:
            show(message, category, filename, lineno, file, line)
        finally:
            CURRENT_NODE.reset(token)

    showwarning._nbflow = True  # type: ignore[attr-defined]
    warnings.showwarning = showwarning
