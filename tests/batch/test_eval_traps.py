"""The silent eval traps of issue 17, each a test that failed before: stale resumes, repeats collapsed by
the cache, misspelt grid keys, rows matched by position."""

from __future__ import annotations

import collections
import shutil
import warnings
from pathlib import Path

import pytest

import nbflow as nf

RESOURCES = Path(__file__).parent.parent / "resources"
CALLS: collections.Counter[str] = collections.Counter()  # not plain data: not part of any fingerprint
ROWS = [{"question": q, "expected": q.upper()} for q in ("ab", "cd", "ef", "gh")]
PREFIX = ""


def eval_flow() -> nf.Flow:
    flow = nf.Flow("eval")

    @flow.node
    def answer(question: str) -> str:
        CALLS["answer"] += 1
        return PREFIX + question.upper()

    @flow.node
    def score(answer: str, expected: str) -> float:
        CALLS["score"] += 1
        return float(answer == expected)

    @flow.node
    def length(answer: str) -> int:  # not an output of the batches below: never planned
        return len(answer)

    return flow


def redefine_score(flow: nf.Flow) -> None:
    @flow.node
    def score(answer: str, expected: str) -> float:  # the edit: partial credit
        CALLS["score"] += 1
        return 0.5 + 0.5 * float(answer == expected)


# --- 1. resume after an edit ---------------------------------------------------------------------------
def test_resume_after_editing_a_node_reruns_the_rows_that_depend_on_it_and_says_why(tmp_path):
    db = tmp_path / "s.db"
    flow = eval_flow()
    first = flow.batch(ROWS, store=db, outputs=["score"], batch_id="b")
    assert first["score"].tolist() == [1.0] * 4

    redefine_score(flow)
    CALLS.clear()
    with pytest.warns(nf.NbflowWarning, match=r"4 of the stored rows run again because node 'score' \(4 rows\)"):
        again = flow.batch(ROWS, store=db, outputs=["score"], batch_id="b", resume=True)
    assert again["score"].tolist() == [1.0] * 4  # 0.5 + 0.5: the new code's numbers, not the stored ones
    assert CALLS == {"score": 4}  # only the edited node ran: 'answer' was fed its stored output (issue 30)

    CALLS.clear()  # now the store holds the new version: nothing runs, nothing is said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flow.batch(ROWS, store=db, outputs=["score"], batch_id="b", resume=True)
    assert CALLS == {}


def test_the_stale_scores_of_the_issue_are_not_returned(tmp_path):
    db = tmp_path / "s.db"
    flow = eval_flow()

    @flow.node
    def score(answer: str, expected: str) -> float:
        return float(answer == expected)

    flow.batch(ROWS, store=db, outputs=["score"], batch_id="b")

    @flow.node  # the edit the issue made: a score that differs on every row
    def score(answer: str, expected: str) -> float:  # noqa: F811
        return 0.25

    with pytest.warns(nf.NbflowWarning, match="changed since"):
        again = flow.batch(ROWS, store=db, outputs=["score"], batch_id="b", resume=True)
    assert again["score"].tolist() == [0.25] * 4


def test_editing_a_node_the_rows_do_not_run_reuses_every_row(tmp_path):
    db = tmp_path / "s.db"
    flow = eval_flow()
    flow.batch(ROWS, store=db, outputs=["score"], batch_id="b")

    @flow.node
    def length(answer: str) -> int:  # edited, but not planned for outputs=["score"]
        return -1

    CALLS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = flow.batch(ROWS, store=db, outputs=["score"], batch_id="b", resume=True)
    assert CALLS == {}
    assert again["status"].tolist() == ["succeeded"] * 4


def test_a_global_the_node_reads_counts_as_an_edit(tmp_path):
    global PREFIX
    db = tmp_path / "s.db"
    flow = eval_flow()
    flow.batch(ROWS, store=db, outputs=["score"], batch_id="b")
    PREFIX = "x"
    try:
        with pytest.warns(nf.NbflowWarning, match="node 'answer' \\(4 rows\\)"):
            again = flow.batch(ROWS, store=db, outputs=["score"], batch_id="b", resume=True)
    finally:
        PREFIX = ""
    assert again["score"].tolist() == [0.0] * 4


def test_strict_resume_refuses_naming_the_changed_nodes(tmp_path):
    db = tmp_path / "s.db"
    flow = eval_flow()
    flow.batch(ROWS, store=db, outputs=["score"], batch_id="b")
    redefine_score(flow)
    with pytest.raises(nf.StoreError, match=r"4 stored rows were computed by another version of node 'score'"):
        flow.batch(ROWS, store=db, outputs=["score"], batch_id="b", resume="strict")
    with pytest.raises(nf.BatchError, match="True, False or 'strict'"):
        flow.batch(ROWS, store=db, outputs=["score"], batch_id="b", resume="yes")


def test_a_partly_resumed_edit_keeps_the_old_rows_marked_as_old(tmp_path):
    """Rows stored by the old code stay "old" until they ran again, even after the new code stored rows."""
    db = tmp_path / "s.db"
    flow = eval_flow()
    flow.batch(ROWS, store=db, outputs=["score"], batch_id="b")
    redefine_score(flow)
    with pytest.warns(nf.NbflowWarning):  # the new code runs rows 0-1 only (a new row set, same batch)
        flow.batch(ROWS[:2], store=db, outputs=["score"], batch_id="b", resume=True)
    CALLS.clear()
    with pytest.warns(nf.NbflowWarning, match="2 of the stored rows run again"):
        again = flow.batch(ROWS, store=db, outputs=["score"], batch_id="b", resume=True)
    assert CALLS["score"] == 2
    assert again["score"].tolist() == [1.0] * 4


# --- 2. repeats and grid keys ------------------------------------------------------------------------------
def sampling_flow(cache: object = "per-sample") -> nf.Flow:
    flow = nf.Flow("sampling", cache=True)

    @flow.node(cache=cache)
    def sample_answer(question: str) -> str:
        CALLS["sample"] += 1
        return f"{question}-{CALLS['sample']}"

    @flow.node
    def grade(sample_answer: str) -> int:
        CALLS["grade"] += 1
        return len(sample_answer)

    return flow


def test_repeats_make_distinct_calls_even_with_the_cache_on():
    CALLS.clear()
    flow = sampling_flow()
    df = flow.batch(ROWS, repeats=3, outputs=["sample_answer", "grade"])
    assert len(df) == 12
    assert df["sample"].tolist() == [0, 1, 2] * 4
    assert list(df.columns[:3]) == ["question", "expected", "sample"]
    assert CALLS["sample"] == 12  # 4 cases x 3 samples, not 4
    assert df["sample_answer"].nunique() == 12

    again = flow.batch(
        ROWS, repeats=3, outputs=["sample_answer", "grade"]
    )  # the cache holds one entry per sample: no new calls
    assert CALLS["sample"] == 12
    assert again["sample_answer"].tolist() == df["sample_answer"].tolist()


def test_repeats_with_every_node_declared_deterministic_is_refused():
    flow = sampling_flow(cache=True)

    @flow.node(cache=True)
    def grade(sample_answer: str) -> int:
        return len(sample_answer)

    with pytest.raises(nf.BatchError, match=r"declared deterministic .*cache='per-sample'"):
        flow.batch(ROWS, repeats=3)
    with pytest.raises(nf.BatchError, match="positive int"):
        flow.batch(ROWS, repeats=0)


def test_a_repeat_grid_key_is_refused_and_points_to_repeats():
    flow = sampling_flow()
    with pytest.raises(nf.BatchError, match=r"grid key 'repeat' is not an input .* use repeats=N"):
        flow.batch(ROWS, grid={"repeat": [1, 2, 3]})


def test_a_misspelt_grid_key_is_an_error_with_did_you_mean():
    flow = nf.Flow("variants")

    @flow.node
    def reply(question: str, variant: str = "default") -> str:
        return f"{variant}:{question}"

    with pytest.raises(nf.BatchError, match=r"grid key 'varaint' is not an input of flow 'variants' \(did you mean"):
        flow.batch(ROWS, grid={"varaint": ["a", "b"]})
    ok = flow.batch(ROWS, grid={"note": ["x"]}, labels=["note"])  # declared labels are fine
    assert ok["note"].tolist() == ["x"] * 4
    ok = flow.batch(ROWS, labels={"run": "baseline"})
    assert ok["run"].tolist() == ["baseline"] * 4
    with pytest.raises(nf.FlowDefinitionError, match="did you mean 'per-sample'"):
        flow.node(lambda question: question, name="other", cache="per_sample")


# --- 3. rows matched by content ----------------------------------------------------------------------------
def echo_flow() -> nf.Flow:
    flow = nf.Flow("echo")

    @flow.node
    def echo(question: str) -> str:
        CALLS["echo"] += 1
        return f"out-{question}-{CALLS['echo']}"

    return flow


def test_resumed_rows_given_in_another_order_get_their_own_results(tmp_path):
    db = tmp_path / "s.db"
    rows = [{"question": f"q{i}"} for i in range(10)]
    flow = echo_flow()
    first = flow.batch(rows, store=db, batch_id="b")
    CALLS.clear()
    again = flow.batch(rows[::-1], store=db, batch_id="b", resume=True)
    assert CALLS == {}
    assert again["echo"].tolist() == first["echo"].tolist()[::-1]
    assert all(e.startswith(f"out-{q}-") for q, e in zip(again["question"], again["echo"], strict=True))


def test_duplicated_rows_each_keep_their_own_result(tmp_path):
    db = tmp_path / "s.db"
    rows = [{"question": "a"}, {"question": "b"}, {"question": "a"}]
    flow = echo_flow()
    CALLS.clear()
    first = flow.batch(rows, store=db, batch_id="b")
    a1, b, a2 = first["echo"].tolist()
    assert a1 != a2  # two runs of the same case
    again = flow.batch([rows[1], rows[0], rows[2], rows[0]], store=db, batch_id="b", resume=True)
    assert again["echo"].tolist()[:3] == [b, a1, a2]  # occurrences in order, never swapped or merged
    assert again["echo"].tolist()[3].startswith("out-a-")  # a third "a": a new case, it ran
    assert CALLS["echo"] == 4


def test_a_store_of_schema_1_is_migrated_and_its_rows_resume_by_content(tmp_path):
    for f in RESOURCES.glob("legacy_batch*"):
        shutil.copy(f, tmp_path / f.name)
    batch_id = (tmp_path / "legacy_batch_id.txt").read_text()
    db = tmp_path / "legacy_batch.db"
    flow = nf.Flow("legacy_batch")

    @flow.node
    def ratio(topic: str) -> float:
        CALLS["ratio"] += 1
        return -1.0

    CALLS.clear()
    trusted = nf.BatchStore(db, allow_pickle=True)  # nbflow 0.1 wrote unsigned pickles: opened only when trusted
    with pytest.raises(nf.StoreError, match="did not record node fingerprints"):
        flow.batch([{"topic": "bb"}, {"topic": "a"}], store=trusted, batch_id=batch_id, resume="strict")
    with pytest.warns(nf.NbflowWarning, match="before nbflow recorded node fingerprints"):
        df = flow.batch([{"topic": "bb"}, {"topic": "a"}], store=trusted, batch_id=batch_id, resume=True)
    trusted.close()
    from fractions import Fraction

    assert CALLS == {}
    assert df["ratio"].tolist() == [Fraction(2, 3), Fraction(1, 3)]  # by content, though given reversed


def test_a_store_shows_the_rows_of_the_latest_call_in_its_order_and_loses_none(tmp_path):
    db = tmp_path / "s.db"
    rows = [{"question": f"q{i}"} for i in range(4)]
    flow = echo_flow()
    flow.batch(rows, store=db, batch_id="b")
    new = [{"question": "new"}, rows[2], rows[0]]  # a new row at index 0, where q0 was stored
    flow.batch(new, store=db, batch_id="b", resume=True)
    loaded = nf.load_batch(db, "b")
    assert len(loaded) == 5  # q1 and q3 are kept though this call did not list them
    assert sorted(loaded["question"]) == ["new", "q0", "q1", "q2", "q3"]
    where = dict(zip(loaded["question"], loaded.index, strict=True))
    assert [where["new"], where["q2"], where["q0"]] == [0, 1, 2]  # the latest call's positions
