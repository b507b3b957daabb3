"""The secret sweep in a real browser: JupyterLab + headless Chromium, every websocket frame the page receives.

The scenario of test_secret_sweep_kernel.py (secrets under upper/lower/camel/kebab names and an ``nf.Secret``
under a plain name, leaking through an error message, a chained traceback, a derived output, a validation
error, a sub-flow and a paused question), run from a notebook in JupyterLab: the live run view, the run's
display and the batch explorer. In the page, every node of every run view is chosen in its selector and
every explorer row clicked open. Every frame the browser received on its websockets, the page's text and
every file in the server's folder (the saved notebook, the stores) hold zero occurrences of the secrets.
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

from tests.kernel.test_secret_sweep_kernel import ENV, SCENARIO, TEXTS
from tests.kernel.test_widgets_browser import ARGS, CHROMIUM, lab  # noqa: F401  (lab is a fixture)

CELLS = [
    SCENARIO,
    'run = flow.run(inputs(), store="runs.db", show=True)\nprint(run.status.name)',
    "run",
    'df = flow.batch([inputs() for _ in range(3)], store="batch.db", keep="all", progress=False)\nnf.explore(df)',
]


@pytest.fixture
def sweep_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The secrets in the server's environment (its kernels inherit it), never in the notebook's code."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)


@pytest.mark.browser
def test_no_websocket_frame_page_text_or_file_holds_a_secret(sweep_env: None, lab: tuple[str, str, Path]) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    base, token, work = lab
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / "sweep.ipynb")
    frames: list[bytes] = []
    wait = {"timeout": 60_000}

    def on_socket(ws):  # every frame the browser receives, text or binary (JupyterLab's kernel protocol)
        ws.on(
            "framereceived", lambda payload: frames.append(payload if isinstance(payload, bytes) else payload.encode())
        )

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.on("websocket", on_socket)
            page.goto(f"{base}/lab/tree/sweep.ipynb?reset&token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_function(
                """() => { const a = window.jupyterapp; if (!a) return false;
                const w = a.shell.currentWidget; const k = w && w.sessionContext && w.sessionContext.session
                  && w.sessionContext.session.kernel; return k && k.status === 'idle'; }""",
                timeout=60_000,
            )
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            explorer = page.locator(".nbflow-explorer").first
            expect(explorer.locator("tr.nbx-row")).to_have_count(3, timeout=120_000)
            views = page.locator(".nbflow-rv")
            expect(views).to_have_count(2, **wait)  # the live view and the run's display
            for v in range(2):
                _select_every_node(views.nth(v), expect)
            detail = page.locator(".jp-Cell").nth(3).locator(".nbflow-rv")
            for i in range(3):  # each row's run view opens beside the table
                explorer.locator("tr.nbx-row").nth(i).click()
                expect(explorer.locator("tr.nbx-selected")).to_have_attribute("data-pos", str(i), **wait)
                expect(detail).to_have_count(1, **wait)
                expect(detail.first).to_contain_text("leak", **wait)
                _select_every_node(detail.first, expect)
            page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:save'); }")
            time.sleep(3)  # the last frames and the save
            text = page.locator("body").inner_text()
        finally:
            browser.close()

    received = b"\n".join(frames)
    assert len(frames) > 50, len(frames)
    for shown in (
        b"invalid key",
        b"lookup failed for",
        b"Bearer",
        b"valid integer",
        b"sub-flow failed with",
        b"use the key",
    ):
        assert shown in received, f"{shown!r} never reached the browser: the sweep did not reach that path"
    for s in TEXTS:
        assert s.encode() not in received, f"{s!r} reached the browser"
        assert s not in text, f"{s!r} is in the page"
    files = [f for f in work.rglob("*") if f.is_file()]
    assert {"runs.db", "batch.db", "sweep.ipynb"} <= {f.name for f in files}
    for f in files:
        data = f.read_bytes()
        for s in TEXTS:
            assert s.encode() not in data, f"{s!r} written to {f}"


def _select_every_node(view, expect) -> None:
    """Choose each node in the run view's selector, as a user does; wait for its inspector to follow."""
    selector = view.locator("select.nbflow-rv-select")
    values = [v for v in selector.locator("option").evaluate_all("os => os.map(o => o.value)") if v]
    assert values, "the run view lists its nodes"
    for value in values:
        selector.select_option(value)
        expect(view.locator(".nbflow-rv-inspector")).not_to_be_empty(timeout=30_000)
