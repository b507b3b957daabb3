"""Usage and cost per row (nf.usage, with the real openai SDK against a local server), named variants,
experiments listed and reloaded from a store, and nf.compare on known deltas."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import nbflow as nf

openai = pytest.importorskip("openai")  # a dev dependency (pyproject [dev]); `make setup` installs it


class _Chat(BaseHTTPRequestHandler):
    """An OpenAI-compatible /chat/completions: echoes the prompt upper-cased, usage = word counts."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = " ".join(m["content"] for m in body["messages"])
        reply = text.upper()
        out = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(text.split()), "completion_tokens": 2, "total_tokens": 0},
        }
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


PROMPTS = {"terse": "answer", "steps": "think step by step then answer"}
ROWS = [{"question": q, "expected": q.upper()} for q in ("ab", "cd", "ef")]
TRIES: Counter[tuple[str, str]] = Counter()


def llm_flow(base_url: str, price: float | None = 0.001) -> nf.Flow:
    flow = nf.Flow("llm")
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)

    @flow.node(retry=nf.Retry(attempts=2, backoff=0, on=ValueError))
    def completion(question: str, prompt: str) -> str:
        response = client.chat.completions.create(model="m1", messages=[{"role": "user", "content": question}])
        cost = None if price is None else price * response.usage.prompt_tokens
        nf.usage(response, cost=cost)  # the response object itself, as the SDK returns it
        TRIES[question, prompt] += 1
        if question == "cd" and prompt == "answer" and TRIES[question, prompt] == 1:
            raise ValueError("malformed answer")  # a failed attempt that still cost tokens
        return response.choices[0].message.content + (" " + prompt if prompt != "answer" else "")

    @flow.node
    def exact(completion: str, expected: str) -> bool:
        return completion == expected

    return flow


def test_usage_is_summed_per_row_and_failed_attempts_have_their_own_columns(server):
    TRIES.clear()
    df = llm_flow(server).batch(ROWS, grid={"prompt": PROMPTS}, outputs=["completion", "exact"])
    assert df["prompt"].tolist() == ["terse", "steps"] * 3  # the column holds the variant's name
    assert df.attrs["variants"] == {"prompt": PROMPTS}
    assert df["completion"].tolist()[:2] == ["AB", "AB think step by step then answer"]  # the node got the value
    assert df["input_tokens"].tolist() == [1] * 6
    assert df["output_tokens"].tolist() == [2] * 6
    assert df["cost"].tolist() == pytest.approx([0.001] * 6)
    # "cd" with the terse prompt failed once after its call, then succeeded
    cd = df[df["question"] == "cd"]
    assert cd["failed_tokens"].tolist() == [3, 0] and cd["attempts"].tolist() == [2, 1]
    assert cd["failed_cost"].tolist() == pytest.approx([0.001, 0.0])
    summary = nf.summarize(df, scores="exact")
    assert summary.loc["terse", "cost_total"] == pytest.approx(0.003)
    assert summary.loc["terse", "cost_mean"] == pytest.approx(0.001)
    assert summary.loc["terse", "failed_cost_total"] == pytest.approx(0.001)
    assert summary.loc["terse", "exact_mean"] == 1.0 and summary.loc["steps", "exact_mean"] == 0.0


def test_an_unknown_cost_is_nan_not_zero(server):
    TRIES.clear()
    df = llm_flow(server, price=None).batch(ROWS[:1], grid={"prompt": {"terse": "answer"}})
    assert math.isnan(df.loc[0, "cost"]) and df.loc[0, "input_tokens"] == 1


def test_usage_errors_name_the_problem():
    flow = nf.Flow("bad")

    @flow.node
    def call(x: int) -> int:
        nf.usage(input_tokens=-1)
        return x

    run = flow.run(x=1)
    assert isinstance(run.record("call").error, nf.UsageError)
    assert "an int >= 0" in str(run.record("call").error)
    with pytest.raises(nf.RunnerError, match="inside a node"):
        nf.usage(input_tokens=1)


def test_experiments_are_listed_and_reloaded_after_a_restart(server, tmp_path):
    db = tmp_path / "runs.db"
    TRIES.clear()
    flow = llm_flow(server)
    v1 = flow.batch(ROWS, grid={"prompt": PROMPTS}, store=db, experiment="terse-vs-steps", notes="first try")
    assert v1.attrs["batch_id"] == "terse-vs-steps"
    # A fresh process lists and loads it (nothing held in memory)
    code = textwrap.dedent(
        f"""
        import json, nbflow as nf
        ex = nf.experiments({str(db)!r})
        df = nf.load_batch({str(db)!r}, "terse-vs-steps")
        print(json.dumps({{"names": ex["experiment"].tolist(), "notes": ex["notes"].tolist(),
            "rows": ex["rows"].tolist(), "succeeded": ex["succeeded"].tolist(), "cost": ex["cost"].tolist(),
            "variants": ex["variants"].tolist(), "prompt": df["prompt"].tolist(), "grid": df.attrs["grid"],
            "mapping": df.attrs["variants"], "exact": df["exact"].tolist(), "cost_col": df["cost"].tolist()}}))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["names"] == ["terse-vs-steps"] and got["notes"] == ["first try"]
    assert got["rows"] == [6] and got["succeeded"] == [6]
    assert got["cost"] == pytest.approx([0.006])
    assert got["variants"] == [{"prompt": ["terse", "steps"]}]
    assert got["prompt"] == ["terse", "steps"] * 3 and got["grid"] == ["prompt"]
    assert got["mapping"] == {"prompt": PROMPTS}
    assert got["exact"] == [True, False] * 3
    with pytest.raises(nf.StoreError, match="did you mean 'terse-vs-steps'"):
        nf.load_batch(db, "terse-vs-step")


def test_compare_two_experiments_and_two_variants_on_known_deltas(server, tmp_path):
    db = tmp_path / "runs.db"
    TRIES.clear()
    flow = llm_flow(server)
    flow.batch(ROWS, grid={"prompt": PROMPTS}, store=db, experiment="v1")

    @flow.node
    def exact(completion: str, expected: str) -> bool:  # v2: "ab" regresses, "ef" newly fails
        if expected == "EF":
            raise RuntimeError("judge down")
        return completion == expected and expected != "AB"

    flow.batch(ROWS, grid={"prompt": PROMPTS}, store=db, experiment="v2")
    a, b = nf.load_batch(db, "v1"), nf.load_batch(db, "v2")
    diff = nf.compare(a, b, scores="exact")
    assert diff.attrs["on"] == ["question", "expected", "prompt"]
    by_case = {(r.question, r.prompt): r.change for r in diff.itertuples()}
    assert by_case == {
        ("ab", "terse"): "regressed",
        ("ab", "steps"): "unchanged",
        ("cd", "terse"): "unchanged",
        ("cd", "steps"): "unchanged",
        ("ef", "terse"): "newly_failing",
        ("ef", "steps"): "newly_failing",
    }
    assert diff["change"].tolist()[:3] == ["newly_failing", "newly_failing", "regressed"]  # worst first
    assert diff.loc[diff["change"] == "regressed", "exact_delta"].tolist() == [-1.0]
    assert diff.attrs["summary"].startswith("v2 vs v1 on 6 cases: 2 newly failing, 1 regressed, 3 unchanged")
    fresh = flow.batch(ROWS, grid={"prompt": PROMPTS})  # frames without experiment names: "a" and "b"
    assert nf.compare(fresh, fresh, scores="exact").attrs["summary"].startswith("b vs a on 6 cases")

    variants = nf.compare(a, "terse", "steps", by="prompt")
    assert variants.attrs["on"] == ["question", "expected"]
    assert set(variants["change"]) == {"regressed"}  # steps adds text: never exact
    assert variants.attrs["summary"].startswith("steps vs terse on 3 cases: 3 regressed; mean exact 1.000 -> 0.000")
    with pytest.raises(nf.BatchError, match="no rows with prompt == 'long'"):
        nf.compare(a, "terse", "long", by="prompt")
    # Two experiments that each ran one variant share no case: refused, naming the column and the fix
    # (an outer join would report every case as "only a"/"only b", a comparison of nothing).
    terse, steps = a[a["prompt"] == "terse"], b[b["prompt"] == "steps"]
    with pytest.raises(
        nf.BatchError, match=r"column 'prompt' has other values.*terse vs steps.*on=\['question', 'expected'\]"
    ):
        nf.compare(terse, steps, scores="exact")
    across = nf.compare(terse, steps, scores="exact", on=["question", "expected"])
    assert len(across) == 3 and across.attrs["summary"].startswith("v2 vs v1 on 3 cases")
