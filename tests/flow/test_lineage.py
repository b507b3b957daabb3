"""Lineage: which code and data produced a value, in memory, from a checkpoint and a stored batch row after a restart."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from tests.test_cli import nbflow

SECRET = "sk-lineage-98765"

PIPELINE = """
import nbflow as nf
import pandas as pd

flow = nf.Flow("pipe")

@flow.node
def raw(n: int, noise: float = 0.1, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"x": [(i * 7 + seed) % 5 * noise for i in range(n)]})

@flow.node
def score(raw: pd.DataFrame, api_key: str) -> float:
    return float(raw["x"].sum())
"""


def _module(tmp_path: Path) -> Path:
    (tmp_path / "pipe.py").write_text(PIPELINE)
    return tmp_path


def _python(cwd: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_lineage_of_a_node_names_code_data_and_defaults(tmp_path: Path) -> None:
    sys.path.insert(0, str(_module(tmp_path)))
    try:
        import pipe  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    run = pipe.flow.run(n=4, api_key=nf.Secret(SECRET))
    lin = run.lineage("score")
    assert list(lin.columns) == [
        "node", "code_version", "parameter", "source", "kind", "value", "data_version", "output_version",
    ]  # fmt: skip
    rows = {(r.node, r.parameter): r for r in lin.itertuples()}
    assert set(rows) == {("raw", "n"), ("raw", "noise"), ("raw", "seed"), ("score", "raw"), ("score", "api_key")}
    assert (rows["raw", "noise"].kind, rows["raw", "noise"].value) == ("default", "0.1")  # defaults are there
    assert (rows["raw", "seed"].kind, rows["raw", "seed"].value) == ("default", "0")
    assert (rows["raw", "n"].kind, rows["raw", "n"].value) == ("input", "4")
    # the data version of score's input is raw's output version: the chain is followed by digest
    assert rows["score", "raw"].data_version == rows["raw", "n"].output_version
    assert rows["score", "raw"].data_version.startswith("v:")
    assert rows["score", "api_key"].value == "[REDACTED]" and rows["score", "api_key"].data_version is None
    assert SECRET not in lin.to_csv()
    env = lin.attrs["environment"]
    assert env["nbflow"] == nf.__version__ and env["python"] == sys.version.split()[0]
    assert env["packages"]["pandas"] == pd.__version__
    assert run.lineage("raw")["node"].unique().tolist() == ["raw"]  # raw's lineage has nothing upstream
    with pytest.raises(nf.UnknownNodeError):
        run.lineage("nope")

    # Other data: other versions; the same code: the same code version.
    other = pipe.flow.run(n=4, noise=0.2, api_key=nf.Secret(SECRET)).lineage("score")
    o = {(r.node, r.parameter): r for r in other.itertuples()}
    assert o["raw", "noise"].kind == "input" and o["raw", "noise"].data_version != rows["raw", "noise"].data_version
    assert o["score", "raw"].data_version != rows["score", "raw"].data_version
    assert o["raw", "n"].code_version == rows["raw", "n"].code_version


def test_a_code_edit_changes_the_code_version() -> None:
    def make(k: int) -> nf.Flow:
        flow = nf.Flow("edit")
        if k == 1:

            @flow.node
            def f(x: int) -> int:
                return x + 1
        else:

            @flow.node
            def f(x: int) -> int:
                return x + 2

        return flow

    a = make(1).run(x=1).lineage("f")["code_version"].iloc[0]
    b = make(2).run(x=1).lineage("f")["code_version"].iloc[0]
    assert a and b and a != b


def test_a_checkpointed_run_keeps_its_lineage_after_a_restart(tmp_path: Path) -> None:
    project = _module(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "add", "pipe.py"], cwd=project, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@e.st", "-c", "user.name=t", "commit", "-qm", "pipe"], cwd=project, check=True
    )
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()
    wrote = _python(
        project,
        f"""
        import nbflow as nf, pipe
        run = pipe.flow.run(n=3, api_key=nf.Secret("{SECRET}"), store="runs.db")
        print(run.run_id)
        """,
    )
    assert wrote.returncode == 0, wrote.stderr
    run_id = wrote.stdout.split()[-1]
    assert SECRET.encode() not in (project / "runs.db").read_bytes()

    # A new process that never imported the flow: the lineage comes from the checkpoint.
    read = _python(
        project,
        f"""
        import nbflow as nf
        lin = nf.load_run("runs.db", "{run_id}").lineage("score")
        print(lin[["node", "parameter", "kind", "value"]].to_csv(index=False))
        print("GIT", lin.attrs["environment"]["git"])
        print("CODE", lin["code_version"].iloc[0])
        """,
    )
    assert read.returncode == 0, read.stderr
    assert "raw,noise,default,0.1" in read.stdout and "raw,seed,default,0" in read.stdout
    assert "raw,n,input,3" in read.stdout and "score,api_key,input,[REDACTED]" in read.stdout
    assert f"GIT {{'commit': '{head}', 'dirty': False}}" in read.stdout
    sys.path.insert(0, str(project))
    try:
        import pipe

        live = pipe.flow.run(n=3, api_key="x").lineage("raw")["code_version"].iloc[0]
    finally:
        sys.path.remove(str(project))
    assert f"CODE {live}" in read.stdout  # the stored code version is the flow's fingerprint

    shown = nbflow(project, "show", "runs.db", run_id)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"git {head[:12]}" in out and "lineage: nbflow" in out
    assert "noise: default = 0.1" in out and "seed: default = 0" in out and "raw: output of 'raw'" in out
    assert SECRET not in out
    only = nbflow(project, "show", "runs.db", run_id, "--lineage", "raw")
    assert "noise: default = 0.1" in only.stdout and "raw: output of 'raw'" not in only.stdout


def test_a_stored_batch_row_keeps_its_lineage_after_a_restart(tmp_path: Path) -> None:
    project = _module(tmp_path)
    wrote = _python(
        project,
        """
        import nbflow as nf, pipe
        df = pipe.flow.batch([{"n": 2, "api_key": "k"}, {"n": 5, "api_key": "k", "seed": 3}], store="runs.db",
                             keep="all", experiment="sweep", progress=False)
        print(list(df["status"]))
        """,
    )
    assert wrote.returncode == 0, wrote.stderr
    read = _python(
        project,
        """
        import nbflow as nf
        df = nf.load_batch("runs.db", "sweep")
        for i in range(2):
            lin = nf.load_run("runs.db", df["run_id"].iloc[i]).lineage("score")
            got = {(r.node, r.parameter): (r.kind, r.value) for r in lin.itertuples()}
            print(i, got[("raw", "seed")], got[("raw", "noise")], lin["code_version"].notna().all())
        """,
    )
    assert read.returncode == 0, read.stderr
    assert "0 ('default', '0') ('default', '0.1') True" in read.stdout
    assert "1 ('input', '3') ('default', '0.1') True" in read.stdout
