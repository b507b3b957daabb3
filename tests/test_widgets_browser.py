"""The run view in a real browser: JupyterLab + headless Chromium (Playwright), end to end.

Starts JupyterLab on 127.0.0.1 (random free port, random token) in a temporary folder, opens a
notebook that runs a flow with a failing node, runs all cells, and checks in the page that the graph
is drawn with the right colours, that clicking a node in the graph selects it, and that the
inspector shows an output and a traceback. Saves a screenshot to docs/img/run_widget.png and
tests/artifacts/. Run it alone with ``pytest -m browser``.

Needs ``/usr/bin/chromium`` (or $NBFLOW_CHROMIUM) and the ``browser`` dependency group (jupyterlab,
playwright; never ``playwright install``). Without Chromium the test is skipped, except when
NEED_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
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
FAILED_FILL = "rgb(255, 201, 201)"  # STATE_COLORS[FAILED] #ffc9c9
SUCCEEDED_FILL = "rgb(211, 249, 216)"  # #d3f9d8

NOTEBOOK_CELLS = [
    "import asyncio\nimport time\n\nimport pandas as pd\nimport nbflow as nf\n\nflow = nf.Flow('shop')",
    '''@flow.node
def orders(n: int) -> pd.DataFrame:
    """Load the orders."""
    return pd.DataFrame({"item": [f"item{i}" for i in range(n)], "price": [1.5 * i for i in range(n)]})


@flow.node
def revenue(orders: pd.DataFrame) -> float:
    time.sleep(2)  # long enough to see it running, live, in the browser
    return float(orders["price"].sum())


@flow.node
def report(revenue: float, orders: pd.DataFrame) -> str:
    raise ValueError(f"report template missing for revenue {revenue}")


@flow.node
def email(report: str) -> str:
    return report''',
    "run = flow.run(n=5)",
    """bg = nf.Flow("background")


@bg.node
async def wait_long() -> int:
    await asyncio.sleep(120)
    return 1


@bg.node
def after(wait_long: int) -> int:
    return wait_long


handle = bg.start()""",
    """hitl = nf.Flow("publishing")


@hitl.node
async def review() -> str:
    return await nf.ask("Publish this draft?", options=["approve", "reject"])


@hitl.node
def publish(review: str) -> str:
    return f"published ({review})"


paused = await hitl.arun()""",
]


def _cls(state: str) -> re.Pattern[str]:
    """Matches an SVG node's class attribute containing ``nbflow-<state>``."""
    return re.compile(rf"(^|\s)nbflow-{state}(\s|$)")


def _missing_prerequisite() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium, or NEED_BROWSER=1 ./scripts/bootstrap.sh test)"
    for module in ("playwright", "jupyterlab"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed (make setup, or: uv pip install --group browser)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        return bytes(r.read())


@pytest.fixture
def lab(tmp_path: Path):
    """A JupyterLab server on 127.0.0.1 serving tmp_path; yields (base url, token); always shut down."""
    missing = _missing_prerequisite()
    if missing:
        if os.environ.get("NEED_BROWSER") == "1":
            pytest.fail(f"NEED_BROWSER=1 but {missing}")
        pytest.skip(missing)
    port, token = _free_port(), secrets.token_hex(16)
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
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["JUPYTERLAB_SETTINGS_DIR"] = str(tmp_path / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(tmp_path / "workspaces")
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    log = (tmp_path / "jlab.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            "--allow-root",
            f"--ServerApp.root_dir={work}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"JupyterLab did not start: {(tmp_path / 'jlab.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.3)
        yield base, token, work
    finally:
        try:  # shut the notebook kernels down, then the server
            for sess in json.loads(_get(f"{base}/api/sessions?token={token}")):
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


@pytest.mark.browser
def test_run_view_in_jupyterlab(lab: tuple[str, str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, token, work = lab
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK_CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / "inspect.ipynb")
    # Screenshots go to tests/artifacts/; with NBFLOW_UPDATE_DOCS=1 also to docs/img/ (the docs' pictures).
    folders = [ROOT / "tests" / "artifacts"]
    if os.environ.get("NBFLOW_UPDATE_DOCS") == "1":
        folders.append(ROOT / "docs" / "img")
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    shots = [folder / "run_widget.png" for folder in folders]
    question_shots = [folder / "question_widget.png" for folder in folders]

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1000})
            page.goto(f"{base}/lab/tree/inspect.ipynb?reset&token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_function(
                """() => { const a = window.jupyterapp; if (!a) return false;
                const w = a.shell.currentWidget; const k = w && w.sessionContext && w.sessionContext.session
                  && w.sessionContext.session.kernel; return k && k.status === 'idle'; }""",
                timeout=60_000,
            )
            # not awaited: the command's promise resolves only once every cell has run
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            view = page.locator(".nbflow-runview").first
            # Widget parts update through separate messages: every check waits (expect) for its part.
            wait = {"timeout": 30_000}
            # live: flow.run executes in a worker thread, and its redraws reach the browser while it runs
            expect(view.locator("svg g#node-revenue")).to_have_class(_cls("running"), timeout=60_000)
            expect(view.locator("svg g#node-orders")).to_have_class(_cls("succeeded"), **wait)
            # the final state: the header says FAILED, the failed node is red, the others green
            expect(view.locator(".nbflow-badge-failed")).to_be_visible(timeout=60_000)
            expect(view.locator("svg g#node-report path").first).to_have_css("fill", FAILED_FILL, **wait)
            for node in ("orders", "revenue"):
                expect(view.locator(f"svg g#node-{node} path").first).to_have_css("fill", SUCCEEDED_FILL, **wait)
            expect(view.locator("svg g#node-email")).to_have_class(_cls("skipped"), **wait)
            expect(view.locator(".nbflow-err").first).to_contain_text("report template missing", **wait)

            # the failed node is pre-selected: its traceback is shown
            expect(view).to_contain_text("Traceback (most recent call last)", **wait)
            expect(view).to_contain_text("ValueError: report template missing for revenue 15.0", **wait)
            expect(view).to_contain_text("in report", **wait)

            # clicking a node in the SVG selects it: its output (a DataFrame) is shown as a table
            view.locator("svg g#node-orders").click()
            expect(view.locator("table.dataframe")).to_contain_text("item4", **wait)
            expect(view.locator("svg g#node-orders")).to_have_class(_cls("selected"), **wait)

            # back to the failure through the selector, for the screenshot
            view.locator("select").select_option(label="✗ report — failed")
            expect(view.locator("svg g#node-report")).to_have_class(_cls("selected"), **wait)
            expect(view).to_contain_text("Traceback", **wait)
            time.sleep(0.3)
            view.scroll_into_view_if_needed()
            for shot in shots:
                view.screenshot(path=str(shot))

            # a background run (flow.start) has a Cancel button that works while the notebook is idle
            bg_view = page.locator(".nbflow-runview").nth(1)
            expect(bg_view.locator("svg g#node-wait_long")).to_have_class(_cls("running"), **wait)
            bg_view.locator("button", has_text="Cancel").click()
            expect(bg_view.locator(".nbflow-badge-cancelled")).to_be_visible(**wait)
            expect(bg_view.locator("svg g#node-wait_long")).to_have_class(_cls("cancelled"), **wait)
            expect(bg_view.locator("button", has_text="Cancel")).to_be_hidden(**wait)

            # a paused run shows its question; the answer buttons resume it
            hitl_view = page.locator(".nbflow-runview").nth(2)
            expect(hitl_view.locator(".nbflow-badge-paused")).to_be_visible(**wait)
            expect(hitl_view).to_contain_text("Publish this draft?", **wait)
            time.sleep(0.3)
            hitl_view.scroll_into_view_if_needed()
            for shot in question_shots:
                hitl_view.screenshot(path=str(shot))
            hitl_view.locator("button", has_text="approve").click()
            expect(hitl_view.locator(".nbflow-badge-succeeded")).to_be_visible(**wait)
            expect(hitl_view.locator("svg g#node-publish")).to_have_class(_cls("succeeded"), **wait)
        finally:
            browser.close()
    assert shots[0].stat().st_size > 10_000 and question_shots[0].stat().st_size > 5_000
