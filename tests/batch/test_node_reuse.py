"""Node-level reuse of stored rows (issue 30): a scorer edit or a new scorer over a stored batch re-runs only the
scorer, fed the model's stored answers, so it makes no model call; counted by ``nbflow.testing.ChatServer``
with the real ``openai`` SDK, in this process, after a restart (a new process) and through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from nbflow.testing import ChatServer
from tests.helpers.chat_flow import chat_answer_flow

openai = pytest.importorskip("openai")

ROOT = Path(__file__).resolve().parents[2]  # (the subprocesses import tests.helpers from the repository)
VARIANTS = {"bare": "", "terse": "Answer tersely.", "steps": "Think in steps."}
CASES = [{"question": f"q{i}", "expected": f"q{i}" if i % 4 else "nope"} for i in range(40)]  # 3 x 40 = 120 rows


def eval_flow(url: str) -> nf.Flow:
    flow = chat_answer_flow("rescore", url)

    @flow.node
    def score(answer: str, expected: str) -> float:
        return float(expected in answer)

    return flow


def edit_scorer(flow: nf.Flow) -> None:
    @flow.node
    def score(answer: str, expected: str) -> float:  # the edit: partial credit for any answer
        return 1.0 if expected in answer else 0.25


@pytest.fixture
def server():
    with ChatServer() as chat:
        yield chat


def test_a_scorer_edit_over_a_stored_3x40_batch_makes_no_model_call(server, tmp_path):
    db = tmp_path / "runs.db"
    flow = eval_flow(server.base_url)
    first = flow.batch(CASES, grid={"system": VARIANTS}, store=db, experiment="baseline", progress=False)
    assert server.completions == 120 and first["status"].eq("succeeded").all()
    assert first["score"].sum() == 90  # every 4th case expects "nope"
    assert "reused" not in first.columns  # a fresh batch reuses nothing

    edit_scorer(flow)
    with pytest.warns(nf.NbflowWarning, match=r"120 of the stored rows run again because node 'score'.*120 of them"):
        again = flow.batch(
            CASES, grid={"system": VARIANTS}, store=db, experiment="baseline", resume=True, progress=False
        )
    assert server.completions == 120  # 0 model calls: the stored answers were fed to the edited scorer
    assert again["score"].sum() == 90 + 30 * 0.25  # the new scorer's numbers
    assert [list(r) for r in again["reused"]] == [["answer"]] * 120
    run = again.nbflow.run(5)
    assert run.nodes["answer"].cached and run.nodes["answer"].cache_key == f"run:{first['run_id'][5]}"
    assert run.nodes["answer"].output == first.nbflow.run(5).nodes["answer"].output
    assert not run.nodes["score"].cached and run.nodes["score"].output in (1.0, 0.25)

    # Once stored, the new scorer's rows are current: resuming again runs nothing at all.
    stored = nf.load_batch(db, "baseline")
    assert sorted(stored["score"].tolist()) == sorted(again["score"].tolist())


def test_a_new_scorer_node_in_a_new_experiment_reuses_the_baseline_with_no_model_call(server, tmp_path):
    db = tmp_path / "runs.db"
    flow = eval_flow(server.base_url)
    base = flow.batch(CASES, grid={"system": VARIANTS}, store=db, experiment="baseline", progress=False)
    assert server.completions == 120

    @flow.node
    def brevity(answer: str) -> float:  # a new scorer
        return 1.0 / (1 + len(answer.split()))

    with pytest.warns(nf.NbflowWarning, match=r"node 'brevity' \(120 rows\) is new; 120 of them run only"):
        v2 = flow.batch(CASES, grid={"system": VARIANTS}, store=db, experiment="v2", reuse="baseline", progress=False)
    assert server.completions == 120  # 0 model calls
    assert v2["brevity"].tolist() == [1.0 / 3] * 120  # "echo: qN": two words
    assert v2["score"].tolist() == base["score"].tolist()
    assert [sorted(r) for r in v2["reused"]] == [["answer", "score"]] * 120
    assert v2["system"].tolist() == base["system"].tolist()  # the variant names stay the labels
    experiments = nf.experiments(db)
    assert set(experiments["experiment"]) >= {"baseline", "v2"}
    assert len(nf.load_batch(db, "v2")) == 120  # the new experiment holds every row

    # A batch reusing one whose rows changed nothing copies them whole: still no call, every row stored.
    v3 = flow.batch(CASES, grid={"system": VARIANTS}, store=db, experiment="v3", reuse="v2", progress=False)
    assert server.completions == 120
    assert v3["brevity"].tolist() == v2["brevity"].tolist()
    assert len(nf.load_batch(db, "v3")) == 120
    assert v3.nbflow.run(0).nodes["answer"].output == base.nbflow.run(0).nodes["answer"].output


def test_rows_not_in_the_reused_batch_run_whole(server, tmp_path):
    db = tmp_path / "runs.db"
    flow = eval_flow(server.base_url)
    flow.batch(CASES[:10], grid={"system": VARIANTS}, store=db, experiment="baseline", progress=False)
    assert server.completions == 30
    more = flow.batch(CASES[:12], grid={"system": VARIANTS}, store=db, experiment="more", reuse="baseline")
    assert server.completions == 36  # the 2 new cases x 3 variants only
    assert more["reused"].map(len).tolist().count(0) == 6


def test_without_kept_runs_the_model_node_runs_again_and_says_why(server, tmp_path):
    db = tmp_path / "runs.db"
    flow = eval_flow(server.base_url)
    flow.batch(CASES[:8], grid={"system": VARIANTS}, store=db, experiment="lean", keep="none", progress=False)
    assert server.completions == 24
    edit_scorer(flow)
    with (
        pytest.warns(nf.NbflowWarning, match="node 'score' .* changed"),
        pytest.warns(nf.NbflowWarning, match=r"node 'answer' \(24 rows\) ran again although unchanged.*keep='all'"),
    ):
        flow.batch(CASES[:8], grid={"system": VARIANTS}, store=db, experiment="lean", resume=True, progress=False)
    assert server.completions == 48  # the store had only the score column: the answers had to be asked again

    # An output column is kept with the row itself: listing the model node in outputs= is enough.
    flow.batch(
        CASES[:8],
        grid={"system": VARIANTS},
        outputs=["answer", "score"],
        store=db,
        experiment="cols",
        keep="none",
        progress=False,
    )
    assert server.completions == 72

    @flow.node
    def score(answer: str, expected: str) -> float:
        return 0.5

    with pytest.warns(nf.NbflowWarning, match="24 of them run only those nodes"):
        again = flow.batch(
            CASES[:8],
            grid={"system": VARIANTS},
            outputs=["answer", "score"],
            store=db,
            experiment="cols",
            resume=True,
            keep="none",
            progress=False,
        )
    assert server.completions == 72
    assert again["score"].tolist() == [0.5] * 24


def test_retry_failed_reruns_the_failed_node_fed_the_stored_answers(server, tmp_path):
    db = tmp_path / "runs.db"
    flow = eval_flow(server.base_url)

    @flow.node
    def score(answer: str, expected: str) -> float:
        if expected == "nope":
            raise ValueError("no expected answer")
        return float(expected in answer)

    first = flow.batch(CASES, store=db, experiment="b", grid={"system": {"bare": ""}}, progress=False)
    assert server.completions == 40 and first["status"].eq("failed").sum() == 10

    @flow.node
    def score(answer: str, expected: str) -> float:  # noqa: F811  (fixed)
        return float(expected in answer)

    with pytest.warns(nf.NbflowWarning, match="changed"):
        again = flow.batch(
            CASES, store=db, experiment="b", grid={"system": {"bare": ""}}, resume=True, retry_failed=True
        )
    assert server.completions == 40
    assert again["status"].eq("succeeded").all()


def test_an_output_holding_a_secret_is_not_fed_redacted_its_node_runs_again(server, tmp_path):
    db = tmp_path / "runs.db"
    key = "sk-live-abcdef123456"
    flow = nf.Flow("secretive")
    calls = []

    @flow.node
    def header(api_key: str) -> str:
        calls.append(1)
        return f"Bearer {api_key}"

    @flow.node
    def check(header: str) -> bool:
        return header.endswith("123456")

    rows = [{"api_key": nf.Secret(key), "n": i} for i in range(3)]
    assert flow.batch(rows, store=db, batch_id="s", progress=False)["check"].all()
    assert key.encode() not in db.read_bytes()

    @flow.node
    def check(header: str) -> bool:  # noqa: F811
        return header == f"Bearer {key}"

    with pytest.warns(nf.NbflowWarning, match="node 'check' .* changed"):  # (the secret's node: by design)
        again = flow.batch(rows, store=db, batch_id="s", resume=True, progress=False)
    assert again["check"].tolist() == [True] * 3  # the real header, not "Bearer [REDACTED]"
    assert len(calls) == 6
    assert key.encode() not in db.read_bytes()


def test_reuse_needs_a_known_batch_of_the_same_flow(server, tmp_path):
    db = tmp_path / "runs.db"
    flow = eval_flow(server.base_url)
    flow.batch(CASES[:2], grid={"system": {"bare": ""}}, store=db, experiment="baseline", progress=False)
    with pytest.raises(nf.StoreError, match=r"reuse='basline'.*holds no batch.*'baseline'"):
        flow.batch(CASES[:2], grid={"system": {"bare": ""}}, store=db, experiment="v2", reuse="basline")
    with pytest.raises(nf.BatchError, match=r"reuse=.baseline. names a batch of a store; pass store="):
        flow.batch(CASES[:2], grid={"system": {"bare": ""}}, reuse="baseline")
    itself = r"this batch itself: resume=True alone continues it \(drop reuse=\)"
    with pytest.raises(nf.BatchError, match=itself):
        flow.batch(CASES[:2], grid={"system": {"bare": ""}}, store=db, experiment="baseline", reuse="baseline")
    with pytest.raises(nf.BatchError, match=itself):  # (it said "pass resume=True", given already)
        flow.batch(
            CASES[:2], grid={"system": {"bare": ""}}, store=db, experiment="baseline", reuse="baseline", resume=True
        )
    other = nf.Flow("other")

    @other.node
    def answer(question: str) -> str:
        return question

    with pytest.raises(nf.StoreError, match="is of flow 'rescore', not 'other'"):
        other.batch(CASES[:2], store=db, experiment="o", reuse="baseline", outputs=["answer"])


# --- after a restart, and through the CLI --------------------------------------------------------------
MODULE = """
import os

from tests.helpers.chat_flow import chat_answer_flow

flow = chat_answer_flow("rescore", os.environ["NBFLOW_CHAT_URL"])


@flow.node
def score(answer: str, expected: str) -> float:
    return SCORE
"""

SCRIPT = """
import json, sys, warnings
import pandas as pd
from evalflows import flow

cases = pd.read_csv("cases.csv", dtype=str)
variants = json.load(open("variants.json"))
kw = json.loads(sys.argv[1])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    df = flow.batch(cases, grid={"system": variants}, store="runs.db", progress=False, **kw)
print(json.dumps({"score": df["score"].tolist(), "status": df["status"].tolist(),
                  "reused": [list(r) for r in df["reused"]] if "reused" in df else None}))
"""


def _project(tmp_path: Path, score: str) -> None:
    (tmp_path / "evalflows.py").write_text(MODULE.replace("SCORE", score))
    (tmp_path / "script.py").write_text(SCRIPT)
    pd.DataFrame(CASES).to_csv(tmp_path / "cases.csv", index=False)
    (tmp_path / "variants.json").write_text(json.dumps(VARIANTS))


def _python(tmp_path: Path, server: ChatServer, **kw: object) -> dict:
    env = {**os.environ, "NBFLOW_CHAT_URL": server.base_url, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    p = subprocess.run(
        [sys.executable, "script.py", json.dumps(kw)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_scorer_edit_after_a_restart_makes_no_model_call(server, tmp_path):
    _project(tmp_path, "float(expected in answer)")
    first = _python(tmp_path, server, experiment="baseline")
    assert server.completions == 120 and sum(first["score"]) == 90

    _project(tmp_path, "0.5 + 0.5 * float(expected in answer)")  # the scorer edited in the module file
    again = _python(tmp_path, server, experiment="baseline", resume=True)
    assert server.completions == 120  # a new process read the answers back from the store: 0 model calls
    assert sum(again["score"]) == 90 + 30 * 0.5
    assert all(r == ["answer"] for r in again["reused"])

    v2 = _python(tmp_path, server, experiment="v2", reuse="baseline")  # nothing changed since: rows copied whole
    assert server.completions == 120 and v2["score"] == again["score"]


def _cli(tmp_path: Path, server: ChatServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "NBFLOW_CHAT_URL": server.base_url,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "nbflow", "batch", "evalflows:flow", "cases.csv", "--grid", "system=@variants.json",
         "--store", "runs.db", "--no-progress", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_a_scorer_edit_through_the_cli_with_reuse_makes_no_model_call(server, tmp_path):
    _project(tmp_path, "float(expected in answer)")
    p = _cli(tmp_path, server, "--experiment", "baseline", "-o", "base.parquet")
    assert p.returncode == 0, p.stderr
    assert server.completions == 120

    _project(tmp_path, "1.0 if expected in answer else 0.25")
    p = _cli(tmp_path, server, "--experiment", "v2", "--reuse", "baseline", "-o", "v2.parquet")
    assert p.returncode == 0, p.stderr
    assert server.completions == 120  # 0 model calls
    v2 = pd.read_parquet(tmp_path / "v2.parquet")
    assert v2["score"].sum() == 90 + 30 * 0.25
    assert "score" in p.stderr and "changed" in p.stderr  # the command says what ran again and why

    p = _cli(tmp_path, server, "--experiment", "v3", "--reuse", "nosuch")
    assert p.returncode != 0 and "holds no batch" in p.stderr and server.completions == 120


def test_the_reused_nodes_show_in_the_explorer(server, tmp_path):
    from nbflow._batch.explore import query

    db = tmp_path / "runs.db"
    flow = eval_flow(server.base_url)
    flow.batch(CASES[:4], grid={"system": {"bare": ""}}, store=db, experiment="baseline", progress=False)
    edit_scorer(flow)
    with pytest.warns(nf.NbflowWarning):
        again = flow.batch(CASES[:4], grid={"system": {"bare": ""}}, store=db, experiment="baseline", resume=True)
    state = query(again, {})
    assert "reused" in state["columns"]
    assert state["columns"].index("reused") > state["columns"].index("status")
    assert {r["reused"] for r in state["rows"]} == {"answer"}


def test_a_plain_resume_after_an_interruption_adds_no_reused_column(server, tmp_path):
    db = tmp_path / "runs.db"
    flow = eval_flow(server.base_url)
    flow.batch(CASES[:4], grid={"system": {"bare": ""}}, store=db, experiment="b", progress=False)
    again = flow.batch(CASES[:6], grid={"system": {"bare": ""}}, store=db, experiment="b", resume=True)
    assert "reused" not in again.columns
    assert server.completions == 6


def test_a_rescored_rows_usage_keeps_what_its_stored_model_calls_cost(tmp_path):
    db = tmp_path / "runs.db"
    flow = nf.Flow("costed")

    @flow.node
    def answer(question: str) -> str:
        nf.usage(input_tokens=10, output_tokens=2, cost=0.5)  # the model call's bill
        return question.upper()

    @flow.node
    def score(answer: str) -> float:
        return 1.0

    first = flow.batch(CASES[:3], store=db, batch_id="c", progress=False)
    assert first["cost"].tolist() == [0.5] * 3

    @flow.node
    def score(answer: str) -> float:  # noqa: F811
        nf.usage(input_tokens=1, output_tokens=1, cost=0.01)  # an LLM judge now
        return 0.5

    with pytest.warns(nf.NbflowWarning, match="node 'score'"):
        again = flow.batch(CASES[:3], store=db, batch_id="c", resume=True, progress=False)
    assert again["input_tokens"].tolist() == [11] * 3  # the stored answer's tokens and the judge's
    assert again["cost"].tolist() == pytest.approx([0.51] * 3)
    assert [list(r) for r in again["reused"]] == [["answer"]] * 3


def test_rows_with_a_column_named_reused_keep_their_values(tmp_path):
    db = tmp_path / "runs.db"
    flow = nf.Flow("own_column")

    @flow.node
    def answer(question: str) -> str:
        return question.upper()

    @flow.node
    def score(answer: str) -> float:
        return 1.0

    rows = [{"question": f"q{i}", "reused": f"mine-{i}"} for i in range(3)]
    flow.batch(rows, store=db, batch_id="o", progress=False)

    @flow.node
    def score(answer: str) -> float:  # noqa: F811
        return 0.5

    with pytest.warns(nf.NbflowWarning, match="3 of them run only those nodes"):
        again = flow.batch(rows, store=db, batch_id="o", resume=True, progress=False)
    assert again["reused"].tolist() == ["mine-0", "mine-1", "mine-2"]
    assert again["score"].tolist() == [0.5] * 3
    assert again.nbflow.run(0).nodes["answer"].cached  # the run records still say what was reused


def test_a_scorer_factorys_changed_setting_re_scores_on_reuse_and_resume(tmp_path):
    """A ready-made scorer keeps its settings (``tolerance=``, ``pattern``) in its function's closure: changing
    one is editing the scorer. Before, the closure was no part of the fingerprint: reuse= and resume=True fed
    the stored False to both scores (silently stale numbers) although the new settings say True."""
    from nbflow import scorers

    db = tmp_path / "runs.db"
    calls: list[str] = []

    def make(tolerance: float, pattern: str) -> nf.Flow:
        flow = nf.Flow("settings")

        @flow.node
        def answer(question: str) -> str:
            calls.append(question)
            return "about 10.4"

        scorers.numeric(flow, output="answer", target="expected", tolerance=tolerance)
        scorers.regex(flow, pattern, output="answer")
        return flow

    cases = [{"question": "q0", "expected": 10}, {"question": "q1", "expected": 12}]
    first = make(0.01, "^x").batch(cases, store=db, experiment="strict", progress=False)
    assert first["numeric"].tolist() == [False, False] and first["regex"].tolist() == [False, False]
    assert len(calls) == 2

    with pytest.warns(nf.NbflowWarning, match=r"nodes 'numeric' \(2 rows\), 'regex' \(2 rows\) changed"):
        loose = make(1.0, "about").batch(cases, store=db, experiment="loose", reuse="strict", progress=False)
    assert loose["numeric"].tolist() == [True, False]  # 10.4 is within 1.0 of 10, not of 12
    assert loose["regex"].tolist() == [True, True]
    assert loose["reused"].tolist() == [["answer"], ["answer"]] and len(calls) == 2  # no model call

    with pytest.warns(nf.NbflowWarning, match=r"'numeric' \(2 rows\), 'regex' \(2 rows\) changed"):
        resumed = make(1.0, "about").batch(cases, store=db, experiment="strict", resume=True, progress=False)
    assert resumed["numeric"].tolist() == [True, False] and resumed["regex"].tolist() == [True, True]
    assert len(calls) == 2
    assert nf.load_batch(db, "strict")["numeric"].tolist() == [True, False]

    # the same settings again: nothing changed, every row is taken whole
    same = make(1.0, "about").batch(cases, store=db, experiment="same", reuse="loose", progress=False)
    assert same["reused"].tolist() == [["answer", "numeric", "regex"]] * 2 and len(calls) == 2


def test_a_paused_row_of_the_reused_batch_asks_again_in_the_new_one(tmp_path):
    """Before, a row paused in batch A was copied whole into batch B by reuse="A", sharing A's paused run:
    answering B's row resumed A's run (A's stored run then held B's answer while A's row still said paused), and
    answering A's row afterwards raised a raw ResumeConflictError from the task group. Now B's row runs again
    from its paused node, fed what ran before it (no model call), and is paused in a run of its own."""
    db = tmp_path / "runs.db"
    drafted: list[str] = []
    flow = nf.Flow("review_reused")

    @flow.node
    def draft(topic: str) -> str:
        drafted.append(topic)  # (the model call)
        return f"a post about {topic}"

    @flow.node
    async def verdict(draft: str, topic: str) -> str:
        if topic.startswith("auto"):
            return "approve"
        return await nf.ask(f"Publish {draft!r}?", options=["approve", "reject"])

    rows = [{"topic": t} for t in ("auto-1", "tea", "coffee")]
    a = flow.batch(rows, store=db, experiment="A", progress=False)
    assert a["status"].tolist() == ["succeeded", "paused", "paused"] and len(drafted) == 3

    b = flow.batch(rows, store=db, experiment="B", reuse="A", progress=False)
    assert b["status"].tolist() == ["succeeded", "paused", "paused"]
    assert len(drafted) == 3  # fed the stored drafts: no model call
    assert b["reused"].tolist() == [["draft", "verdict"], ["draft"], ["draft"]]
    assert b["run_id"][0] == a["run_id"][0]  # the finished row is copied whole
    assert set(b["run_id"][1:]).isdisjoint(a["run_id"])  # the paused ones have runs of their own

    flow.answer(b, {1: "approve", 2: "reject"})
    assert b["verdict"].tolist() == ["approve", "approve", "reject"]
    assert nf.load_batch(db, "A")["status"].tolist() == ["succeeded", "paused", "paused"]  # A untouched
    assert nf.load_run(db, str(a["run_id"][1])).status.name == "PAUSED"

    again = nf.load_batch(db, "A")
    flow.answer(again, {1: "reject", 2: "reject"})
    assert again["verdict"].tolist() == ["approve", "reject", "reject"]
    assert nf.load_batch(db, "B")["verdict"].tolist() == ["approve", "approve", "reject"]  # B untouched
    assert len(drafted) == 3
