"""A sweep, not examples: secrets under every name style leak through every path; no written file holds them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import nbflow as nf

SECRETS = {
    "HF_TOKEN": "hf_sweep_UPPER_0001",
    "hfToken": "hf_sweep_camel_0002",
    "hf_token": "hf_sweep_lower_0003",
    "db_pwd": "pwd_sweep_lower_0004",
    "openai": nf.Secret("sk-sweep-plain-name-0005"),  # an nf.Secret under a plain name
}
TEXTS = [str.__str__(v) for v in SECRETS.values()]


class Holder:
    def __init__(self, text: str) -> None:
        self.text = text


def leaky_flow(name: str) -> nf.Flow:
    """Each secret leaks through a message, a traceback, a derived output, an object and a validation error."""
    child = nf.Flow(f"{name}_child")

    @child.node
    def inner(key: str) -> dict:
        return {"Authorization": f"Bearer {key}"}

    flow = nf.Flow(name)

    @flow.node
    def derived(HF_TOKEN: str, hfToken: str, hf_token: str, db_pwd: str, openai: str) -> dict:
        return {
            "headers": [f"Bearer {HF_TOKEN}", f"token={hfToken}", (hf_token,)],
            "url": f"db://u:{db_pwd}@h",
            "k": openai + "!",
        }

    @flow.node
    def message(HF_TOKEN: str, openai: str) -> str:
        raise PermissionError(f"invalid key {HF_TOKEN} / {openai}")

    @flow.node
    def obj(db_pwd: str) -> Holder:
        return Holder(f"pw is {db_pwd}")

    @flow.node
    def validation(hfToken: str) -> int:
        return hfToken  # a str for an int: pydantic's message quotes the value

    flow.add(child, name="sub", inputs={"key": "openai"})
    return flow


def assert_clean(paths: list[Path]) -> int:
    scanned = 0
    for path in paths:
        data = path.read_bytes()
        scanned += 1
        for text in TEXTS:
            assert text.encode() not in data, f"{text!r} written to {path}"
    return scanned


def test_a_checkpointed_run_a_batch_and_a_cached_run_write_no_secret_text(tmp_path):
    runs_db = tmp_path / "runs.db"
    flow = leaky_flow("sweep_run")
    run = flow.run(dict(SECRETS), store=str(runs_db), show=False)
    assert run.nodes["message"].status is nf.NodeStatus.FAILED
    assert run.nodes["derived"].status is nf.NodeStatus.SUCCEEDED
    assert run.nodes["validation"].status is nf.NodeStatus.FAILED
    # the run in memory still works with the real values
    assert run["derived"]["url"] == "db://u:pwd_sweep_lower_0004@h"

    batch_db = tmp_path / "batch.db"
    rows = [dict(SECRETS) for _ in range(3)]
    df = flow.batch(rows, store=str(batch_db), outputs=["derived", "obj"])
    assert len(df) == 3

    cached = leaky_flow("sweep_cache")
    cached.cache = str(tmp_path / "cache.db")
    with pytest.warns(nf.NbflowWarning, match="never written to a cache file"):  # refused, loudly
        asyncio.run(cached.arun(dict(SECRETS), show=False))

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {f.name for f in files} >= {"runs.db", "batch.db", "cache.db"}
    assert assert_clean(files) >= 3
    # what was stored reads back, redacted
    loaded = nf.load_run(str(runs_db), run.run_id)
    assert "[REDACTED]" in loaded.nodes["derived"].output["url"]
    assert "[REDACTED]" in (loaded.nodes["message"].error_message or "")


def test_a_paused_checkpointed_run_writes_no_secret_text(tmp_path):
    flow = nf.Flow("sweep_pause")

    @flow.node
    def ask_user(HF_TOKEN: str) -> str:
        return nf.ask(f"use the key {HF_TOKEN}?", options=["yes", "no"])

    db = tmp_path / "pause.db"
    run = flow.run(HF_TOKEN=SECRETS["HF_TOKEN"], store=str(db), show=False)
    assert run.status is nf.RunStatus.PAUSED
    assert_clean([p for p in tmp_path.rglob("*") if p.is_file()])


def test_env_reads_a_secret_and_refuses_a_missing_variable(monkeypatch):
    monkeypatch.setenv("NBFLOW_SWEEP_KEY", "sk-from-env-0006")
    key = nf.env("NBFLOW_SWEEP_KEY")
    assert isinstance(key, nf.Secret) and key.reveal() == "sk-from-env-0006" and "sk-" not in repr(key)
    monkeypatch.delenv("NBFLOW_SWEEP_KEY")
    with pytest.raises(nf.ConfigError, match="NBFLOW_SWEEP_KEY is not set"):
        nf.env("NBFLOW_SWEEP_KEY")
    assert nf.env("NBFLOW_SWEEP_KEY", default="d-123") == "d-123"
    assert os.environ.get("NBFLOW_SWEEP_KEY") is None


def test_an_answer_quoting_a_secret_is_written_redacted(tmp_path):
    flow = nf.Flow("sweep_answer")

    @flow.node
    def ask_user(HF_TOKEN: str) -> str:
        return nf.ask("which one?", options=["yes", f"no, not {HF_TOKEN}"])

    db = tmp_path / "answer.db"
    run = flow.run(HF_TOKEN=SECRETS["HF_TOKEN"], store=str(db), show=False)
    done = flow.resume(run, f"no, not {SECRETS['HF_TOKEN']}")
    assert done.status is nf.RunStatus.SUCCEEDED
    assert done["ask_user"] == f"no, not {SECRETS['HF_TOKEN']}"  # in memory: the real answer
    assert_clean([p for p in tmp_path.rglob("*") if p.is_file()])
    assert nf.load_run(str(db), run.run_id).answers == {"ask_user#0": "no, not [REDACTED]"}
