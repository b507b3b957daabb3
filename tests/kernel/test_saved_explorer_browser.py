"""A saved notebook keeps the batch display and the explorer: each gets a static snapshot beside its widget, so
nbconvert's HTML and a notebook reopened without its kernel show the batch (not "model not found", not
``ExplorerView(children=...)``)."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from tests.helpers.browser import ARGS, CHROMIUM, Server, open_notebook, server_env, shot_folders, write_notebook

CELLS = [
    "import nbflow as nf\nfrom tests.view.conftest import QUESTIONS, qa_flow\nflow = qa_flow()",
    "df = flow.batch([{'question': q} for q in QUESTIONS], grid={'prompt': ['terse', 'steps', 'plain']})",
    "nf.explore(df)",
]


@pytest.mark.browser
def test_saved_batch_display_and_explorer_show_their_snapshot(lab: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    work = lab.work
    write_notebook(work / "saved.ipynb", CELLS)
    env = server_env(work.parent)
    for command in (
        ["nbconvert", "--to", "notebook", "--execute", "--inplace", "saved.ipynb"],
        ["nbconvert", "--to", "html", "saved.ipynb"],
    ):
        subprocess.run([sys.executable, "-m", "jupyter", *command], cwd=work, env=env, check=True, capture_output=True)
    nb = nbformat.read(work / "saved.ipynb", as_version=4)
    texts = ["".join(o.get("data", {}).get("text/html", "")) for c in nb.cells for o in c.outputs]
    assert sum("nbflow-explorer-snap" in t for t in texts) == 2  # the batch's display and nf.explore(df)
    plain = "".join("".join(o.get("data", {}).get("text/plain", "")) for c in nb.cells for o in c.outputs)
    assert "ExplorerView(" not in plain and "children=" not in plain
    html = (work / "saved.html").read_text()
    assert html.count("Static snapshot of the explorer") == 2
    assert "model refused" in html and "ExplorerView(" not in html
    start = html.index("nbflow-explorer-snap")
    snapshot = html[start : html.index("Static snapshot of the explorer", start)]
    assert snapshot.index("✗ failed") < snapshot.index("‖ paused") < snapshot.index("✓ succeeded")  # problems first

    nb.metadata.pop("widgets", None)  # saved without the widget state (JupyterLab's default)
    nbformat.write(nb, work / "saved.ipynb")
    subprocess.run([sys.executable, "-m", "jupyter", "trust", "saved.ipynb"], cwd=work, env=env, check=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            open_notebook(page, lab, "saved.ipynb", kernel=False)
            snaps = page.locator(".jp-Notebook .nbflow-explorer-snap")
            expect(snaps).to_have_count(2, timeout=60_000)
            for i in range(2):
                expect(snaps.nth(i)).to_be_visible()
                expect(snaps.nth(i)).to_contain_text("✗ failed")
                expect(snaps.nth(i)).to_contain_text("score_mean")
            page.wait_for_timeout(3000)  # the widget manager gives up on the saved views meanwhile
            assert "model not found" not in page.locator(".jp-Notebook").inner_text()
            for folder in shot_folders():
                page.locator(".jp-Cell").nth(1).screenshot(path=str(folder / "saved_batch_snapshot.png"))
        finally:
            browser.close()
