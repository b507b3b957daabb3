"""Waiting in a test for something another thread or a timer does."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_for(pred: Callable[[], bool], seconds: float = 30.0) -> None:
    """Return once ``pred()`` holds; fail the test after ``seconds``."""
    end = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > end:
            pytest.fail("condition not reached in time")
        time.sleep(0.02)
