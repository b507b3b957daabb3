"""The ``nbflow`` command through real subprocesses: run, batch (with SIGINT and --resume), show, resume, errors."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

SECRET = "sk-live-7f3a9c1e"

FLOWS = """
import asyncio
import os
from pathlib import Path

import nbflow as nf

flow = nf.Flow("qa")

@flow.node
def retrieve(question: str, k: int = 2) -> list[str]:
    return [f"doc {i} about {question}" for i in range(k)]

@flow.node
async def answer(question: str, retrieve: list[str], api_key: str = "none") -> str:
    log = os.environ.get("NBFLOW_TEST_LOG")
    if log:
        with open(log, "a") as f:
            f.write(question + "\\n")
    await asyncio.sleep(float(os.environ.get("NBFLOW_TEST_SLEEP", "0")))
    if question.startswith("boom"):
        raise ValueError(f"upstream rejected key {api_key}")
    return f"{question}: {len(retrieve)} docs"

@flow.node
def score(answer: str, expected: str = "") -> float:
    return 1.0 if expected and expected in answer else 0.0

other = nf.Flow("other")
"""

APPROVAL = """
import nbflow as nf

flow = nf.Flow("approval")

@flow.node
def draft(topic: str) -> str:
    return f"a post about {topic}"

@flow.node
async def review(draft: str) -> str:
    return await nf.ask(f"Publish {draft!r}?", options=["approve", "reject"])

@flow.node
def publish(review: str, draft: str) -> str:
    return f"{review}: {draft}"
"""


def nbflow(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nbflow", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    (tmp_path / "approval.py").write_text(APPROVAL)
    return tmp_path


# --- nbflow run ------------------------------------------------------------------------------------
def test_run_a_module_prints_the_tree_and_exits_0(project: Path) -> None:
    p = nbflow(project, "run", "flows:flow", "--input", "question=why", "-i", "k=3", "-i", "expected=why")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "of flow 'qa': SUCCEEDED" in lines[0]
    assert any("retrieve" in ln and "'doc 2 about why'" in ln for ln in lines)  # k=3 arrived as an int
    assert any("answer" in ln and "'why: 3 docs'" in ln for ln in lines)
    assert any("score" in ln and "1.0" in ln for ln in lines)


def test_the_console_script_runs_a_py_file(project: Path) -> None:
    script = Path(sys.executable).with_name("nbflow")
    p = subprocess.run(
        [str(script), "run", str(project / "flows.py") + ":flow", "-i", "question=hi"],
        capture_output=True, text=True, cwd="/", timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "SUCCEEDED" in p.stdout


def test_a_failed_run_names_the_node_shows_its_traceback_and_never_echoes_the_secret(project: Path) -> None:
    p = nbflow(project, "run", "flows.py:flow", "-i", "question=boom", "-i", f"api_key={SECRET}")
    assert p.returncode == 1
    assert "FAILED" in p.stdout
    assert "node 'answer' failed: ValueError: upstream rejected key [REDACTED]" in p.stderr
    assert 'raise ValueError(f"upstream rejected key {api_key}")' in p.stderr  # the user's own frame
    assert SECRET not in p.stdout + p.stderr


def test_a_secret_input_from_the_environment_is_never_checkpointed(project: Path) -> None:
    p = nbflow(
        project, "run", "flows:flow", "-i", "question=hi", "--secret", "api_key=OPENAI_KEY", "--store", "runs.db",
        env={"OPENAI_KEY": SECRET},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    files = [f for f in project.iterdir() if f.name.startswith("runs.db")]
    assert files and all(SECRET.encode() not in f.read_bytes() for f in files)
    assert SECRET not in p.stdout + p.stderr


def test_run_a_notebook(project: Path) -> None:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# a notebook flow"]},
        {
            "cell_type": "code",
            "metadata": {},
            "source": ["%matplotlib inline\n", "import nbflow as nf\n", "nbf = nf.Flow('nb')\n"],
        },
        {
            "cell_type": "code",
            "metadata": {},
            "source": "@nbf.node\nasync def shout(word: str) -> str:\n    return word.upper()\n",
        },
        {
            "cell_type": "code",
            "metadata": {},
            "source": "run = await nbf.arun(word='warmup')\ndisplay(run)\nprint('cell output')\n",
        },
        {
            "cell_type": "code",
            "metadata": {"tags": ["nbflow-skip"]},
            "source": "raise RuntimeError('skipped cell ran')\n",
        },
        {"cell_type": "code", "metadata": {}, "source": "!echo shell\n"},
    ]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (project / "flow.ipynb").write_text(json.dumps(nb))
    p = nbflow(project, "run", "flow.ipynb:nbf", "-i", "word=hello")
    assert p.returncode == 0, p.stderr
    assert "'HELLO'" in p.stdout
    assert "cell output" in p.stderr and "cell output" not in p.stdout  # stdout is the result only
    assert "skipped 2 IPython magic or shell line(s)" in p.stderr


def test_a_paused_run_is_shown_and_resumed_from_the_store(project: Path) -> None:
    p = nbflow(project, "run", "approval.py", "-i", "topic=cats", "--store", "hitl.db")
    assert p.returncode == 3, p.stderr
    assert "question review#0: Publish 'a post about cats'? options: approve, reject" in p.stdout
    run_id = p.stdout.split()[1]
    assert f"nbflow resume {project / 'hitl.db'} {run_id} --answer ANSWER" in p.stderr

    listed = nbflow(project, "show", "hitl.db")
    assert listed.returncode == 0
    assert any(run_id in ln and "approval" in ln and "paused" in ln for ln in listed.stdout.splitlines())

    no_answer = nbflow(project, "resume", "hitl.db", run_id)
    assert no_answer.returncode == 2
    assert "waits for an answer" in no_answer.stderr and "[approve/reject]" in no_answer.stderr
    wrong = nbflow(project, "resume", "hitl.db", run_id, "--answer", "maybe")
    assert wrong.returncode == 2
    assert "takes one of 'approve', 'reject', got 'maybe'" in wrong.stderr

    # From another folder: the flow is found where `nbflow run` loaded it.
    done = nbflow(project.parent, "resume", str(project / "hitl.db"), run_id, "--answer", "approve")
    assert done.returncode == 0, done.stderr
    assert "'approve: a post about cats'" in done.stdout

    shown = nbflow(project, "show", "hitl.db", run_id)
    assert shown.returncode == 0
    assert "SUCCEEDED" in shown.stdout and "'approve: a post about cats'" in shown.stdout
    again = nbflow(project, "resume", "hitl.db", run_id, "-a", "approve")
    assert again.returncode == 2
    assert "not PAUSED" in again.stderr


# --- nbflow batch ----------------------------------------------------------------------------------
def test_batch_from_csv_to_parquet_with_a_store(project: Path) -> None:
    pd.DataFrame(
        {"q": ["why", "boom 1", "007"], "expected": ["why", "x", "007"], "api_key": [SECRET, SECRET, SECRET]}
    ).to_csv(project / "cases.csv", index=False)
    (project / "ks.json").write_text("[1, 2]")
    p = nbflow(
        project, "batch", "flows:flow", "cases.csv", "--columns", "q=question", "--grid", "k=@ks.json",
        "--store", "runs.db", "-o", "results.parquet", "--concurrency", "4", "--outputs", "answer,score",
    )  # fmt: skip
    assert p.returncode == 1, p.stderr  # two rows failed
    frame = pd.read_parquet(project / "results.parquet")
    assert len(frame) == 6
    assert frame["status"].tolist().count("succeeded") == 4
    assert list(frame["k"]) == [1, 2, 1, 2, 1, 2]
    ok = frame[frame["q"] == "007"]
    assert list(ok["answer"]) == ["007: 1 docs", "007: 2 docs"]  # "007" stayed text, not the number 7
    assert list(ok["score"]) == [1.0, 1.0]
    assert set(frame["api_key"]) == {"[REDACTED]"}
    assert set(frame.loc[frame["status"] == "failed", "error_message"]) == {"upstream rejected key [REDACTED]"}
    assert SECRET.encode() not in (project / "results.parquet").read_bytes()
    assert "batch of flow 'qa': 6 rows (4 succeeded, 2 failed)" in p.stdout
    assert "latency_p50" in p.stdout and "score_mean" in p.stdout
    assert SECRET not in p.stdout + p.stderr

    listed = nbflow(project, "show", "runs.db")
    batch_id = frame.attrs.get("batch_id") or next(
        ln.split()[0] for ln in listed.stdout.splitlines() if ln.startswith("qa-")
    )
    assert any(ln.startswith(batch_id) and "6/6" in ln for ln in listed.stdout.splitlines())
    assert "runs kept by batch rows" in listed.stdout
    assert "run_id" not in listed.stdout  # the rows' runs are not listed one by one among the runs
    shown = nbflow(project, "show", "runs.db", batch_id)
    assert shown.returncode == 0
    assert f"experiment {batch_id}: 6 finished rows (4 succeeded, 2 failed)" in shown.stdout
    failed_run = next(rid for rid, st in zip(frame["run_id"], frame["status"], strict=True) if st == "failed")
    assert f"(run {failed_run}): node 'answer' failed: ValueError" in shown.stdout
    row_run = nbflow(project, "show", "runs.db", failed_run)  # a batch row's run opens as a tree
    assert row_run.returncode == 0, row_run.stderr
    assert "✗ answer" in row_run.stdout and SECRET not in row_run.stdout


def _stored_rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM batch_rows").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_sigint_mid_batch_keeps_finished_rows_then_resume_runs_only_the_rest(project: Path) -> None:
    n = 40
    pd.DataFrame({"question": [f"q{i:02d}" for i in range(n)]}).to_json(
        project / "cases.jsonl", orient="records", lines=True
    )
    log = project / "calls.log"
    env = {**os.environ, "NO_COLOR": "1", "NBFLOW_TEST_LOG": str(log), "NBFLOW_TEST_SLEEP": "0.5"}
    args = [
        sys.executable,
        "-m",
        "nbflow",
        "batch",
        "flows:flow",
        "cases.jsonl",
        "--store",
        "runs.db",
        "-o",
        "out.csv",
        "--concurrency",
        "4",
    ]
    proc = subprocess.Popen(args, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _stored_rows(project / "runs.db") < 8:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the batch never stored 8 rows"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    stored = _stored_rows(project / "runs.db")
    assert 8 <= stored < n
    assert f"interrupted: {stored} of {n} rows finished" in err
    assert "--resume" in err and "nbflow batch flows:flow cases.jsonl" in err
    partial = pd.read_csv(project / "out.csv")
    assert (partial["status"] == "succeeded").sum() == stored
    assert set(partial["status"]) <= {"succeeded", "cancelled", "pending"}
    first_calls = log.read_text().split()
    finished_first = set(partial.loc[partial["status"] == "succeeded", "question"])

    log.unlink()
    p = subprocess.run([*args, "--resume"], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    second_calls = log.read_text().split()
    assert not finished_first & set(second_calls)  # finished rows were not run again
    assert set(second_calls) == {f"q{i:02d}" for i in range(n)} - finished_first
    assert len(first_calls) + len(second_calls) < 2 * n
    final = pd.read_csv(project / "out.csv")
    assert list(final["question"]) == [f"q{i:02d}" for i in range(n)]
    assert set(final["status"]) == {"succeeded"}
    assert f"{n} rows ({n} succeeded)" in p.stdout


def test_the_progress_bar_on_a_terminal(project: Path) -> None:
    import pty

    pd.DataFrame({"question": [f"q{i}" for i in range(12)]}).to_csv(project / "cases.csv", index=False)
    env = {**os.environ, "NBFLOW_TEST_SLEEP": "0.1", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbflow", "batch", "flows:flow", "cases.csv", "--concurrency", "2"],
        cwd=project, env=env, stdin=child, stdout=subprocess.DEVNULL, stderr=child,
    )  # fmt: skip
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(main)
    screen = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "12/12" in screen and "━" in screen  # rich's bar, redrawn in place
    assert "rows/s" in screen


# --- errors -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "the following arguments are required: COMMAND"),
        (("run",), "the following arguments are required: PATH:FLOW"),
        (("run", "nope.py:flow"), "no such file: 'nope.py'"),
        (("run", "nomodule:flow"), "no module named 'nomodule'"),
        (("run", "flows:flw", "-i", "question=x"), "flows:flw is no such name (did you mean 'flow'?)"),
        (
            ("run", "flows", "-i", "question=x"),
            "flows defines 2 flows (flows:flow, flows:other); name one as PATH:FLOW",
        ),
        (("run", "flows:flow", "-i", "question"), "--input 'question': expected NAME=VALUE"),
        (
            ("run", "flows:flow", "-i", "k=3"),
            "missing required input: 'question' (needed by 'retrieve', 'answer'). Pass --input question=..., or give",
        ),
        (("run", "flows:flow", "-i", "question=x", "-i", "k=many"), "node 'retrieve', parameter 'k', got 'many'"),
        (("run", "flows:flow", "-i", "question:={bad"), "input 'question': not valid JSON"),
        (
            ("run", "flows:flow", "--secret", "api_key=NBFLOW_NOT_SET"),
            "environment variable 'NBFLOW_NOT_SET' is not set",
        ),
        (("batch", "flows:flow", "cases.txt"), "unknown format '.txt'"),
        (("batch", "flows:flow", "missing.csv"), "no such cases file: 'missing.csv'"),
        (("batch", "flows:flow", "c.csv", "--resume"), "--resume needs --store"),
        (("batch", "flows:flow", "c.csv", "-o", "out.xlsx"), "-o 'out.xlsx': unknown format"),
        (("batch", "flows:flow", "c.csv", "--concurrency", "x"), "argument --concurrency: invalid int value: 'x'"),
        (("show", "nowhere.db"), "no store at 'nowhere.db': the file does not exist"),
        (("show", "."), "no store at '.': it is a folder: give the store file in it"),
        (("resume", "nowhere.db", "abc", "--answer", "y"), "no store at 'nowhere.db'"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(project: Path, args: tuple[str, ...], message: str) -> None:
    (project / "c.csv").write_text("question\nhi\n")
    (project / "cases.txt").write_text("question\nhi\n")
    p = nbflow(project, *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert not (project / "nowhere.db").exists()  # show/resume never create a store


def test_a_module_that_raises_while_loading_shows_its_traceback(project: Path) -> None:
    (project / "broken.py").write_text("import nbflow as nf\nflow = nf.Flow('b')\n1 / 0\n")
    p = nbflow(project, "run", "broken.py:flow")
    assert p.returncode == 2
    assert (
        p.stderr.splitlines()[0]
        == "nbflow run: error: loading " + str(project / "broken.py") + " failed: ZeroDivisionError: division by zero"
    )
    assert "line 3" in p.stderr


@pytest.mark.parametrize("command", [(), ("run",), ("batch",), ("show",), ("resume",)])
def test_help_everywhere(project: Path, command: tuple[str, ...]) -> None:
    p = nbflow(project, *command, "--help")
    assert p.returncode == 0
    assert p.stdout.startswith("usage: nbflow")


def test_a_secret_given_on_the_command_line_is_masked_in_errors(project: Path) -> None:
    p = nbflow(project, "run", "flows:flow", "-i", "question=x", "-i", f"k={SECRET}", "-i", f"api_key={SECRET}")
    assert p.returncode == 2
    assert "got '[REDACTED]'" in p.stderr
    assert SECRET not in p.stderr + p.stdout


def test_python_dash_m_and_version(project: Path) -> None:
    p = nbflow(project, "--version")
    assert p.returncode == 0
    assert p.stdout.startswith("nbflow ")


def test_inputs_from_files_json_and_a_deadline(project: Path) -> None:
    (project / "inputs.json").write_text(json.dumps({"question": "from file", "k": 1}))
    (project / "q.txt").write_text("from a text file")
    p = nbflow(project, "run", "flows:flow", "--inputs", "inputs.json", "-i", "k:=2", "--target", "retrieve")
    assert p.returncode == 0, p.stderr
    assert "['doc 0 about from file', 'doc 1 about from file']" in p.stdout
    assert "answer" not in p.stdout  # --target: only what retrieve needs ran
    p = nbflow(project, "run", "flows:flow", "-i", "question=@q.txt", "--target", "retrieve", "-i", "k=1")
    assert "['doc 0 about from a text file']" in p.stdout
    p = nbflow(project, "run", "flows:flow", "-i", "question=slow", "--timeout", "0.3", env={"NBFLOW_TEST_SLEEP": "30"})
    assert p.returncode == 1
    assert "CANCELLED" in p.stdout and "(run deadline of 0.3s exceeded)" in p.stdout


def test_sigint_during_a_run_keeps_finished_nodes(project: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1", "NBFLOW_TEST_SLEEP": "60", "NBFLOW_TEST_LOG": str(project / "log")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbflow", "run", "flows:flow", "-i", "question=q"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (project / "log").exists():  # the slow node has started
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 130, err
    assert "CANCELLED" in out and "✓ retrieve" in out and "⊘ answer" in out
    assert "interrupted" in err


def test_batch_grid_inline_and_repeated_and_jsonl_results(project: Path) -> None:
    (project / "cases.json").write_text(json.dumps([{"question": "a"}, {"question": "b"}]))
    p = nbflow(
        project, "batch", "flows:flow", "cases.json", "--grid", "k=[1, 3]", "--outputs", "retrieve",
        "-o", "out.jsonl", "--no-progress",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in (project / "out.jsonl").read_text().splitlines()]
    assert [(r["question"], r["k"], len(r["retrieve"])) for r in rows] == [
        ("a", 1, 1),
        ("a", 3, 3),
        ("b", 1, 1),
        ("b", 3, 3),
    ]
    assert rows[1]["retrieve"] == ["doc 0 about a", "doc 1 about a", "doc 2 about a"]  # nested, not text
    p = nbflow(project, "batch", "flows:flow", "cases.json", "--grid", "k=1", "--grid", "k=2", "-o", "out.csv")
    assert p.returncode == 0, p.stderr
    frame = pd.read_csv(project / "out.csv")
    assert list(frame["k"]) == [1, 2, 1, 2]


def test_named_experiments_are_listed_and_shown_per_variant(project: Path) -> None:
    (project / "cases.json").write_text(json.dumps([{"question": "a", "expected": "a"}, {"question": "b"}]))
    for name, notes in (("baseline", "k=1 and k=3"), ("more-docs", "k=3 only")):
        grid = "k=[1, 3]" if name == "baseline" else "k=[3]"
        p = nbflow(
            project, "batch", "flows:flow", "cases.json", "--grid", grid, "--store", "runs.db",
            "--experiment", name, "--notes", notes, "--no-progress",
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
    listed = nbflow(project, "show", "runs.db")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(ln.startswith("experiments") for ln in lines)
    row = next(ln for ln in lines if ln.startswith("baseline"))
    assert "4/4" in row and "k=1 and k=3" in row
    assert "2/2" in next(ln for ln in lines if ln.startswith("more-docs"))
    shown = nbflow(project, "show", "runs.db", "baseline")
    assert shown.returncode == 0, shown.stderr
    assert "experiment baseline: 4 finished rows (4 succeeded)" in shown.stdout
    assert "notes: k=1 and k=3" in shown.stdout
    per_variant = [ln.split() for ln in shown.stdout.splitlines() if ln.split()[:1] in (["1"], ["3"])]
    assert [(v[0], v[2]) for v in per_variant] == [("1", "2"), ("3", "2")]  # k, rows: one line per variant
    typo = nbflow(project, "show", "runs.db", "baseline2")
    assert typo.returncode != 0 and "did you mean 'baseline'" in typo.stderr


def test_a_secret_under_a_plain_name_never_reaches_the_store_or_the_results(project: Path) -> None:
    pd.DataFrame({"question": ["a", "b"], "token": ["tok-abcdef1", "tok-abcdef2"]}).to_csv(
        project / "c.csv", index=False
    )
    p = nbflow(
        project, "batch", "flows:flow", "c.csv", "--secret", "expected=NBFLOW_KEY", "--store", "runs.db",
        "-o", "out.parquet", "--outputs", "score", env={"NBFLOW_KEY": SECRET},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    written = b"".join(f.read_bytes() for f in project.iterdir() if f.name.startswith(("runs.db", "out.parquet")))
    assert SECRET.encode() not in written
    assert b"tok-abcdef" not in written
    frame = pd.read_parquet(project / "out.parquet")
    assert set(frame["expected"]) == {"[REDACTED]"} and set(frame["token"]) == {"[REDACTED]"}


def test_inputs_named_like_run_options_work_from_the_command_line(project: Path) -> None:
    """--input store=... / show=... reach the node (the CLI passes inputs in the dict); a missing one says --input."""
    (project / "clash.py").write_text(
        "import nbflow as nf\n"
        "flow = nf.Flow('clash')\n"
        "@flow.node\n"
        "def pick(store: str, show: str = 'no') -> str:\n"
        "    return store + '/' + show\n"
    )
    p = nbflow(project, "run", "clash:flow", "-i", "store=eu-west")
    assert p.returncode == 0, p.stderr
    assert any("pick" in ln and "'eu-west/no'" in ln for ln in p.stdout.splitlines())
    p = nbflow(project, "run", "clash:flow")
    assert p.returncode == 2 and "--input store=..." in p.stderr and "run({" not in p.stderr
