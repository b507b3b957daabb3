"""Streaming and transcripts in a real browser: JupyterLab + headless Chromium, end to end.

A notebook awaits a flow (``await flow.arun(...)``: the cell holds the shell) whose ``story`` node is an async
generator released step by step by files the test writes, and whose ``other`` node asks a recorded ``openai``
client (against ``nbflow.testing.ChatServer`` in the kernel). While the run is awaited, the inspector shows
the story's text growing, and clicks on other nodes (three during the run) are each answered at once: the
other node's chat transcript, then the story again with its text as it is now. Run it alone with
``pytest -m browser``.
"""

from __future__ import annotations

import time

import pytest

from tests.helpers.browser import ARGS, CHROMIUM, Server, open_notebook, run_all, shot_folders, write_notebook
from tests.kernel.test_widgets_browser import _contrast, _rgb

CELLS = [
    """import asyncio
import os

import openai
import nbflow as nf
from nbflow.testing import ChatServer

server = ChatServer().start()
flow = nf.Flow("streaming")


async def released(name: str) -> None:
    while not os.path.exists(name):
        await asyncio.sleep(0.05)


@flow.resource
def llm():
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key)


@flow.node
async def other(topic: str, llm) -> str:
    r = await llm.chat.completions.create(
        model="gpt-browser",
        messages=[{"role": "system", "content": "Answer <briefly>."}, {"role": "user", "content": f"other {topic}"}],
    )
    return r.choices[0].message.content


@flow.node
async def story(topic: str):
    yield "alpha "
    await released("release-1")
    yield "beta "
    await released("release-2")
    yield "gamma"


@flow.node
def words(story: str, other: str) -> int:
    return len(story.split())""",
    "awaited = await flow.arun(topic='cats')",
]


@pytest.mark.browser
def test_a_streaming_node_grows_in_the_inspector_while_other_nodes_are_clicked(lab: Server) -> None:
    from playwright.sync_api import expect, sync_playwright

    work = lab.work
    write_notebook(work / "streaming.ipynb", CELLS)
    wait = {"timeout": 30_000}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            open_notebook(page, lab, "streaming.ipynb")
            run_all(page)
            view = page.locator(".nbflow-runview").first
            story = view.locator("svg g#node-story")
            expect(story).to_have_class(_running(), timeout=90_000)
            inspector = view.locator(".nbflow-rv-inspector")
            streamed = inspector.locator("pre.nbflow-stream")

            story.click()
            expect(streamed).to_have_text("alpha ", **wait)
            # click 1, during the awaited run: the other node's transcript (escaped), answered at once
            view.locator("svg g#node-other").click()
            expect(inspector.locator("h4")).to_contain_text("other", **wait)
            expect(inspector).to_contain_text("transcript (1 model call)", **wait)
            expect(inspector).to_contain_text("gpt-browser", **wait)
            expect(inspector.locator(".nbflow-msg-system")).to_contain_text("Answer <briefly>.", **wait)
            expect(inspector.locator(".nbflow-msg-assistant")).to_contain_text("echo: other cats", **wait)
            # click 2: back to the story, still at its first chunk
            story.click()
            expect(streamed).to_have_text("alpha ", **wait)
            (work / "release-1").touch()
            expect(streamed).to_have_text("alpha beta ", **wait)  # it grew while selected
            # click 3, and back: the text as it is now
            view.locator("svg g#node-other").click()
            expect(inspector).to_contain_text("echo: other cats", **wait)
            story.click()
            expect(streamed).to_have_text("alpha beta ", **wait)
            expect(story).to_have_class(_running())  # all of this while the cell still awaits the run
            for folder in shot_folders():
                view.screenshot(path=str(folder / "run_widget_streaming.png"))
            (work / "release-2").touch()
            expect(view.locator(".nbflow-badge-succeeded")).to_be_visible(**wait)
            story.click()
            expect(inspector).to_contain_text("alpha beta gamma", **wait)  # the output: the text joined
            view.locator("svg g#node-words").click()
            expect(inspector).to_contain_text("3", **wait)
            # the transcript reads in the dark theme: its text contrasts with the page behind its bubbles
            view.locator("svg g#node-other").click()
            expect(inspector.locator(".nbflow-msg-assistant")).to_be_visible(**wait)
            page.evaluate(
                "() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})"
            )
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
            time.sleep(1.0)  # the theme's stylesheet applies
            text = _rgb(inspector.locator(".nbflow-msg-assistant").evaluate("e => getComputedStyle(e).color"))
            behind = _rgb(page.locator(".jp-Notebook").first.evaluate("e => getComputedStyle(e).backgroundColor"))
            assert _contrast(text, behind) >= 4.5, (text, behind)
            for folder in shot_folders():
                view.screenshot(path=str(folder / "run_widget_transcript_dark.png"))
        finally:
            browser.close()


def _running() -> object:
    import re

    return re.compile(r"\bnbflow-running\b")
