"""The run view's layout in JupyterLab + headless Chromium, on a 12-node flow with a router whose last node fails:
"fit" shows the whole graph (width and height) at 1280×720, the failed node included; narrower than 800 px the
inspector goes below the graph; branch edges taken and not taken look different (and the legend says so); axe-core
finds no serious accessibility violation in the view. Screenshots: tests/artifacts/run_view_fit.png and
run_view_narrow.png."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.helpers.browser import (
    ARGS,
    CHROMIUM,
    Server,
    axe_serious,
    open_notebook,
    run_all,
    shot_folders,
    write_notebook,
)

CELLS = [
    "import nbflow as nf\n\nflow = nf.Flow('tall')",
    """@flow.node
def s1(x: int) -> int:
    return x + 1


@flow.node
def s2(s1: int) -> int:
    return s1 + 1


@flow.node
def s3(s2: int) -> int:
    return s2 + 1


@flow.node
def s4(s3: int) -> int:
    return s3 + 1


@flow.node
def s5(s4: int) -> int:
    return s4 + 1


@flow.node
def s6(s5: int) -> int:
    return s5 + 1


@flow.node
def s7(s6: int) -> int:
    return s6 + 1


@flow.router(branches=["billing", "tech"])
def route(s7: int) -> str:
    return "tech"


@flow.node(branch="route.billing")
def billing(s7: int) -> int:
    return s7


@flow.node(branch="route.tech")
def tech(s7: int) -> int:
    return s7


@flow.node
def s8(tech: int) -> int:
    return tech + 1


@flow.node
def final(s8: int) -> int:
    raise ValueError(f"the last step failed at {s8}")""",
    "run = flow.run(x=1)",
    """mapped = nf.Flow("mapped")


@mapped.node
def items() -> list[int]:
    return list(range(320))


@mapped.node(map=nf.Map("items"))
def double(items: int) -> int:
    return items * 2


listed = mapped.run()""",
    """graded = nf.Flow("graded")


@graded.node
def answer(q: int, prompt: str) -> str:
    if q == 3 and prompt == "steps":
        raise RuntimeError(f"model refused q{q}")
    return f"{prompt}: q{q}"


df = graded.batch([{"q": i} for i in range(6)], grid={"prompt": ["terse", "steps"]})""",
]


def _box(locator: Any) -> dict[str, float]:
    box = locator.bounding_box()
    assert box is not None
    return box


@pytest.mark.browser
def test_fit_narrow_branches_and_axe_in_jupyterlab(lab: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    write_notebook(lab.work / "tall.ipynb", CELLS)
    folders = shot_folders()
    wait: dict[str, Any] = {"timeout": 60_000}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            open_notebook(page, lab, "tall.ipynb")
            run_all(page)
            view = page.locator(".nbflow-runview").first
            expect(view.locator(".nbflow-badge-failed")).to_be_visible(**wait)
            failed = view.locator("svg g#node-final")
            expect(failed).to_have_class(_has("failed"), **wait)

            # branch edges: the one not taken dashed and grey, the taken one solid, and a legend saying so
            skipped = view.locator("svg g#branch__billing")
            taken = view.locator("svg g#branch__tech")
            expect(skipped).to_have_class(_has("nbflow-not-taken"), **wait)
            expect(taken).to_have_class(_has("nbflow-taken"), **wait)
            expect(skipped.locator("path").first).not_to_have_css("stroke-dasharray", "none")
            expect(taken.locator("path").first).to_have_css("stroke-dasharray", "none")
            dashed = skipped.locator("path").first.evaluate("e => getComputedStyle(e).stroke")
            solid = taken.locator("path").first.evaluate("e => getComputedStyle(e).stroke")
            assert dashed != solid, (dashed, solid)
            expect(view.locator(".nbflow-rv-legend")).to_contain_text("branch not taken")

            # "fit": the whole graph in the visible area, the failed node (the lowest) on screen
            view.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.mouse.wheel(0, -40)  # (JupyterLab's toolbar may cover the top: back off a little)
            view.get_by_role("button", name="fit").click()
            time.sleep(0.5)
            pane = view.locator(".nbflow-rv-graph")
            svg = view.locator(".nbflow-rv-svg svg")
            natural = float(svg.get_attribute("data-h") or 0)
            assert natural > 720, natural  # the graph is taller than the window: fitting it means scaling it
            sbox, pbox, fbox = _box(svg), _box(pane), _box(failed)
            assert sbox["height"] <= pbox["height"] + 1 and sbox["width"] <= pbox["width"] + 1, (sbox, pbox)
            bottom = _box(page.locator("#jp-main-statusbar"))["y"]  # the notebook's visible area ends there
            assert fbox["y"] >= 0 and fbox["y"] + fbox["height"] <= bottom, (fbox, bottom)  # the failed node shows
            assert pane.evaluate("e => e.scrollHeight <= e.clientHeight + 1")  # nothing to scroll to
            # two columns at 1280: the inspector beside the graph
            right = _box(view.locator(".nbflow-rv-right"))
            assert right["x"] >= pbox["x"] + pbox["width"] - 1, (right, pbox)
            for folder in folders:
                page.screenshot(path=str(folder / "run_view_fit.png"))

            serious = axe_serious(page, ".nbflow-runview")
            assert not serious, serious

            # a map's list of 320 numbers: a few wrapped lines with a count, every item behind "show all"
            mapped = page.locator(".nbflow-runview").nth(1)
            expect(mapped.locator(".nbflow-badge-succeeded")).to_be_visible(**wait)
            mapped.locator("select").select_option(value="double")
            shown = mapped.locator("pre.nbflow-list")
            expect(shown).to_contain_text("… 260 more]", **wait)
            assert _box(shown)["height"] < 200, _box(shown)  # a few lines (one number a line: ~320 lines, 5,000 px)
            mapped.get_by_text("show all 320 items").click()
            expect(mapped.locator("details.nbflow-list-all pre")).to_contain_text("398, … 120 more items not shown]")
            mapped.scroll_into_view_if_needed()
            for folder in folders:
                mapped.screenshot(path=str(folder / "run_view_list.png"))

            # the explorer (a batch's results) in JupyterLab: no serious axe violation either
            explorer = page.locator(".nbflow-explorer").first
            expect(explorer.locator(".nbx-range")).to_have_text("1–12 of 12", **wait)
            serious = axe_serious(page, ".nbflow-explorer")
            assert not serious, serious

            # JupyterLab's dark theme: every text of the run view and the explorer keeps AA contrast (axe's
            # color-contrast rule; the error text was 2.73:1)
            page.evaluate(
                "() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})"
            )
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
            time.sleep(1.0)  # the theme's stylesheet applies
            for within in (".nbflow-runview", ".nbflow-explorer"):
                serious = axe_serious(page, within)
                assert not serious, (within, serious)
            view.scroll_into_view_if_needed()
            for folder in folders:
                view.screenshot(path=str(folder / "run_view_dark_failed.png"))
            page.evaluate(
                "() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})"
            )
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=30_000)

            # narrower than 800 px: one column, the inspector below the graph
            page.set_viewport_size({"width": 760, "height": 720})
            time.sleep(0.8)
            pbox = _box(pane)
            right = _box(view.locator(".nbflow-rv-right"))
            assert right["y"] >= pbox["y"] + pbox["height"] - 1, (right, pbox)
            assert _box(svg)["width"] <= pbox["width"] + 1
            view.evaluate("e => e.scrollIntoView({block: 'start'})")
            for folder in folders:
                page.screenshot(path=str(folder / "run_view_narrow.png"))
        finally:
            browser.close()


def _has(cls: str) -> Any:
    import re

    name = cls if cls.startswith("nbflow-") else f"nbflow-{cls}"
    return re.compile(rf"(^|\s){name}(\s|$)")


@pytest.mark.browser
def test_the_saved_snapshot_shows_the_failure_without_scrolling(tmp_path: Any) -> None:
    """The static snapshot (what a saved notebook, nbconvert and GitHub show) of the same 12-node run, opened in
    Chromium at 1280×720: the failed node and its error are on screen, the picture shows whole (no scroll box),
    with its branch legend. Screenshot: tests/artifacts/run_view_snapshot.png."""
    from playwright.sync_api import expect, sync_playwright

    from nbflow.widgets import RunView
    from tests.helpers.browser import require

    require()
    space: dict[str, Any] = {}
    exec("\n".join(CELLS[:2]), space)  # the same flow, run here
    run = space["flow"].run(x=1, show=False)
    page_file = tmp_path / "snapshot.html"
    page_file.write_text(f"<!doctype html><meta charset='utf-8'><body>{RunView(run).snapshot_html()}</body>")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(page_file.as_uri())
            urgent = page.locator(".nbflow-snap-urgent")
            expect(urgent).to_contain_text("the last step failed at 9")
            box = _box(urgent)
            assert box["y"] + box["height"] <= 720, box  # the failure, seen without scrolling
            graph = page.locator("img.nbflow-snap-graph")
            gbox = _box(graph)
            assert gbox["height"] <= 641, gbox
            assert graph.evaluate("e => e.naturalHeight > 0 && e.complete")
            assert graph.evaluate("e => e.parentElement.scrollHeight <= e.parentElement.clientHeight + 1")
            expect(page.locator(".nbflow-snap-legend")).to_contain_text("branch not taken")
            for folder in shot_folders():
                page.screenshot(path=str(folder / "run_view_snapshot.png"), full_page=True)
        finally:
            browser.close()
