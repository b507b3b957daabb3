"""Real front ends for the browser tests: JupyterLab or Notebook 7 on 127.0.0.1, driven by headless Chromium.

``jupyter_server(tmp_path, app)`` starts the server (random free port, random token, settings and runtime
folders of its own) and always shuts it and its kernels down; ``open_notebook(page, server, name)`` opens
a notebook and waits until its kernel is idle; ``run_all(page)`` runs every cell without waiting for them.
The fixtures ``lab`` and ``notebook7`` (tests/kernel/conftest.py) wrap ``jupyter_server``.

Needs ``/usr/bin/chromium`` (or $NBFLOW_CHROMIUM) and the ``browser`` group (jupyterlab, notebook,
playwright; never ``playwright install``). Without Chromium the tests are skipped, except when
NEED_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("NBFLOW_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# the notebook's kernel is connected and idle (JupyterLab and Notebook 7 both expose `window.jupyterapp`)
KERNEL_IDLE = """() => { const a = window.jupyterapp; if (!a) return false;
    const w = a.shell.currentWidget; const k = w && w.sessionContext && w.sessionContext.session
      && w.sessionContext.session.kernel; return k && k.status === 'idle'; }"""


@dataclass(frozen=True)
class Server:
    """A running JupyterLab or Notebook 7: its base URL, token, served folder and kind ("lab" or "notebook")."""

    base: str
    token: str
    work: Path
    app: str

    def __iter__(self) -> Iterator[Any]:  # `base, token, work = lab` keeps working
        return iter((self.base, self.token, self.work))

    def url(self, name: str) -> str:
        """The page of notebook ``name`` (``?reset``: JupyterLab ignores its saved workspace)."""
        if self.app == "lab":
            return f"{self.base}/lab/tree/{name}?reset&token={self.token}"
        return f"{self.base}/notebooks/{name}?token={self.token}"


def missing_prerequisite(*modules: str) -> str | None:
    if not Path(CHROMIUM).exists():
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium, or NEED_BROWSER=1 ./scripts/bootstrap.sh)"
    for module in ("playwright", *modules):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed (make setup installs the browser group)"
    return None


def require(*modules: str) -> None:
    """Skip (or, with NEED_BROWSER=1, fail) when Chromium or a module is missing."""
    missing = missing_prerequisite(*modules)
    if missing:
        if os.environ.get("NEED_BROWSER") == "1":
            pytest.fail(f"NEED_BROWSER=1 but {missing}")
        pytest.skip(missing)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        return bytes(r.read())


def server_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the server and its kernels: this worktree's nbflow, private settings folders."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["JUPYTERLAB_SETTINGS_DIR"] = str(tmp_path / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(tmp_path / "workspaces")
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "data")  # the notebook signatures (`jupyter trust`) too
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@contextmanager
def jupyter_server(tmp_path: Path, app: str = "lab") -> Iterator[Server]:
    """JupyterLab (``app="lab"``) or Notebook 7 (``"notebook"``) serving ``tmp_path/work``."""
    require("jupyterlab" if app == "lab" else "notebook")
    port, token = free_port(), secrets.token_hex(16)
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"checkForUpdates": False, "fetchNews": "false"})
    )
    # Render every cell (JupyterLab 4 only renders the cells in view by default): outputs below the fold
    # must exist in the page for the checks.
    notebook_settings = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    notebook_settings.mkdir(parents=True)
    (notebook_settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    work = tmp_path / "work"
    work.mkdir()
    env = server_env(tmp_path)
    if app == "lab":
        command = [
            "jupyterlab",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
    else:
        command = ["notebook", "--JupyterNotebookApp.expose_app_in_browser=True"]
    log_path = tmp_path / f"{app}.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            command[0],
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            "--allow-root",
            f"--ServerApp.root_dir={work}",
            *command[1:],
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{app} did not start: {log_path.read_text()[-2000:]}") from None
                time.sleep(0.3)
        yield Server(base, token, work, app)
    finally:
        try:  # shut the notebook kernels down, then the server
            for sess in json.loads(get(f"{base}/api/sessions?token={token}")):
                req = urllib.request.Request(f"{base}/api/sessions/{sess['id']}?token={token}", method="DELETE")
                urllib.request.urlopen(req, timeout=5).close()
        except OSError:
            pass
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def open_notebook(page: Any, server: Server, name: str, *, kernel: bool = True) -> None:
    """Open notebook ``name``; with ``kernel`` wait until its kernel is connected and idle."""
    page.goto(server.url(name))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    if kernel:
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)


def run_all(page: Any) -> None:
    """Run every cell of the open notebook (not awaited: the command resolves once every cell has run)."""
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def write_notebook(path: Path, cells: list[str]) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def shot_folders() -> list[Path]:
    """tests/artifacts/, and docs/img/ with NBFLOW_UPDATE_DOCS=1 (the docs' pictures)."""
    folders = [ROOT / "tests" / "artifacts"]
    if os.environ.get("NBFLOW_UPDATE_DOCS") == "1":
        folders.append(ROOT / "docs" / "img")
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    return folders


def axe_serious(page: Any, within: str | None = None) -> list[str]:
    """axe-core's serious and critical violations on the page, or inside the elements matching ``within`` (a
    view in JupyterLab: the rest of the page is JupyterLab's), as "rule: where"."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page, context=within).response["violations"]
    return [
        f"{v['id']}: {[n['target'] for n in v['nodes']][:3]}" for v in found if v["impact"] in ("serious", "critical")
    ]
