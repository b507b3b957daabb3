"""Fixtures of the browser tests: a real JupyterLab (``lab``) and a real Notebook 7 (``notebook7``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import Server, jupyter_server


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Server]:
    """JupyterLab on 127.0.0.1 serving ``tmp_path/work``; unpacks as (base url, token, work folder)."""
    with jupyter_server(tmp_path, "lab") as server:
        yield server


@pytest.fixture
def notebook7(tmp_path: Path) -> Iterator[Server]:
    """Notebook 7 (``jupyter notebook``) on 127.0.0.1 serving ``tmp_path/work``."""
    with jupyter_server(tmp_path, "notebook") as server:
        yield server
