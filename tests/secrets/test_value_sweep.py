"""The secret sweep by value: 66 credential names, token-shaped values under plain names, a URL's password and
keys a node reads from ``os.environ`` itself, through every sink: the checkpoint store, the batch store (rows,
kept runs, the experiment record with its summary and circuit breaker), a node cache, ``save=`` files, saved
frames, OpenTelemetry (the real SDK, in memory), warnings, and the errors shown in the notebook
(``run.raise_for_status()``, a raised ``TypeValidationError``). Zero occurrences in every written byte.

The command line (``-o`` files, stdout, stderr) is swept in a real subprocess; the browser (iopub and comm
messages of a real ipykernel) in tests/kernel/test_secret_sweep_kernel.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nbflow as nf
from tests.secrets.sweep_flow import (
    BY_NAME,
    DB_PASSWORD,
    ENVIRONMENT,
    PARAMS,
    TEXTS,
    TOKENS,
    inputs,
    write_flow_module,
)


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _leaks(data: bytes | str) -> list[str]:
    raw = data if isinstance(data, bytes) else data.encode()
    return [t for t in TEXTS if t.encode() in raw]


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in ENVIRONMENT.items():
        monkeypatch.setenv(k, v)


def _spans_text(exporter: InMemorySpanExporter) -> str:
    parts = []
    for span in exporter.get_finished_spans():
        parts.append(span.to_json())
    return "\n".join(parts)


def test_no_written_byte_no_trace_no_warning_no_error_holds_a_secret(tmp_path, environment):
    module = _load(write_flow_module(tmp_path, "sweepflow_a", "sweep_a"), "sweepflow_a")
    flow = module.flow
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    out = tmp_path / "out"
    shown: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = flow.run(
            inputs(),
            store=str(tmp_path / "runs.db"),
            show=False,
            trace=provider,
            save={
                "tokens": out / "tokens.json",
                "table": out / "table.csv",
                "sent": out / "sent.pkl",
                "holder": out / "holder.pkl",
            },
        )
        df = flow.batch(
            [{k: v for k, v in inputs().items() if k != "GH_TOKEN"} for _ in range(3)],
            grid={"GH_TOKEN": [BY_NAME["GH_TOKEN"], "cred-alt-GH-999xyz"]},
            store=str(tmp_path / "batch.db"),
            keep="all",
            trace=provider,
            concurrency=1,
            max_consecutive_failures=2,
            cooldown=0.01,
            max_cooldowns=1,
        )
        for suffix in (".csv", ".jsonl", ".parquet"):
            df.nbflow.save(tmp_path / f"frame{suffix}")
        cached = _load(write_flow_module(tmp_path, "sweepflow_c", "sweep_c"), "sweepflow_c").flow
        cached.cache = str(tmp_path / "cache.db")
        cached.run(inputs(), show=False)
    provider.shutdown()

    # the leak paths ran: the sweep looked at them (in memory every value is the real one)
    assert run["tokens"]["all"] == list(TOKENS.values())
    assert run["from_env"] == " ".join(ENVIRONMENT.values())
    assert run["echo_00"] == "got " + BY_NAME[PARAMS[0]]
    for failed in ("db_error", "env_error"):
        assert run.nodes[failed].status is nf.NodeStatus.FAILED, failed
    assert len(df) == 6 and set(df["status"]) <= {"failed", "pending", "cancelled"}
    stopped, cooldowns = df.attrs["stopped"], str(df.attrs["cooldowns"])
    assert "circuit breaker" in stopped and "last error" in stopped and "failed" in cooldowns, (stopped, cooldowns)

    # errors shown in the notebook: raise_for_status (with its chained cause) and the validation error
    with pytest.raises(nf.RunFailedError) as failed_run:
        run.raise_for_status()
    shown.append("".join(traceback.format_exception(failed_run.value)))
    assert "rejected key" in shown[-1] and "password authentication failed" in shown[-1]
    typed = nf.Flow("sweep_typed")

    @typed.node
    def by_name(GH_PAT: int) -> int:
        return GH_PAT

    @typed.node
    def by_shape(gh: int) -> int:
        return gh

    for given in ({"GH_PAT": BY_NAME["GH_PAT"], "gh": 1}, {"GH_PAT": 1, "gh": TOKENS["gh"]}):
        with pytest.raises(nf.TypeValidationError) as invalid:
            typed.run(given, show=False)
        shown.append("".join(traceback.format_exception(invalid.value)))
        assert "expected int" in shown[-1]
    shown += [str(w.message) for w in caught]
    shown.append(run.summary())  # what a cell shows without the live view (text/plain)
    assert "rejected key" in shown[-1]
    shown += [stopped, cooldowns]
    assert any("stopped early" in s for s in shown), "the breaker's warning"
    assert any("never written to a cache file" in s for s in shown), "the cache refused a value"
    for text in shown:
        assert not _leaks(text), (_leaks(text), text[:500])

    # OpenTelemetry: every span's name, attributes and events
    spans = _spans_text(exporter)
    assert "rejected key" in spans and len(exporter.get_finished_spans()) > 20
    assert not _leaks(spans), _leaks(spans)

    # every written byte
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts]
    names = {p.name for p in files}
    assert {"runs.db", "batch.db", "cache.db", "tokens.json", "table.csv", "frame.csv", "frame.parquet"} <= names
    assert "sent.pkl" in names  # a str: written redacted
    assert "holder.pkl" not in names  # an object holding a secret is not written (a warning says so)
    assert any("'holder': its output was not saved" in s for s in shown)
    for path in files:
        found = _leaks(path.read_bytes())
        assert not found, f"{found} written to {path.name}"
    # what was written is the redacted value, not nothing
    assert "[REDACTED]" in (out / "tokens.json").read_text()
    assert json.loads((out / "tokens.json").read_text())["all"][0] == "[REDACTED]"
    meta = nf.experiments(str(tmp_path / "batch.db"))
    assert len(meta) == 1


def test_the_command_line_writes_and_prints_no_secret(tmp_path):
    write_flow_module(tmp_path, "cliflow", "sweep_cli")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(inputs()) for _ in range(2)) + "\n")
    env = {**os.environ, **ENVIRONMENT, "NO_COLOR": "1"}
    batch = subprocess.run(
        [sys.executable, "-m", "nbflow", "batch", "cliflow.py:flow", "cases.jsonl", "-o", "out.csv"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    given = [*(f"{k}={v}" for k, v in TOKENS.items()), *(f"{k}={BY_NAME[k]}" for k in PARAMS), "headers:={}"]
    run = subprocess.run(
        [sys.executable, "-m", "nbflow", "run", "cliflow.py:flow", *[a for kv in given for a in ("-i", kv)]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (tmp_path / "out.csv").exists(), batch.stderr
    assert "password authentication failed ([REDACTED])" in batch.stderr, batch.stderr[-2000:]
    assert "rejected key" in run.stdout + run.stderr, (run.stdout + run.stderr)[-2000:]
    for name, text in (
        ("batch stdout", batch.stdout),
        ("batch stderr", batch.stderr),
        ("run stdout", run.stdout),
        ("run stderr", run.stderr),
        ("out.csv", (tmp_path / "out.csv").read_text()),
    ):
        assert not _leaks(text), f"{_leaks(text)} in {name}"


def test_a_url_password_and_short_values(monkeypatch):
    from nbflow._core.secrets import gate, known_secrets, learn, looks_like_token

    monkeypatch.setenv("SWEEP_DB", TOKENS["dburl"])
    monkeypatch.setenv("SWEEP_SHORT_TOKEN", "abc1234")  # 7 characters: too short to learn
    from nbflow._core.secrets import learn_environment

    learn_environment()
    assert DB_PASSWORD in known_secrets() and "abc1234" not in known_secrets()
    assert gate(f"login failed for {DB_PASSWORD}") == "login failed for [REDACTED]"
    assert looks_like_token(TOKENS["aws"]) and not looks_like_token("a plain sentence, not a token at all")
    learn("short")
    assert "short" not in known_secrets()
