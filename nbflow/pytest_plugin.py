"""nbflow's pytest plugin (loaded by pytest through the ``pytest11`` entry point): the fixtures below.

* ``chat_server``: a started ``nbflow.testing.ChatServer`` (an OpenAI-compatible server on 127.0.0.1),
  stopped after the test. Configure it per test with the marker
  ``@pytest.mark.chat_server(answers={...}, latency=0.01, rate_limit_every=3, ...)`` (its keywords are
  ``ChatServer``'s).
* ``fake_clock``: a fresh ``nbflow.testing.FakeClock`` (give it to ``run_flow(..., clock=fake_clock)``).

Importing it costs what ``import nbflow.testing`` costs (the standard library's HTTP server): nothing is
started until a test asks for a fixture. See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nbflow.testing import ChatServer, FakeClock

__all__ = ["chat_server", "fake_clock"]


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "chat_server(**options): options of the chat_server fixture's nbflow.testing.ChatServer"
    )
    _leave_nbflow_unrewritten(config)


def _leave_nbflow_unrewritten(config: Any) -> None:
    """Take nbflow's package off the list of modules pytest rewrites the asserts of.

    pytest marks every module of a plugin's distribution for rewriting, so with this plugin installed each nbflow
    module imported during a test (the engine at the first run, the store, the tracer...) was parsed again by
    pytest's rewriter, in whatever thread imported it: a background thread of nbflow's (its loop, the process
    workers' warm-up) parsing beside the test's own thread can fail on CPython 3.11 with "SystemError: AST
    constructor recursion depth mismatch" (python/cpython#106905), and it failed one of our tests that way. nbflow's
    own code has no assert a test needs rewritten (``nbflow.testing`` writes its own messages), and the modules
    imported before this point (this plugin's and ``nbflow.testing``'s) stay as pytest made them. pytest has no
    public call for this: where its hook looks otherwise, nothing is changed."""
    hook = getattr(config.pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if isinstance(marked, set):
        marked.discard("nbflow")


@pytest.fixture
def chat_server(request: pytest.FixtureRequest) -> Iterator[ChatServer]:
    """A started ``ChatServer`` for this test (``@pytest.mark.chat_server(...)`` passes its options)."""
    marker = request.node.get_closest_marker("chat_server")
    options = dict(marker.kwargs) if marker is not None else {}
    with ChatServer(**options) as server:
        yield server


@pytest.fixture
def fake_clock() -> FakeClock:
    """A fresh ``FakeClock``: virtual time that sleeps advance at once (and record)."""
    return FakeClock()
