"""A node's fingerprint follows the user's own code (issue 30): helpers it calls from the project's modules
(``import helpers; helpers.clean(...)``, ``from helpers import clean``, a class of the project) count by their
code, so an edited helper re-runs the dependent rows on resume and misses the node cache; functions of the
standard library, installed packages and nbflow never count."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pytest

import nbflow as nf
from nbflow._engine.fingerprint import project_module

HELPERS = """
PREFIX = "clean:"


def clean(text):
    return PREFIX + text.strip().lower()


def shout(text):
    return text.upper()


class Judge:
    def grade(self, answer, expected):
        return float(answer.endswith(expected))
"""

FLOWS = """
import nbflow as nf

import {helpers}
from {helpers} import Judge, shout

flow = nf.Flow("helped")


@flow.node
def answer(question: str) -> str:
    return {helpers}.clean(question)


@flow.node
def loud(answer: str) -> str:
    return shout(answer)


@flow.node
def score(answer: str, expected: str) -> float:
    return Judge().grade(answer, expected)
"""

ROWS = [{"question": f" Q{i} ", "expected": f"q{i}"} for i in range(4)]


@pytest.fixture
def project(tmp_path, monkeypatch):
    name = f"helpers_{uuid.uuid4().hex[:8]}"
    flows = f"flows_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(HELPERS)
    (tmp_path / f"{flows}.py").write_text(FLOWS.format(helpers=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, name, flows
    for module in (name, flows):
        sys.modules.pop(module, None)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(1, 10**18 + path.stat().st_mtime_ns))  # a new mtime whatever the clock's resolution


def test_an_edited_helper_module_reruns_the_rows_that_use_it_on_resume(project):
    tmp_path, name, flows = project
    helpers = importlib.import_module(name)
    module = importlib.import_module(flows)
    db = tmp_path / "runs.db"
    first = module.flow.batch(ROWS, store=db, batch_id="b", outputs=["loud", "score"], progress=False)
    assert first["loud"].tolist() == [f"CLEAN:Q{i}" for i in range(4)]

    with warnings.catch_warnings():  # nothing edited: every row reused, nothing said
        warnings.simplefilter("error")
        module.flow.batch(ROWS, store=db, batch_id="b", outputs=["loud", "score"], resume=True, progress=False)

    _edit(tmp_path / f"{name}.py", "PREFIX + text.strip().lower()", 'PREFIX + text.strip().lower() + "!"')
    importlib.reload(helpers)  # what %autoreload does: `helpers.clean` is the new code
    with pytest.warns(nf.NbflowWarning, match=r"node 'answer' \(4 rows\)"):
        again = module.flow.batch(ROWS, store=db, batch_id="b", outputs=["loud", "score"], resume=True)
    assert again["loud"].tolist() == [f"CLEAN:Q{i}!" for i in range(4)]  # not the stale stored rows
    assert again["score"].tolist() == [0.0] * 4


def test_a_helper_modules_own_setting_and_a_class_count_too(project):
    tmp_path, name, flows = project
    helpers = importlib.import_module(name)
    module = importlib.import_module(flows)
    db = tmp_path / "runs.db"
    module.flow.batch(ROWS, store=db, batch_id="b", outputs=["score"], progress=False)

    _edit(tmp_path / f"{name}.py", 'PREFIX = "clean:"', 'PREFIX = "tidy:"')  # a setting the helper reads
    importlib.reload(helpers)
    with pytest.warns(nf.NbflowWarning, match=r"node 'answer' \(4 rows\)"):
        module.flow.batch(ROWS, store=db, batch_id="b", outputs=["score"], resume=True, progress=False)

    _edit(tmp_path / f"{name}.py", "float(answer.endswith(expected))", "0.5")  # the class's method
    importlib.reload(helpers)
    importlib.reload(module)  # `from helpers import Judge` binds the new class when the flows module reloads
    with pytest.warns(nf.NbflowWarning, match=r"node 'score' \(4 rows\)"):
        again = module.flow.batch(ROWS, store=db, batch_id="b", outputs=["score"], resume=True, progress=False)
    assert again["score"].tolist() == [0.5] * 4


def test_an_edited_helper_misses_the_node_cache(project):
    tmp_path, name, flows = project
    helpers = importlib.import_module(name)
    module = importlib.import_module(flows)
    module.flow.cache = True
    assert module.flow.run(question=" A ", targets=["answer"])["answer"] == "clean:a"
    assert module.flow.run(question=" A ", targets=["answer"]).nodes["answer"].cached
    _edit(tmp_path / f"{name}.py", "text.strip().lower()", "text.strip()")
    importlib.reload(helpers)
    run = module.flow.run(question=" A ", targets=["answer"])
    assert not run.nodes["answer"].cached and run["answer"] == "clean:A"


SCRIPT = """
import json, sys, warnings
from {flows} import flow

with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    df = flow.batch({rows!r}, store="runs.db", batch_id="b", outputs=["loud"], resume=True, progress=False)
print(json.dumps({{"loud": df["loud"].tolist(), "said": [str(w.message) for w in said]}}))
"""


def test_after_a_restart_an_edited_helper_file_reruns_the_dependent_rows(project):
    tmp_path, name, flows = project
    (tmp_path / "script.py").write_text(SCRIPT.format(flows=flows, rows=ROWS))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def run() -> dict:
        p = subprocess.run(
            [sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    assert run()["loud"] == [f"CLEAN:Q{i}" for i in range(4)]
    assert run()["said"] == []  # nothing edited: the stored rows are reused
    _edit(tmp_path / f"{name}.py", "return text.upper()", "return text.upper() + '?'")
    out = run()
    assert out["loud"] == [f"CLEAN:Q{i}?" for i in range(4)]
    assert any("node 'loud' (4 rows)" in s for s in out["said"]), out["said"]


def test_only_the_users_own_modules_count():
    assert project_module(__name__)  # a test module is the project's code
    assert project_module("__main__")
    for library in ("json", "os", "asyncio", "pandas", "pytest", "nbflow", "nbflow._engine.fingerprint"):
        importlib.import_module(library)
        assert not project_module(library), library
    assert not project_module("sys")  # built in: no file
    assert not project_module("no_such_module_here")
