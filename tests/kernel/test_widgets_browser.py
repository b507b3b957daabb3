"""The run view in a real browser: JupyterLab + headless Chromium (Playwright), end to end.

Starts JupyterLab on 127.0.0.1 (random free port, random token) in a temporary folder, opens a
notebook that runs a flow with a failing node, runs all cells, and checks in the page that the graph
is drawn with the right colours, that clicking a node in the graph selects it, and that the
inspector shows an output and a traceback. Saves a screenshot to docs/img/run_widget.png and
tests/artifacts/. Run it alone with ``pytest -m browser``.

Needs ``/usr/bin/chromium`` (or $NBFLOW_CHROMIUM) and the ``browser`` extra (jupyterlab,
playwright; never ``playwright install``). Without Chromium the test is skipped, except when
NEED_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.helpers.browser import (
    ARGS,
    CHROMIUM,
    ROOT,
    Server,
    open_notebook,
    run_all,
    server_env,
    shot_folders,
    write_notebook,
)

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


@pytest.mark.browser
def test_run_view_in_jupyterlab(lab: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    write_notebook(lab.work / "inspect.ipynb", NOTEBOOK_CELLS)
    # Screenshots go to tests/artifacts/; with NBFLOW_UPDATE_DOCS=1 also to docs/img/ (the docs' pictures).
    folders = shot_folders()
    shots = [folder / "run_widget.png" for folder in folders]
    question_shots = [folder / "question_widget.png" for folder in folders]

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1000})
            open_notebook(page, lab, "inspect.ipynb")
            run_all(page)
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


# --- every click is handled: during `await flow.arun`, during `flow.start`, after a blocking `flow.run` ---
CLICK_PRELUDE = '''import asyncio
import os

import nbflow as nf


async def released(name: str) -> None:
    """Wait until the test creates the file ``name`` (so a run lasts exactly as long as the test needs)."""
    while not os.path.exists(name):
        await asyncio.sleep(0.05)


def clicks_flow(title: str, gate: str | None) -> nf.Flow:
    flow = nf.Flow(title)

    @flow.node
    async def first() -> dict:
        return {"rows": 1, "flow": title}

    @flow.router(branches=["fast", "slow"])
    def route(first: dict) -> str:
        return "fast"

    @flow.node(branch="route.fast")
    async def second(first: dict) -> str:
        return f"second-output of {title}"

    @flow.node(branch="route.slow")
    async def other(first: dict) -> str:
        return "never"

    @flow.node
    async def third(second: str) -> str:
        return f"third-output of {title}"

    @flow.node
    async def last(third: str) -> str:
        if gate is not None:
            await released(gate)
        return f"last-output of {title}"

    return flow'''

CLICK_CELLS = [
    CLICK_PRELUDE,
    "awaited = await clicks_flow('awaited', 'release-awaited').arun()",
    "handle = clicks_flow('started', 'release-started').start()",
    "blocking = clicks_flow('blocking', None).run()",
    """review_flow = nf.Flow("review")


@review_flow.node
async def draft() -> dict:
    return {"title": "Q3 report", "words": 1200}


@review_flow.node
async def review(draft: dict) -> str:
    return await nf.ask("Publish this draft?", options=["approve", "reject"], data=draft)


@review_flow.node
def publish(review: str) -> str:
    return f"published ({review})"


paused = await review_flow.arun()""",
]


def _rgb(css: str) -> tuple[float, float, float]:
    """'rgb(1, 2, 3)' or 'rgba(1, 2, 3, 0.5)' -> (1, 2, 3)."""
    r, g, b = (float(x) for x in re.findall(r"[\d.]+", css)[:3])
    return r, g, b


def _contrast(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """The WCAG contrast ratio of two colours (1 to 21; 4.5 is readable text)."""

    def lum(c: tuple[float, float, float]) -> float:
        ch = [v / 255 for v in c]
        ch = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in ch]
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _three_clicks_and_a_pick(view: Any, title: str) -> None:
    """Click three nodes and pick one in the selector; each must be answered by the kernel (the inspector)."""
    from playwright.sync_api import expect

    wait = {"timeout": 30_000}
    inspector = view.locator(".nbflow-rv-inspector")
    view.locator("svg g#node-first").click()
    expect(inspector).to_contain_text('"flow": "' + title + '"', **wait)
    view.locator("svg g#node-second").click()
    expect(inspector).to_contain_text(f"second-output of {title}", **wait)
    view.locator("svg g#node-third").click()
    expect(inspector).to_contain_text(f"third-output of {title}", **wait)
    view.locator("select.nbflow-rv-select").select_option(value="first")
    expect(inspector).to_contain_text('"rows": 1', **wait)
    expect(inspector.locator("h4")).to_contain_text("first", **wait)


@pytest.mark.browser
def test_every_click_is_handled_during_and_after_runs(lab: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    work = lab.work
    write_notebook(work / "clicks.ipynb", CLICK_CELLS)
    wait = {"timeout": 30_000}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            open_notebook(page, lab, "clicks.ipynb")
            run_all(page)
            views = page.locator(".nbflow-runview")

            # 1. during `await flow.arun(...)`: the cell is still running (its last node waits for a file)
            awaited = views.nth(0)
            expect(awaited.locator("svg g#node-last")).to_have_class(_cls("running"), timeout=90_000)
            _three_clicks_and_a_pick(awaited, "awaited")
            expect(awaited.locator("svg g#node-last")).to_have_class(_cls("running"))  # still awaiting
            (work / "release-awaited").touch()
            expect(awaited.locator(".nbflow-badge-succeeded")).to_be_visible(**wait)
            # ... and after it ended
            _three_clicks_and_a_pick(awaited, "awaited")
            # a branch not taken is not a problem
            expect(awaited.locator("svg g#node-other")).to_have_class(_cls("skipped"), **wait)
            expect(awaited.locator(".nbflow-rv-problems")).not_to_contain_text("other")

            # 2. during `flow.start(...)` (a background run) and after it
            started = views.nth(1)
            expect(started.locator("svg g#node-last")).to_have_class(_cls("running"), **wait)
            _three_clicks_and_a_pick(started, "started")
            (work / "release-started").touch()
            expect(started.locator(".nbflow-badge-succeeded")).to_be_visible(**wait)
            _three_clicks_and_a_pick(started, "started")

            # 3. after a blocking `flow.run(...)`
            blocking = views.nth(2)
            expect(blocking.locator(".nbflow-badge-succeeded")).to_be_visible(**wait)
            _three_clicks_and_a_pick(blocking, "blocking")

            # 4. a question answered with a comment: the answer is kept in the node's history
            asked = views.nth(3)
            expect(asked.locator(".nbflow-badge-paused")).to_be_visible(**wait)
            card = asked.locator(".nbflow-rv-question")
            expect(card).to_contain_text("Publish this draft?", **wait)
            expect(card.locator(".nbflow-rv-qdata")).to_contain_text('"title": "Q3 report"', **wait)  # data, rendered
            expect(card.locator("button.nbflow-rv-primary")).to_have_text("approve")  # one primary button
            card.locator("textarea").fill("looks good, ship it")
            card.locator("button", has_text="approve").click()
            expect(asked.locator(".nbflow-badge-succeeded")).to_be_visible(**wait)
            asked.locator("svg g#node-review").click()
            inspector = asked.locator(".nbflow-rv-inspector")
            expect(inspector).to_contain_text("answered 'approve' by the button", **wait)
            expect(inspector).to_contain_text("comment: looks good, ship it", **wait)
            # resumed, not retried: no "×2" on the node
            expect(asked.locator("svg g#node-review text").last).to_have_text("succeeded", **wait)

            # 5. the dark theme: edge labels and node labels contrast with what is behind them
            page.evaluate(
                "() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})"
            )
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
            time.sleep(1.0)  # the theme's stylesheet applies
            graph = awaited.locator(".nbflow-rv-graph")
            background = _rgb(graph.evaluate("e => getComputedStyle(e).backgroundColor"))
            edge_label = _rgb(awaited.locator("svg g.edge text").first.evaluate("e => getComputedStyle(e).fill"))
            assert _contrast(edge_label, background) >= 4.5, (edge_label, background)
            node = awaited.locator("svg g#node-first")
            node_fill = _rgb(node.locator("path").first.evaluate("e => getComputedStyle(e).fill"))
            node_text = _rgb(node.locator("text").first.evaluate("e => getComputedStyle(e).fill"))
            assert _contrast(node_text, node_fill) >= 4.5, (node_text, node_fill)
            awaited.scroll_into_view_if_needed()
            for folder in shot_folders():
                awaited.screenshot(path=str(folder / "run_widget_dark.png"))

            # 6. first paint of a warm run: from executing the cell to its view showing the final graph. Five
            # runs, each in a new cell; the median counts (the machine is shared: one sample says little).
            paints = []
            for i in range(5):
                page.evaluate(
                    """src => { const nb = window.jupyterapp.shell.currentWidget.content;
                    nb.activeCellIndex = nb.widgets.length - 1;
                    window.jupyterapp.commands.execute('notebook:insert-cell-below');
                    nb.activeCell.model.sharedModel.setSource(src); }""",
                    f"again{i} = clicks_flow('warm', None).run()",
                )
                count = views.count()
                page.evaluate(
                    """() => { window.__nbflowT0 = performance.now();
                    window.jupyterapp.commands.execute('notebook:run-cell'); }"""
                )
                page.wait_for_function(
                    """n => { const v = document.querySelectorAll('.nbflow-runview');
                    if (v.length <= n) return false;
                    const g = v[v.length - 1].querySelector('svg g#node-last');
                    if (!g || !g.classList.contains('nbflow-succeeded')) return false;
                    window.__nbflowPaint = performance.now() - window.__nbflowT0; return true; }""",
                    arg=count,
                    timeout=30_000,
                )
                paints.append(page.evaluate("() => window.__nbflowPaint"))
                time.sleep(0.3)
            paint_ms = sorted(paints)[len(paints) // 2]
            load = os.getloadavg()[0]
            print(f"first paint of a warm run (execute -> final graph drawn): median {paint_ms:.0f} ms of {paints}")
            (ROOT / "tests" / "artifacts").mkdir(exist_ok=True)
            (ROOT / "tests" / "artifacts" / "first_paint_ms.txt").write_text(
                f"{paint_ms:.0f} (median of {[round(p) for p in paints]}; load average {load:.1f})\n"
            )
            assert paint_ms < 1500, paint_ms  # the goal is 150 ms on an idle machine; see docs/widgets.md
        finally:
            browser.close()


# --- Notebook 7 (`jupyter notebook`): the same clicks, the same answers ------------------------------------------
NESTED_CELL = """def chain(title: str, n: int, fail: bool) -> nf.Flow:
    sub = nf.Flow(title)
    sub.add(lambda text: text, name="s0")
    for i in range(1, n):
        if fail and i == n - 1:
            def broken(x: str) -> str:
                raise ValueError("inner failure")
            sub.add(broken, name=f"s{i}", inputs={"x": f"s{i - 1}"})
        else:
            sub.add(lambda x: x, name=f"s{i}", inputs={"x": f"s{i - 1}"})
    return sub


big = nf.Flow("nested")
big.add(lambda: "text", name="doc")
big.add(chain("clean", 80, False), name="clean", inputs={"text": "doc"}, output="s79")
big.add(chain("judge", 80, True), name="judge", inputs={"text": "clean"}, output="s79")
nested = big.run()  # 161 nodes: drawn with its sub-flows folded, not as a table"""


@pytest.mark.browser
def test_every_click_is_handled_in_notebook7(notebook7: Server) -> None:
    """3 clicks + 1 selector pick during `await flow.arun(...)` and after it ends, in Notebook 7; a big graph's
    sub-flows fold and open."""
    from playwright.sync_api import expect, sync_playwright

    write_notebook(notebook7.work / "clicks.ipynb", [*CLICK_CELLS[:2], NESTED_CELL])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            open_notebook(page, notebook7, "clicks.ipynb")
            assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"  # not JupyterLab
            run_all(page)
            awaited = page.locator(".nbflow-runview").first
            # during `await flow.arun(...)`: the cell still runs (its last node waits for a file)
            expect(awaited.locator("svg g#node-last")).to_have_class(_cls("running"), timeout=90_000)
            _three_clicks_and_a_pick(awaited, "awaited")
            expect(awaited.locator("svg g#node-last")).to_have_class(_cls("running"))  # still awaiting
            (notebook7.work / "release-awaited").touch()
            expect(awaited.locator(".nbflow-badge-succeeded")).to_be_visible(timeout=30_000)
            # ... and after it ended
            _three_clicks_and_a_pick(awaited, "awaited")
            awaited.scroll_into_view_if_needed()
            for folder in shot_folders():
                awaited.screenshot(path=str(folder / "run_widget_notebook7.png"))

            # a 161-node graph: a picture with its two sub-flows folded into one node each (not a table)
            nested = page.locator(".nbflow-runview").nth(1)
            judge = nested.locator("svg g#node-judge")
            expect(judge).to_have_class(_cls("failed"), timeout=60_000)
            expect(judge).to_contain_text("sub-flow 'judge': 80 nodes")
            inner = nested.locator('svg g[id="node-judge.s79"]')
            expect(inner).to_have_count(0)
            fold = nested.locator("button.nbflow-rv-fold")
            expect(fold).to_have_text("▸ open judge", timeout=30_000)  # the failed node is inside it
            fold.click()
            expect(inner).to_have_class(_cls("failed"), timeout=30_000)  # laid out again, coloured at once
            expect(nested.locator('svg g[id="node-judge.s3"]')).to_have_class(_cls("succeeded"))
            expect(nested.locator('svg g[id="node-clean.s3"]')).to_have_count(0)  # the other stays folded
            expect(fold).to_have_text("▾ fold judge")
            nested.locator("svg g#node-judge").dblclick()  # double-click folds it again
            expect(inner).to_have_count(0, timeout=30_000)
            expect(judge).to_have_class(_cls("failed"))
        finally:
            browser.close()


@pytest.mark.browser
def test_a_reopened_notebook_shows_the_snapshot_not_an_error_in_notebook7(notebook7: Server) -> None:
    """Run, save (as Notebook 7 does: no widget state), reopen with a new kernel: each run's snapshot shows,
    and none of ipywidgets' "model not found" errors; a run shown again as a cell's value has its own. A big
    run's snapshot lists its first nodes, its failure past them, and counts the rest."""
    from playwright.sync_api import expect, sync_playwright

    work = notebook7.work
    tiny = "import nbflow as nf\n\nf = nf.Flow('tiny')\n\n\n@f.node\ndef a() -> int:\n    return 1"
    big = (
        "big = nf.Flow('big')\nfor i in range(400):\n    big.add(lambda: 1, name=f'n{i}', thread=False)\n\n\n"
        "@big.node(thread=False)\ndef bad(n399: int) -> int:\n    raise ValueError('bad on purpose')"
    )
    write_notebook(work / "saved.ipynb", [tiny, "run = await f.arun()", "run", big, "big_run = await big.arun()"])
    env = server_env(work.parent)
    for command in (
        ["nbconvert", "--to", "notebook", "--execute", "--inplace", "saved.ipynb"],
        ["trust", "saved.ipynb"],
    ):
        subprocess.run([sys.executable, "-m", "jupyter", *command], cwd=work, env=env, check=True, capture_output=True)
    nb = nbformat.read(work / "saved.ipynb", as_version=4)
    assert (
        sum("nbflow-snap" in "".join(o.get("data", {}).get("text/html", "")) for c in nb.cells for o in c.outputs) == 3
    )
    nb.metadata.pop("widgets", None)  # saved without the widget state (the default of JupyterLab and Notebook 7)
    nbformat.write(nb, work / "saved.ipynb")
    subprocess.run([sys.executable, "-m", "jupyter", "trust", "saved.ipynb"], cwd=work, env=env, check=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            open_notebook(page, notebook7, "saved.ipynb")
            snaps = page.locator(".jp-Notebook .nbflow-snap")
            expect(snaps).to_have_count(3, timeout=30_000)
            for i in range(3):
                expect(snaps.nth(i)).to_be_visible()
                expect(snaps.nth(i)).to_contain_text("FAILED" if i == 2 else "SUCCEEDED")
            # the big run: its first 150 nodes, its failure (past them) with the error, one line for the rest
            expect(snaps.nth(2)).to_contain_text("n149")
            expect(snaps.nth(2)).to_contain_text("ValueError: bad on purpose")
            expect(snaps.nth(2)).to_contain_text("… 250 more nodes (250 succeeded;")
            dead = page.locator(".jp-Notebook .jp-OutputArea-output", has_text="model not found")
            expect(dead).to_have_count(3, timeout=60_000)  # the widget manager gave up on every saved view ...
            for i in range(3):
                expect(dead.nth(i)).to_be_hidden()  # ... and no error shows
            assert "model not found" not in page.locator(".jp-Notebook").inner_text()
        finally:
            browser.close()


# --- a saved notebook shows the run without a kernel: nbconvert --to html, and reopening it ------------------
def _executed_quickstart(folder: Path) -> Path:
    """notebooks/01_quickstart.ipynb executed by nbconvert in a real kernel (as a user saving it would)."""
    src = ROOT / "notebooks" / "01_quickstart.ipynb"
    shutil.copy(src, folder / "quickstart.ipynb")
    if (ROOT / "notebooks" / "data").exists():
        shutil.copytree(ROOT / "notebooks" / "data", folder / "data", dirs_exist_ok=True)
    env = server_env(folder.parent)  # the server's: `jupyter trust` signs in the server's database
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--output",
            "saved.ipynb",
            "--ExecutePreprocessor.timeout=300",
            "quickstart.ipynb",
        ],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "saved.ipynb"],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    # trusted, as a notebook the user ran and saved is (its HTML and widget outputs are rendered)
    subprocess.run(
        [sys.executable, "-m", "jupyter", "trust", "saved.ipynb"],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return folder / "saved.ipynb"


def _has_colour(locator: Any, rgb: tuple[int, int, int], at_least: int = 200) -> bool:
    """Whether a screenshot of ``locator`` has at least ``at_least`` pixels of colour ``rgb`` (+-3)."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(locator.screenshot())).convert("RGB")
    near = sum(1 for px in image.get_flattened_data() if all(abs(a - b) <= 3 for a, b in zip(px, rgb, strict=True)))
    return near >= at_least


@pytest.mark.browser
def test_a_saved_notebook_shows_the_run_without_a_kernel(lab: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    work = lab.work
    saved = _executed_quickstart(work)
    nb = nbformat.read(saved, as_version=4)
    # the run's cell carries the snapshot (final state) next to the widget
    run_cell = next(c for c in nb.cells if c.cell_type == "code" and "await flow.arun" in c.source)
    htmls = [o["data"]["text/html"] for o in run_cell.outputs if "text/html" in o.get("data", {})]
    assert htmls and "SUCCEEDED" in htmls[0] and 'class="nbflow-snap' in htmls[0]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in run_cell.outputs)
    page_html = (work / "saved.html").read_text()
    assert "nbflow-snap" in page_html and "data:image/svg+xml;base64," in page_html

    wait = {"timeout": 30_000}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            # 1. nbconvert --to html, opened offline: the coloured graph and the outputs summary are there
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto((work / "saved.html").as_uri())
            snap = page.locator(".nbflow-snap").first
            expect(snap).to_be_visible(**wait)
            expect(snap).to_contain_text("SUCCEEDED")
            expect(snap.locator("table")).to_contain_text("retrieve")
            assert _has_colour(snap.locator("img.nbflow-snap-graph"), (211, 249, 216))  # succeeded nodes drawn
            snap.scroll_into_view_if_needed()
            snap.screenshot(path=str(ROOT / "tests" / "artifacts" / "nbconvert_snapshot.png"))
            page.close()

            # 2. reopened in JupyterLab: a new kernel, which has none of the saved widgets' models. The snapshot
            # is what the user sees; ipywidgets' "Error displaying widget: model not found" below it is hidden.
            # Saved as JupyterLab saves it: without the widget state (else the widget renders from that state).
            nb.metadata.pop("widgets", None)
            nbformat.write(nb, work / "reopened.ipynb")
            subprocess.run(
                [sys.executable, "-m", "jupyter", "trust", "reopened.ipynb"],
                cwd=work,
                env=server_env(work.parent),
                check=True,
                capture_output=True,
                timeout=120,
            )
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            open_notebook(page, lab, "reopened.ipynb")
            trusted = """() => window.jupyterapp.shell.currentWidget.content.widgets
                .filter(c => c.model.type === 'code').every(c => c.model.trusted)"""
            assert page.evaluate(trusted) is True
            snap = page.locator(".jp-Notebook .nbflow-snap").first
            expect(snap).to_be_visible(**wait)
            expect(snap).to_contain_text("SUCCEEDED")
            # the widget manager has given up on the saved models (the state a reopened notebook is in) ...
            dead = page.locator(".jp-Notebook .jp-OutputArea-output", has_text="model not found")
            expect(dead.first).to_be_attached(timeout=60_000)
            time.sleep(0.5)
            # ... and none of its errors shows: every one sits right below its run's snapshot, hidden
            for i in range(dead.count()):
                expect(dead.nth(i)).to_be_hidden()
            assert "model not found" not in page.locator(".jp-Notebook").inner_text()
            assert "Loading widget" not in page.locator(".jp-Notebook").inner_text()
            graph = snap.locator("img.nbflow-snap-graph")
            expect(graph).to_be_visible()
            graph.scroll_into_view_if_needed()
            snap.screenshot(path=str(ROOT / "tests" / "artifacts" / "reopened_snapshot.png"))
            assert _has_colour(graph, (211, 249, 216))  # coloured by the final state (succeeded)
            page.close()
        finally:
            browser.close()
