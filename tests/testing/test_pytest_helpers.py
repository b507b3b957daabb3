"""nbflow.testing for pytest users: run_flow, assert_outputs, and the plugin's chat_server / fake_clock fixtures."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from nbflow.testing import ChatServer, FakeClock, assert_outputs, run_flow


def pipeline() -> nf.Flow:
    flow = nf.Flow("pipeline")
    calls: list[int] = []

    @flow.node
    def raw(n: int) -> pd.DataFrame:
        return pd.DataFrame({"x": list(range(n)), "y": [i * 2.0 for i in range(n)]})

    @flow.node(retry=nf.Retry(attempts=3, backoff=30.0, on=(ConnectionError,)))
    def model(raw: pd.DataFrame) -> float:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("provider busy")
        return float(raw["y"].sum())

    @flow.node
    def report(model: float, raw: pd.DataFrame) -> dict[str, object]:
        return {"score": model, "rows": len(raw), "tags": ["a", "b"]}

    return flow


def test_run_flow_with_a_fake_clock_takes_no_time_and_restores_the_clock() -> None:
    flow = pipeline()
    clock = FakeClock()
    run = run_flow(flow, {"n": 4}, clock=clock)
    assert clock.sleeps == [30.0, 60.0]  # the retry waits, slept on virtual time
    assert run.duration is not None and run.duration < 5
    assert flow.clock is nf.config.clock if hasattr(nf.config, "clock") else flow.clock is not clock
    assert_outputs(run, {"model": 12.0, "report": {"score": 12.0, "rows": 4, "tags": ["a", "b"]}})


def test_run_flow_with_overrides_and_targets() -> None:
    run = run_flow(pipeline(), {"n": 3}, overrides={"model": 1.5}, targets="report")
    assert_outputs(run, {"report": {"score": 1.5, "rows": 3, "tags": ["a", "b"]}})
    assert run.nodes["model"].overridden


def test_run_flow_fails_the_test_with_the_node_error_and_traceback() -> None:
    flow = nf.Flow("broken")

    @flow.node
    def parse(text: str, api_key: str) -> int:
        return int(text + api_key[:0])

    with pytest.raises(AssertionError) as info:
        run_flow(flow, {"text": "x1", "api_key": nf.Secret("sk-never-shown-1")})
    msg = str(info.value)
    assert "node 'parse' failed: ValueError: invalid literal for int()" in msg
    assert "Traceback" in msg and "return int(text" in msg
    assert "sk-never-shown-1" not in msg
    run = run_flow(flow, {"text": "x", "api_key": "k"}, raise_on_failure=False)
    assert run.status is nf.RunStatus.FAILED


def test_assert_outputs_reports_every_mismatch_with_a_diff() -> None:
    run = run_flow(pipeline(), {"n": 3}, clock=FakeClock())
    want = pd.DataFrame({"x": [0, 1, 2], "y": [0.0, 2.0, 5.0]})
    with pytest.raises(AssertionError) as info:
        assert_outputs(
            run,
            {"raw": want, "model": 6.5, "report": {"score": 6.0, "rows": 3, "tags": ["a", "c"]}, "nope": 1},
        )
    msg = str(info.value)
    assert msg.startswith("4 of 4 outputs differ:")
    assert "node 'raw':" in msg and 'column name="y"' in msg  # pandas.testing says which column
    assert "node 'model': expected 6.5, got 6.0 (off by -0.5)" in msg
    assert "node 'report': expected {'rows': 3, 'score': 6.0, 'tags': ['a', 'c']}" in msg
    assert "node 'nope': unknown node: 'nope'" in msg or "node 'nope': " in msg
    assert_outputs(run, {"model": 6.0 + 1e-12, "raw": want.assign(y=[0.0, 2.0, 4.0])})  # approx and equal


def test_assert_outputs_names_a_failed_node() -> None:
    flow = nf.Flow("fails")

    @flow.node
    def boom() -> int:
        raise KeyError("missing")

    run = run_flow(flow, raise_on_failure=False)
    with pytest.raises(AssertionError, match=r"node 'boom' failed: KeyError: 'missing'"):
        assert_outputs(run, {"boom": 1})


@pytest.mark.chat_server(answers={"2+2?": "4"}, rate_limit_every=2, retry_after=0.01)
def test_the_chat_server_fixture_with_the_real_openai_sdk(chat_server: ChatServer) -> None:
    import openai

    flow = nf.Flow("llm")

    @flow.node(retry=nf.Retry(attempts=3, backoff=0.01))
    def answer(question: str) -> str:
        with openai.OpenAI(base_url=chat_server.base_url, api_key=chat_server.api_key, max_retries=0) as client:
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
        return reply.choices[0].message.content or ""

    run = run_flow(flow, {"question": "2+2?"})
    assert_outputs(run, {"answer": "4"})
    run = run_flow(flow, {"question": "hello"})  # the 2nd request got 429: retried
    assert_outputs(run, {"answer": "echo: hello"})
    assert len(run.nodes["answer"].attempts) == 2 and chat_server.requests == 3


def test_fake_clock_fixture(fake_clock: FakeClock) -> None:
    assert fake_clock.monotonic() == 0.0 and fake_clock.sleeps == []


def test_the_plugin_is_loaded_by_pytest_in_a_project_without_a_conftest(tmp_path: Path) -> None:
    (tmp_path / "test_flow.py").write_text(
        textwrap.dedent(
            """
            import pytest
            import nbflow as nf
            from nbflow.testing import run_flow, assert_outputs

            @pytest.mark.chat_server(answers={"hi": "hello"})
            def test_it(chat_server, fake_clock):
                import urllib.request, json
                req = urllib.request.Request(
                    chat_server.base_url + "/chat/completions",
                    data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
                    headers={"Authorization": f"Bearer {chat_server.api_key}", "Content-Type": "application/json"},
                )
                with urllib.request.urlopen(req) as r:
                    assert json.load(r)["choices"][0]["message"]["content"] == "hello"
                flow = nf.Flow("f")

                @flow.node
                def double(x: int) -> int:
                    return 2 * x

                assert_outputs(run_flow(flow, {"x": 2}, clock=fake_clock), {"double": 4})
            """
        )
    )
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_flow.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed" in p.stdout


def test_nbflow_modules_imported_during_a_test_are_not_rewritten_by_pytest(tmp_path: Path) -> None:
    """The plugin takes nbflow off pytest's rewrite list: a module nbflow imports at a test's first run (the
    scheduler) is loaded by Python's own loader, not parsed again by pytest's rewriter (which failed with a
    SystemError on 3.11 when a background thread of nbflow's imported at the same time). The test's own module is
    still rewritten: its failed assert shows the values."""
    (tmp_path / "test_rewrite.py").write_text(
        textwrap.dedent(
            """
            import sys
            import nbflow as nf

            def test_loaders():
                flow = nf.Flow("f")

                @flow.node
                def double(x: int) -> int:
                    return 2 * x

                assert flow.run(x=2)["double"] == 4
                scheduler = sys.modules["nbflow._engine.scheduler"]
                print("LOADER", type(scheduler.__loader__).__name__)
                print("OWN", type(sys.modules[__name__].__loader__).__name__)
            """
        )
    )
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_rewrite.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "LOADER SourceFileLoader" in p.stdout, p.stdout
    assert "OWN AssertionRewritingHook" in p.stdout, p.stdout
