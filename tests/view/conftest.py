"""Stores the viewer tests read: two experiments of a 3-variant batch with a failed row and paused rows, and a
store holding hostile values (markup, a huge text, a pickle whose loading would run code)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import nbflow as nf
from tests.store.evil import Evil

QUESTIONS = ["one", "two", "boom <script>window.pwned=1</script>", "ask me", "five"]


def qa_flow() -> nf.Flow:
    flow = nf.Flow("qa")

    @flow.node
    def answer(question: str, prompt: str) -> str:
        if "boom" in question and prompt == "terse":
            raise ValueError(f"model refused: {question}")
        return f"{prompt}: {question}"

    @flow.node
    async def score(answer: str, question: str) -> float:
        if "ask" in question:
            return await nf.ask("Is this right?", data=answer, options=["yes", "no"])
        return float(len(answer) % 3) / 2

    return flow


def make_store(path: Path) -> Path:
    """Experiments "v1" and "v2" (v2's "steps" prompt differs): 15 rows each, 1 failed, 3 paused."""
    flow = qa_flow()
    rows = [{"question": q} for q in QUESTIONS]
    grid = {"prompt": {"terse": "terse", "steps": "steps", "plain": "plain"}}
    flow.batch(rows, grid=grid, store=path, experiment="v1", notes="first try", progress=False)
    grid2 = {"prompt": {"terse": "terse", "steps": "steps, again", "plain": "plain"}}
    flow.batch(rows, grid=grid2, store=path, experiment="v2", progress=False)
    return path


@pytest.fixture(scope="session")
def runs_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_store(tmp_path_factory.mktemp("view") / "runs.db")


def hostile_store(path: Path, marker: Path) -> Path:
    """A store whose texts are markup and scripts, with a 1 MB value and an output that is a pickle whose loading
    would create ``marker`` (signed with this user's own key: the viewer must not open it even so)."""
    flow = nf.Flow("hostile")

    @flow.node
    def text(x: str) -> str:
        if x == "huge":
            return "<b>big</b>" * 100_000
        if x == "fail":
            raise RuntimeError('</script><script>window.pwned=2</script><img src=x onerror="window.pwned=3">')
        return f'<img src=x onerror="window.pwned=4">{x}'

    @flow.node
    def thing(text: str) -> object:
        return Evil(str(marker))

    flow.batch(
        [{"x": "<script>window.pwned=5</script>"}, {"x": "huge"}, {"x": "fail"}],
        outputs=["text", "thing"],
        store=path,
        experiment="<script>window.pwned=6</script>",
        notes="<iframe src=javascript:window.pwned=7>",
        progress=False,
    )
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
