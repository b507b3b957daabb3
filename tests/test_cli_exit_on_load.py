"""A flow source that ends the process while it loads (``sys.exit(5)``, ``sys.exit(0)``, ``os._exit(0)``) makes the
``nbflow`` command fail loudly: it exited with the source's code and no message, and exit 0 passed CI having run
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FLOW = """
import os
import sys
import nbflow as nf

flow = nf.Flow("exiting")


@flow.node
def a(x: int) -> int:
    print("RAN-A", file=sys.stderr)
    return x + 1

{exit}
"""


def nbflow(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbflow", *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("call", "shown"),
    [
        ("sys.exit(5)", "sys.exit(5)"),
        ("sys.exit(0)", "sys.exit(0)"),
        ("exit()", "sys.exit(None)"),
        ("os._exit(0)", "os._exit(0)"),
        ("from os import _exit\n_exit(0)", "os._exit(0)"),
        ("try:\n    os._exit(0)\nexcept Exception:\n    pass", "os._exit(0)"),
    ],
)
@pytest.mark.parametrize("kind", ["file", "module", "notebook"])
def test_a_source_that_exits_while_loading_fails_the_command(tmp_path: Path, call: str, shown: str, kind: str) -> None:
    source = FLOW.replace("{exit}", call)
    if kind == "notebook":
        cells = [{"cell_type": "code", "metadata": {}, "source": source.splitlines(True), "outputs": []}]
        (tmp_path / "exiting.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}))
        target = "exiting.ipynb:flow"
    else:
        (tmp_path / "exiting.py").write_text(source)
        target = "exiting.py:flow" if kind == "file" else "exiting:flow"
    out = nbflow(tmp_path, "run", target, "-i", "x=1")
    assert out.returncode not in (0, 5), (out.returncode, out.stderr)
    assert f"called {shown}" in out.stderr and "nothing was run" in out.stderr
    assert "RAN-A" not in out.stderr and "Traceback" not in out.stderr


def test_os_exit_bound_while_loading_still_works_in_a_node_later(tmp_path: Path) -> None:
    (tmp_path / "later.py").write_text(
        "from os import _exit\nimport nbflow as nf\n\nflow = nf.Flow('later')\n\n\n"
        "@flow.node\ndef a(x: int) -> int:\n    _exit(7)\n"
    )
    assert nbflow(tmp_path, "run", "later.py:flow", "-i", "x=1").returncode == 7  # the user's own exit, at run time
