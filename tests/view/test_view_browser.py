"""`nbflow view` and `nbflow report` in headless Chromium on a store of a 3-variant batch with a failed row and
paused rows: the experiments list, filtering to failures, a row's trace, a paused row's question, comparing two
experiments, a store being written while the page is open, the report opened from disk with the network off,
and a hostile store whose text runs nothing. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from nbflow._view.report import report_store
from nbflow._view.server import Viewer
from tests.helpers.browser import ARGS, CHROMIUM, ROOT, axe_serious, require, shot_folders
from tests.view.conftest import digest, hostile_store

pytestmark = pytest.mark.browser
WAIT = {"timeout": 20_000}


@contextmanager
def _page(**context: Any) -> Iterator[Any]:
    """A page of headless Chromium (1280×900), closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser.new_context(viewport={"width": 1280, "height": 900}, **context).new_page()
        finally:
            browser.close()


def _shot(page: Any, name: str) -> None:
    for folder in shot_folders():
        page.screenshot(path=str(folder / name), full_page=True)


# Every text of the page against its background: WCAG AA asks 4.5:1 (3:1 for large text); disabled controls exempt.
LOW_CONTRAST = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return c;
    }
    return [255, 255, 255];
  };
  const bad = [];
  for (const el of document.querySelectorAll("#nbx-app *")) {
    if (el.closest("svg") || el.disabled || el.closest("[disabled]")) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length) continue;
    const st = getComputedStyle(el);
    const fg = lum(rgb(st.color)), bg = lum(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    const large = parseFloat(st.fontSize) >= 24 || (parseFloat(st.fontSize) >= 18.5 && Number(st.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) bad.push(`${el.tagName}.${el.className} "${el.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
  }
  return bad;
}"""


def _watch(page: Any) -> list[str]:
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    return problems


def test_viewer_pages_in_chromium(runs_db: Path) -> None:
    require("axe_playwright_python")
    from playwright.sync_api import expect

    before = digest(runs_db)
    viewer = Viewer([runs_db]).start()
    try:
        with _page() as page:
            problems = _watch(page)
            page.goto(viewer.url)
            rows = page.locator("table.nbx-experiments tbody tr")
            expect(rows).to_have_count(2, **WAIT)
            expect(page.locator("table.nbx-experiments")).to_contain_text("first try")
            page.fill(".nbx-filter", "first")  # the list filters as one types
            expect(rows).to_have_count(1, **WAIT)
            page.fill(".nbx-filter", "")
            _shot(page, "viewer_experiments.png")
            assert not axe_serious(page), axe_serious(page)
            assert not page.evaluate(LOW_CONTRAST), page.evaluate(LOW_CONTRAST)

            page.get_by_role("link", name="v1", exact=True).click()
            expect(page.locator(".nbx-range")).to_have_text("1–15 of 15", **WAIT)
            expect(page.locator(".nbx-summary")).to_contain_text("score_mean [95% CI]")
            page.select_option("select.nbx-status", "failed")  # filter to the failures
            expect(page.locator(".nbx-range")).to_have_text("1–1 of 1", **WAIT)
            failed = page.locator("tr.nbx-row")
            expect(failed).to_have_count(1)
            expect(failed.first).to_contain_text("model refused")
            _shot(page, "viewer_experiment_failed.png")
            assert not axe_serious(page), axe_serious(page)
            assert not page.evaluate(LOW_CONTRAST), page.evaluate(LOW_CONTRAST)

            failed.first.focus()
            page.keyboard.press("Enter")  # rows open from the keyboard too
            expect(page.locator(".nbx-detail h1")).to_contain_text("failed", **WAIT)
            expect(page.locator("details.nbx-node.nbx-failed")).to_contain_text("Traceback")
            node = page.locator("svg g#node-answer")
            expect(node).to_have_class("node nbflow-node nbflow-failed")
            expect(node).to_contain_text("✗ failed")  # the state by symbol as well as colour
            _shot(page, "viewer_row_failed.png")
            assert not axe_serious(page), axe_serious(page)
            assert not page.evaluate(LOW_CONTRAST), page.evaluate(LOW_CONTRAST)

            page.go_back()
            page.select_option("select.nbx-status", "paused")
            expect(page.locator(".nbx-range")).to_have_text("1–3 of 3", **WAIT)
            page.locator("tr.nbx-row").first.click()
            expect(page.locator(".nbx-question")).to_contain_text("Is this right?", **WAIT)
            expect(page.locator(".nbx-question")).to_contain_text("yes · no")
            _shot(page, "viewer_row_paused.png")
            assert not page.evaluate(LOW_CONTRAST), page.evaluate(LOW_CONTRAST)

            page.goto(viewer.url)
            expect(rows).to_have_count(2, **WAIT)
            for box in page.locator("table.nbx-experiments input[type=checkbox]").all():
                box.check()
            page.locator(".nbx-compare-go").click()
            expect(page.locator("#nbx-app")).to_contain_text("v2 vs v1 on 15 cases", **WAIT)  # nf.compare's summary
            expect(page.locator(".nbx-verdict")).to_contain_text("v1")  # and its verdict, when it gives one
            first = page.locator("tr.nbx-row").first
            expect(first.locator(".nbx-col-change")).to_contain_text("regressed")  # regressions first
            _shot(page, "viewer_compare.png")
            assert not axe_serious(page), axe_serious(page)
            assert not page.evaluate(LOW_CONTRAST), page.evaluate(LOW_CONTRAST)
            first.click()
            expect(page.locator(".nbx-detail h1")).to_contain_text("row", **WAIT)
            assert not problems, problems
    finally:
        viewer.stop()
    assert digest(runs_db) == before


def test_viewer_pages_in_the_systems_dark_mode(runs_db: Path) -> None:
    """With the system in dark mode the pages turn dark, and every text keeps WCAG AA contrast (the error text
    included: it was 2.73:1 in a dark theme); axe-core finds no serious violation. The light pages are checked in
    test_viewer_pages_in_chromium."""
    require("axe_playwright_python")
    from playwright.sync_api import expect

    viewer = Viewer([runs_db]).start()
    try:
        with _page(color_scheme="dark") as page:
            problems = _watch(page)
            pages = {
                "experiments": ("", "table.nbx-experiments tbody tr"),
                "experiment": ("#/e/0%3Av1", "tr.nbx-row"),
                "row_failed": ("#/r/0%3Av1/6", ".nbx-detail .nbx-err"),
                "compare": ("#/c/0%3Av1/0%3Av2", ".nbx-verdict"),
            }
            for name, (route, ready) in pages.items():
                page.goto(viewer.url + route)
                expect(page.locator(ready).first).to_be_visible(**WAIT)
                assert page.evaluate("() => document.body.dataset.jpThemeLight") == "false"
                background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
                assert background == "rgb(30, 30, 30)", background
                if name == "row_failed":
                    expect(page.locator(".nbx-detail .nbx-err").first).to_contain_text("model refused")
                _shot(page, f"viewer_dark_{name}.png")
                assert not page.evaluate(LOW_CONTRAST), (name, page.evaluate(LOW_CONTRAST))
                assert not axe_serious(page), (name, axe_serious(page))
            assert not problems, problems
    finally:
        viewer.stop()


def test_viewer_page_follows_a_batch_being_written(tmp_path: Path) -> None:
    require()
    from playwright.sync_api import expect

    db = tmp_path / "live.db"
    script = textwrap.dedent(
        f"""
        import time, nbflow as nf
        flow = nf.Flow("slow")
        @flow.node
        def work(x: int) -> int:
            time.sleep(0.25)
            return x
        flow.batch([{{"x": i}} for i in range(40)], store={str(db)!r}, experiment="live", concurrency=1,
                   progress=False)
        """
    )
    writer = subprocess.Popen([sys.executable, "-c", script])
    try:
        # Opened at once: the store's file may not exist yet, nor its experiment (recorded ~1 s after the file
        # appears); the page says so and shows the experiment once it is recorded.
        viewer = Viewer([db]).start()
        try:
            with _page() as page:
                page.goto(viewer.url + "#/e/0%3Alive")
                heading = page.locator("h1 .nbx-s-running")
                expect(heading).to_contain_text("rows finished", **WAIT)
                first = heading.inner_text()
                expect(heading).not_to_have_text(first, timeout=20_000)  # re-read while the batch writes
                _shot(page, "viewer_running.png")
        finally:
            viewer.stop()
    finally:
        writer.kill()
        writer.wait()


def _gated_batch(db: Path, gate: Path) -> subprocess.Popen[bytes]:
    """A batch of 12 rows writing experiment "live" to ``db`` from another process (nbflow from this tree): rows
    0-3 finish at once, the others once the file ``gate`` exists (so a test sees it running, then finished)."""
    script = textwrap.dedent(
        f"""
        import os, time, nbflow as nf
        flow = nf.Flow("gated")
        @flow.node
        def work(x: int) -> int:
            while x >= 4 and not os.path.exists({str(gate)!r}):
                time.sleep(0.02)
            return x
        flow.batch([{{"x": i}} for i in range(12)], store={str(db)!r}, experiment="live", concurrency=1,
                   progress=False)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", script], env=env)


# api/version requests the page made so far; a MutationObserver counting changes of the page's content
LOOKS = "() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/version')).length"
COUNT_CHANGES = """() => { window.nbxChanges = 0; new MutationObserver((m) => { window.nbxChanges += m.length; })
  .observe(document.getElementById("nbx-app"), { subtree: true, childList: true, characterData: true, attributes: true }); }"""


def _still_while_it_looks(page: Any, looks: int = 3) -> None:
    """The page asks the server for the store's version ``looks`` more times and its content does not change."""
    seen = page.evaluate(LOOKS)
    page.evaluate(COUNT_CHANGES)
    page.wait_for_function(f"() => ({LOOKS})() >= {seen + looks}", timeout=20_000)
    assert page.evaluate("() => window.nbxChanges") == 0


def test_pages_opened_before_the_store_exists_show_it_once_a_batch_writes_it(tmp_path: Path) -> None:
    """`nbflow view` on a store file no batch has written yet: the list, an experiment's page and a row's page say
    so (a status, not an error), keep still while they wait, create no file, and each shows its data by itself once
    a batch writes the store: the row page through 'no store', 'no experiment' and 'row not finished yet'."""
    require()
    from playwright.sync_api import expect

    db, gate = tmp_path / "live.db", tmp_path / "go"
    viewer = Viewer([db]).start()
    writer = None
    try:
        with _page() as page:
            problems = _watch(page)
            pages = {"list": "", "experiment": "#/e/0%3Alive", "row": "#/r/0%3Alive/8"}
            opened = {}
            for name, route in pages.items():
                opened[name] = page if not opened else page.context.new_page()
                opened[name].goto(viewer.url + route)
                waiting = opened[name].locator("#nbx-app [role=status].nbx-waiting")
                expect(waiting).to_contain_text("no store at 'live.db' yet", **WAIT)
            assert page.locator("#nbx-app [role=alert]").count() == 0  # not written yet is no error
            _shot(page, "viewer_waiting.png")
            _still_while_it_looks(opened["row"])
            assert not db.exists()  # viewing created no file

            writer = _gated_batch(db, gate)
            row = opened["row"]
            expect(row.locator(".nbx-waiting")).to_contain_text("row 8 of experiment '0:live' has not finished", **WAIT)
            expect(opened["experiment"].locator("h1 .nbx-s-running")).to_contain_text("4 of 12 rows finished", **WAIT)
            expect(page.locator("table.nbx-experiments tbody tr")).to_have_count(1, **WAIT)
            expect(page.locator("table.nbx-experiments")).to_contain_text("live")
            expect(page.locator(".nbx-waiting")).to_have_count(0)
            gate.touch()
            expect(row.locator(".nbx-detail h1")).to_contain_text("row 8", **WAIT)
            expect(row.locator(".nbx-detail h1")).to_contain_text("succeeded")
            expect(opened["experiment"].locator(".nbx-range")).to_have_text("1–12 of 12", **WAIT)
            assert writer.wait(60) == 0
            assert not problems, problems
    finally:
        viewer.stop()
        if writer is not None:
            writer.kill()
            writer.wait()


def test_an_experiment_opened_before_its_batch_starts_shows_it_keeping_the_readers_place(
    tmp_path: Path,
) -> None:
    """The viewer's known dead end: an experiment's page opened (from its link) before its batch records it said
    'no experiment' for good. Now it waits and shows it, and redrawing it as rows arrive keeps what the reader is
    at: the list's filter and its focus, the text being typed in the rows' search box (not yet applied)."""
    require()
    from playwright.sync_api import expect

    import nbflow as nf

    db, gate = tmp_path / "live.db", tmp_path / "go"
    flow = nf.Flow("before")

    @flow.node
    def work(x: int) -> int:
        return x

    flow.batch([{"x": 1}], store=db, experiment="older", progress=False)
    viewer = Viewer([db]).start()
    writer = None
    try:
        with _page() as page:
            problems = _watch(page)
            page.goto(viewer.url + "#/e/0%3Alive")
            expect(page.locator(".nbx-waiting")).to_contain_text("no experiment '0:live' in live.db yet", **WAIT)
            _still_while_it_looks(page)
            listing = page.context.new_page()
            listing.goto(viewer.url)
            expect(listing.locator("table.nbx-experiments tbody tr")).to_have_count(1, **WAIT)
            listing.locator(".nbx-filter").press_sequentially("l")  # both "older" and "live" hold an l

            writer = _gated_batch(db, gate)
            heading = page.locator("h1 .nbx-s-running")
            expect(heading).to_contain_text("4 of 12 rows finished", **WAIT)
            expect(page.locator("#nbx-app [role=alert]")).to_have_count(0)
            page.locator(".nbx-search").press_sequentially("zz")  # typed, not applied (no Enter)
            expect(listing.locator("table.nbx-experiments tbody tr")).to_have_count(2, **WAIT)
            gate.touch()
            expect(page.locator(".nbx-range")).to_have_text("1–12 of 12", **WAIT)  # drawn anew as rows came
            expect(heading).to_have_count(0, **WAIT)  # the batch ended
            expect(page.locator(".nbx-search")).to_be_focused()
            expect(page.locator(".nbx-search")).to_have_value("zz")
            listing.bring_to_front()
            expect(listing.locator(".nbx-filter")).to_be_focused()
            expect(listing.locator(".nbx-filter")).to_have_value("l")
            assert writer.wait(60) == 0
            # (the browser logs each answer "not written yet", a 404 with "waiting": true, as a failed load)
            assert not [p for p in problems if "status of 404" not in p], problems
    finally:
        viewer.stop()
        if writer is not None:
            writer.kill()
            writer.wait()


def test_report_from_disk_with_the_network_off(runs_db: Path, tmp_path: Path) -> None:
    require()
    from playwright.sync_api import expect

    out = report_store([runs_db], "v1", tmp_path / "report.html", vs="v2")
    with _page(offline=True) as page:
        problems = _watch(page)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(out.as_uri())
        expect(page.locator("#nbx-app")).to_contain_text("v2 vs v1 on 15 cases", **WAIT)
        _shot(page, "report_compare.png")
        page.locator("nav a").first.click()
        expect(page.locator("table.nbx-experiments tbody tr")).to_have_count(2, **WAIT)
        page.get_by_role("link", name="v1", exact=True).click()
        expect(page.locator(".nbx-range")).to_have_text("1–15 of 15", **WAIT)
        page.select_option("select.nbx-variant", "terse")
        expect(page.locator(".nbx-range")).to_have_text("1–5 of 5", **WAIT)
        page.fill(".nbx-search", "boom")
        page.keyboard.press("Enter")
        expect(page.locator(".nbx-range")).to_have_text("1–1 of 1", **WAIT)
        _shot(page, "report_experiment.png")
        assert not page.evaluate(LOW_CONTRAST), page.evaluate(LOW_CONTRAST)
        page.locator("tr.nbx-row").first.click()
        expect(page.locator("details.nbx-node.nbx-failed")).to_contain_text("Traceback", **WAIT)
        _shot(page, "report_row.png")
        assert not page.evaluate(LOW_CONTRAST), page.evaluate(LOW_CONTRAST)
        assert requests == [out.as_uri()], requests  # the file, and nothing else
        assert not problems, problems


def test_hostile_store_renders_as_text_and_runs_nothing(tmp_path: Path) -> None:
    require()
    from playwright.sync_api import expect

    marker = tmp_path / "pwned"
    db = hostile_store(tmp_path / "evil.db", marker)
    before = digest(db)
    out = report_store([db], "<script>window.pwned=6</script>", tmp_path / "report.html")
    viewer = Viewer([db]).start()
    try:
        with _page() as page:
            for url in (viewer.url, out.as_uri()):
                page.goto(url)
                page.wait_for_selector("tr.nbx-row", **WAIT)
                if page.locator("table.nbx-experiments").count():
                    page.locator("a.nbx-open").first.click()
                expect(page.locator("h1")).to_contain_text("<script>window.pwned=6</script>", **WAIT)
                expect(page.locator("tr.nbx-row").first).to_contain_text("<script>window.pwned=5</script>")
                for i in range(page.locator("tr.nbx-row").count()):
                    page.locator("tr.nbx-row").nth(i).click()
                    expect(page.locator(".nbx-detail")).to_be_visible(**WAIT)
                    page.go_back()
                    page.wait_for_selector("tr.nbx-row", **WAIT)
                assert page.evaluate("() => window.pwned") is None
                assert page.locator("#nbx-app img, #nbx-app iframe, #nbx-app script").count() == 0
            _shot(page, "viewer_hostile.png")
    finally:
        viewer.stop()
    assert not marker.exists()
    assert digest(db) == before
