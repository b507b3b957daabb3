"""Live per-variant bars of a batch in JupyterLab + headless Chromium: they move while rows run, then the explorer.

Screenshot: tests/artifacts/live_variants.png (and docs/img/ with NBFLOW_UPDATE_DOCS=1).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

from tests.helpers.browser import ARGS, CHROMIUM, ROOT

CELL = """import asyncio
import nbflow as nf

flow = nf.Flow("live_eval")


@flow.node
async def answer(q: int, prompt: str) -> str:
    await asyncio.sleep(0.5)
    if q % 10 == 3 and prompt == "steps":
        raise RuntimeError(f"judge crashed on q{q}")
    return f"{prompt}: q{q}"


df = await flow.abatch([{"q": i} for i in range(30)], grid={"prompt": ["terse", "steps"]}, concurrency=4)"""


@pytest.mark.browser
def test_live_variant_bars_in_jupyterlab(lab: tuple[str, str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, token, work = lab
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / "live.ipynb")
    folders = [ROOT / "tests" / "artifacts"]
    if os.environ.get("NBFLOW_UPDATE_DOCS") == "1":
        folders.append(ROOT / "docs" / "img")
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/lab/tree/live.ipynb?reset&token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_function(
                """() => { const a = window.jupyterapp; if (!a) return false;
                const w = a.shell.currentWidget; const k = w && w.sessionContext && w.sessionContext.session
                  && w.sessionContext.session.kernel; return k && k.status === 'idle'; }""",
                timeout=60_000,
            )
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            bars = page.locator(".nbflow-variants").first
            expect(bars).to_be_visible(timeout=90_000)
            seen: list[str] = []  # the bars' text as the browser shows it, sampled while the batch runs
            slices: list[float] = []  # width of a failed segment / width of its variant's bar
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                if page.locator(".nbflow-explorer").count():
                    break
                try:
                    text = bars.inner_text(timeout=2_000)
                    ratios = page.eval_on_selector_all(
                        ".nbflow-variants .nbflow-seg-failed",
                        "els => els.map(e => e.getBoundingClientRect().width / e.parentElement.getBoundingClientRect().width)",
                    )
                except Exception:  # the bars were just replaced by the explorer
                    break
                if not seen or seen[-1] != text:
                    seen.append(text)
                slices += ratios
                time.sleep(0.1)
            running = [t for t in seen if "running" in t]
            assert len(running) >= 3, seen  # the bars moved in the browser while rows ran
            assert "terse" in running[0] and "steps" in running[0]
            explorer = page.locator(".nbflow-explorer").first
            expect(explorer.locator(".nbx-range")).to_have_text("1–50 of 60", timeout=60_000)
            # the explorer's own per-variant bars took the place of the live ones, with the final counts
            expect(page.locator(".nbflow-variants")).to_have_count(0, timeout=30_000)
            expect(explorer.locator(".nbx-bar-row").nth(0)).to_contain_text("30 succeeded", timeout=30_000)
            expect(explorer.locator(".nbx-bar-row").nth(1)).to_contain_text(
                "✓ 27 succeeded, ✗ 3 failed", timeout=30_000
            )
            # a few failed rows were a thin slice of their variant's bar while it ran, never a red bar
            assert slices and max(slices) < 0.15, slices
            # the whole batch's live bar ends in proportion too: 57 of 60 succeeded, a patterned slice of 3 failed
            expect(page.locator(".widget-hbox .nbflow-overall")).to_have_attribute(
                "aria-label", "✓ 57 succeeded, ✗ 3 failed"
            )
            shares = page.eval_on_selector_all(
                ".widget-hbox .nbflow-overall .nbflow-seg",
                """els => Object.fromEntries(els.map(e => [e.className.split('nbflow-seg-')[1],
                    [e.getBoundingClientRect().width / e.parentElement.getBoundingClientRect().width,
                     getComputedStyle(e).backgroundImage]]))""",
            )
            assert set(shares) == {"succeeded", "failed"}, shares
            assert abs(shares["failed"][0] - 3 / 60) < 0.01 and abs(shares["succeeded"][0] - 57 / 60) < 0.01, shares
            assert "repeating-linear-gradient" in shares["failed"][1], shares
            # (the screenshot below, live_variants.png, shows it above the explorer)
            time.sleep(0.3)
            for folder in folders:
                page.locator(".jp-Cell").first.locator(".jp-OutputArea").first.screenshot(
                    path=str(folder / "live_variants.png")
                )
        finally:
            browser.close()
