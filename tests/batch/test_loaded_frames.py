"""A frame read back with ``nf.load_batch`` behaves as the frame the batch returned: ``df.nbflow`` exists in a
new process (nothing private imported), its rows open from the store, and ``flow.answer`` on it writes the answer
to the store (and the row's new state) and resumes the paused row, in this process or after a restart."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import nbflow as nf

FLOW = """
import nbflow as nf

flow = nf.Flow("approve_loaded")


@flow.node
def draft(topic: str) -> str:
    return f"post about {topic}"


@flow.node
async def review(draft: str, topic: str) -> str:
    if topic.startswith("auto"):
        return "approve"
    return await nf.ask(f"Publish {draft!r}?", options=["approve", "reject"])


@flow.node
def publish(review: str, draft: str) -> str:
    return draft.upper() if review == "approve" else "(rejected)"
"""


def _run(tmp_path: Path, code: str) -> str:
    """``code`` in a new Python process (a kernel restart) that can import the flow module; its output."""
    (tmp_path / "approve_loaded.py").write_text(FLOW)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _batch(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    _run(
        tmp_path,
        f"""
        from approve_loaded import flow
        df = flow.batch([{{"topic": t}} for t in ("auto-1", "tea", "coffee")], store={str(db)!r},
                        experiment="review", progress=False)
        print(list(df["status"]))
        """,
    )
    return db


def _stored(db: Path) -> tuple[list[str], str]:
    frame = nf.load_batch(db, "review")
    return list(frame["status"]), str(frame.loc[1, "publish"])


def test_a_loaded_frame_opens_and_answers_its_rows_in_a_new_process(tmp_path: Path) -> None:
    db = _batch(tmp_path)
    out = _run(
        tmp_path,
        f"""
        import nbflow as nf  # nbflow first, pandas later (a script): df.nbflow is there all the same
        from approve_loaded import flow
        df = nf.load_batch({str(db)!r}, "review")
        print(list(df["status"]))
        run = df.nbflow.run(0)  # a succeeded row, from the store
        print(run.status.name, run["publish"])
        print(df.nbflow.run(1).status.name, sorted(df.nbflow.run(1).pending))
        flow.answer(df, {{1: "approve"}})
        print(list(df["status"]), df.loc[1, "publish"])
        """,
    )
    lines = out.splitlines()
    assert lines[0] == "['succeeded', 'paused', 'paused']"
    assert lines[1] == "SUCCEEDED POST ABOUT AUTO-1"
    assert lines[2].startswith("PAUSED [")
    assert lines[3] == "['succeeded', 'succeeded', 'paused'] POST ABOUT TEA"
    # On disk: the answered row and its run, read back here (another process).
    assert _stored(db) == (["succeeded", "succeeded", "paused"], "POST ABOUT TEA")
    assert nf.load_run(db, str(nf.load_batch(db, "review").loc[1, "run_id"]))["publish"] == "POST ABOUT TEA"
    # ...and the other paused row still answers after one more restart.
    out = _run(
        tmp_path,
        f"""
        import nbflow as nf
        from approve_loaded import flow
        df = nf.load_batch({str(db)!r}, "review")
        flow.answer(df, {{2: "reject"}})
        print(list(df["status"]), df.loc[2, "publish"])
        """,
    )
    assert out.strip() == "['succeeded', 'succeeded', 'succeeded'] (rejected)"
    assert list(nf.load_batch(db, "review")["publish"]) == ["POST ABOUT AUTO-1", "POST ABOUT TEA", "(rejected)"]


def test_a_loaded_frame_answered_in_the_same_process_is_written_to_the_store(tmp_path: Path) -> None:
    db = _batch(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        from approve_loaded import flow
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("approve_loaded", None)
    df = nf.load_batch(db, "review")
    flow.answer(df, {2: "reject"})
    assert list(df["status"]) == ["succeeded", "paused", "succeeded"]
    stored = nf.load_batch(db, "review")
    assert list(stored["status"]) == ["succeeded", "paused", "succeeded"]
    assert stored.loc[2, "publish"] == "(rejected)"
    assert nf.load_run(db, str(stored.loc[2, "run_id"])).status.name == "SUCCEEDED"


def test_a_loaded_frame_of_a_batch_run_in_this_process_writes_its_answers(tmp_path: Path) -> None:
    sys.path.insert(0, str(tmp_path))
    (tmp_path / "approve_loaded.py").write_text(FLOW)
    try:
        from approve_loaded import flow
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("approve_loaded", None)
    db = tmp_path / "runs.db"
    flow.batch([{"topic": t} for t in ("tea", "coffee")], store=db, experiment="review", progress=False)
    loaded = nf.load_batch(db, "review")  # its paused runs are still in this process's memory
    flow.answer(loaded, {0: "approve"})
    assert list(loaded["status"]) == ["succeeded", "paused"]
    stored = nf.load_batch(db, "review")
    assert list(stored["status"]) == ["succeeded", "paused"] and stored.loc[0, "publish"] == "POST ABOUT TEA"


def test_an_answer_is_in_the_store_before_the_row_resumes(tmp_path: Path) -> None:
    seen: list[str] = []
    flow = nf.Flow("answer_first")

    @flow.node
    async def review(topic: str) -> str:
        return await nf.ask(f"OK {topic}?", options=["yes", "no"])

    @flow.node
    def publish(review: str) -> str:
        # While the resumed row runs: the store already holds the answer (a crash now would not lose it).
        run = nf.load_run(db, str(df.loc[0, "run_id"]))
        seen.append(repr(run.answers))
        return review

    db = tmp_path / "runs.db"
    df = flow.batch([{"topic": "a"}], store=db, progress=False)
    assert list(df["status"]) == ["paused"]
    flow.answer(df, {0: "yes"})
    assert seen == ["{'review#0': 'yes'}"] and df.loc[0, "publish"] == "yes"
    assert nf.load_run(db, str(df.loc[0, "run_id"])).status is nf.RunStatus.SUCCEEDED


def test_answers_update_the_experiments_counts_and_summary(tmp_path: Path) -> None:
    """Before, the experiment record kept the counts and per-variant summary of the batch's end: with every
    paused row answered (in a new process), nf.experiments still said 1 succeeded and 2 not finished, and the
    viewer's summary still counted 2 paused rows and no score of theirs."""
    db = _batch(tmp_path)
    cols = ["rows", "succeeded", "failed", "not_finished"]
    assert nf.experiments(db)[cols].values.tolist() == [[3, 1, 0, 2]]
    for row, answer, counts in [(1, "approve", [3, 2, 0, 1]), (2, "reject", [3, 3, 0, 0])]:  # each in a new process
        _run(
            tmp_path,
            f"""
            import nbflow as nf
            from approve_loaded import flow
            df = nf.load_batch({str(db)!r}, "review")
            flow.answer(df, {{{row}: {answer!r}}})
            """,
        )
        assert nf.experiments(db)[cols].values.tolist() == [counts]
    with nf.BatchStore(db) as store:
        meta = store.batch_info("review")["meta"]
    assert {k: v for k, v in meta["counts"].items() if v} == {"succeeded": 3}
    (summary,) = meta["summary"]
    assert (summary["rows"], summary["succeeded"], summary["not_finished"]) == (3, 3, 0)


def test_answering_a_row_the_batch_ran_again_since_is_refused(tmp_path: Path) -> None:
    """A resume that runs a paused row again (its scorer changed) gives it a new run. Before, answering the old
    frame's row resumed the old run and wrote it as a sixth row of the 5-row batch: nf.load_batch then held the
    row twice (one paused, one succeeded). Now the answer is refused before anything runs, naming the fix."""
    import pytest

    db = tmp_path / "runs.db"
    flow = nf.Flow("review_again")

    @flow.node
    async def verdict(draft: str) -> str:
        return await nf.ask("Publish?", options=["approve", "reject"]) if len(draft) > 6 else "approve"

    @flow.node
    def score(verdict: str) -> int:
        return int(verdict == "approve")

    drafts = [{"draft": d} for d in ("short", "a longer one", "ok")]
    old = flow.batch(drafts, store=db, experiment="A", progress=False)

    @flow.node
    def score(verdict: str) -> int:  # noqa: F811 (the edit)
        return 7 * int(verdict == "approve")

    with pytest.warns(nf.NbflowWarning, match="node 'score'"):
        new = flow.batch(drafts, store=db, experiment="A", resume=True, progress=False)
    assert new["status"].tolist() == ["succeeded", "paused", "succeeded"]
    with pytest.raises(nf.BatchError, match=r"row 1.*ran again since.*nf.load_batch"):
        flow.answer(old, {1: "approve"})
    stored = nf.load_batch(db, "A")
    assert stored["status"].tolist() == ["succeeded", "paused", "succeeded"]  # three rows, unchanged
    flow.answer(new, {1: "approve"})
    assert nf.load_batch(db, "A")["score"].tolist() == [7, 7, 7]
