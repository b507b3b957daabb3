"""The batch results explorer in a real browser: JupyterLab + headless Chromium (Playwright).

Filter to failed rows, click one and see its traceback in the run view beside the table; compare a case
across variants; answer a paused row; and click three times while the cell is still awaiting (every click
is a custom message, which ipywidgets' update throttle never holds back). Screenshot:
docs/img/explorer.png (with NBFLOW_UPDATE_DOCS=1) and tests/artifacts/.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.helpers.browser import ARGS, CHROMIUM, Server, open_notebook, run_all, shot_folders, write_notebook

CELLS = [
    """import asyncio
import nbflow as nf

flow = nf.Flow("support_eval")


@flow.node
def answer(question: str, prompt: str) -> str:
    if question.endswith("3"):
        raise RuntimeError(f"judge crashed on {question}")
    return f"{prompt}: {question}"


@flow.node
def score(answer: str) -> nf.Score:  # a value and an explanation (the explorer shows it on hover)
    return nf.Score(len(answer) % 7 / 7, f"{len(answer)} characters")


nf.config.keep_memory = 3_000  # room for a few succeeded rows' runs: the others are marked
df = flow.batch([{"question": f"q{i}"} for i in range(20)], grid={"prompt": ["terse", "steps"]}, progress=False)
nf.explore(df)""",
    """approval = nf.Flow("approval_rows")


@approval.node
async def review(topic: str) -> str:
    return await nf.ask(f"Publish {topic}?", options=["yes", "no"])


pdf = approval.batch([{"topic": "tea"}, {"topic": "cake"}], progress=False)
nf.explore(pdf)""",
    """live = nf.explore(df)
display(live)
await asyncio.sleep(25)  # the cell is still running: clicks must be handled all the same
print("handled during the await:", live.handled)""",
]


@pytest.mark.browser
def test_explorer_in_jupyterlab(lab: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    write_notebook(lab.work / "explore.ipynb", CELLS)
    folders = shot_folders()
    wait = {"timeout": 30_000}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            open_notebook(page, lab, "explore.ipynb")
            run_all(page)
            explorer = page.locator(".nbflow-explorer").first
            expect(explorer.locator("tr.nbx-row").first).to_be_visible(timeout=90_000)
            expect(explorer.locator(".nbx-range")).to_have_text("1–40 of 40", **wait)
            # a scorer's explanation: the column after its score, and the score cell's tooltip
            expect(explorer.locator("th", has_text="score.explanation")).to_be_visible(**wait)
            first_score = explorer.locator("tr.nbx-row").first.locator("td.nbx-col-score")
            expect(first_score).to_have_attribute("title", "9 characters", **wait)

            # succeeded rows past the memory budget were not kept: marked before any click, saying why
            kept_not = explorer.locator("tr.nbx-noopen").first
            expect(kept_not).to_have_attribute("title", re.compile("keep_memory.*store="), **wait)
            expect(kept_not.locator(".nbx-lock")).to_have_count(1)

            # filter to failed rows, open one from the keyboard: its run view, with the traceback, opens
            explorer.locator("select.nbx-status").select_option("failed")
            expect(explorer.locator(".nbx-range")).to_have_text("1–4 of 4", **wait)
            explorer.locator("tr.nbx-row").first.focus()
            page.keyboard.press("Enter")
            cell = page.locator(".jp-Cell").first
            detail = cell.locator(".nbflow-runview").first
            expect(detail).to_contain_text("judge crashed on q3", timeout=60_000)
            expect(detail).to_contain_text("RuntimeError", **wait)
            expect(explorer.locator("tr.nbx-selected")).to_have_count(1, **wait)
            time.sleep(0.3)
            for folder in folders:
                cell.locator(".jp-OutputArea").first.screenshot(path=str(folder / "explorer.png"))

            # compare: each case once, every variant's outputs side by side
            explorer.locator("select.nbx-status").select_option("")
            explorer.locator("button.nbx-mode").click()
            expect(explorer.locator("th", has_text="terse: status")).to_be_visible(**wait)
            expect(explorer.get_by_role("columnheader", name="steps: score", exact=True)).to_be_visible(**wait)
            expect(explorer.locator("th", has_text="steps: score.explanation")).to_be_visible(**wait)
            expect(explorer.locator(".nbx-range")).to_have_text("1–20 of 20", **wait)
            # the change column (the point of comparing) is in view, inside the table's box, not cut off
            change = explorer.locator("th", has_text=": change").first
            expect(change).to_be_visible(**wait)
            box, edge = change.bounding_box(), explorer.locator(".nbx-scroll").first.bounding_box()
            assert box is not None and edge is not None
            assert box["x"] + box["width"] <= edge["x"] + edge["width"] + 1, (box, edge)
            for folder in folders:
                explorer.screenshot(path=str(folder / "explorer_compare.png"))
            expect(explorer.locator(".nbx-note")).to_contain_text("score: ", **wait)  # nf.compare's verdict

            # a paused row is answered inline
            paused = page.locator(".nbflow-explorer").nth(1)
            expect(paused.locator("button.nbx-answer-btn")).to_have_count(4, **wait)
            paused.locator("tr.nbx-row").nth(1).locator("button.nbx-answer-btn", has_text="no").click()
            expect(paused.locator("tr.nbx-row").nth(1).locator(".nbx-col-status")).to_have_text("✓ succeeded", **wait)
            expect(paused.locator("tr.nbx-row").nth(0).locator(".nbx-col-status")).to_have_text("‖ paused", **wait)

            # three clicks while the third cell still awaits: every one handled
            live = page.locator(".nbflow-explorer").nth(2)
            expect(live.locator("tr.nbx-row").first).to_be_visible(**wait)
            for i in (2, 5, 3):
                live.locator("tr.nbx-row").nth(i).click()
                expect(live.locator("tr.nbx-selected")).to_have_attribute("data-pos", str(i), **wait)
            expect(page.locator(".jp-Cell").nth(2)).to_contain_text("handled during the await: 3", timeout=60_000)
        finally:
            browser.close()
