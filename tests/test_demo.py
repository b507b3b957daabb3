"""The README's main job: ``python -m nbflow.demo`` runs the quickstart flow and a small batch."""

import os
import subprocess
import sys


def test_demo_runs_end_to_end_headless():
    out = subprocess.run(
        [sys.executable, "-m", "nbflow.demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.returncode == 0, out.stderr
    assert "flow='qa' SUCCEEDED" in out.stdout
    assert "Rayleigh scattering" in out.stdout
    assert out.stdout.count("succeeded") >= 6  # the batch: 3 questions x 2 variants
    assert "correct_mean" in out.stdout
    lines = out.stdout.splitlines()
    header = next(line for line in lines if "cost_total" in line).split()  # the summary's columns (no index name)
    k1 = lines[lines.index(next(line for line in lines if "cost_total" in line)) + 2].split()  # its k=1 row
    assert k1[0] == "1" and len(k1) == len(header) + 1, (header, k1)
    cost = dict(zip(header, k1[1:], strict=True))
    # the local model is priced as gpt-4o-mini (0.15 / 0.60 a million tokens): the cost column is known and right
    expected = (int(cost["input_tokens_total"]) * 0.15 + int(cost["output_tokens_total"]) * 0.60) / 1e6
    assert expected > 0 and abs(float(cost["cost_total"]) - expected) < 1e-6, cost
    assert "model endpoint: nbflow.testing.ChatServer" in out.stdout  # the openai SDK, no key, no network


def test_demo_uses_the_endpoint_from_the_environment():
    from nbflow.testing import ChatServer

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    with ChatServer(api_key="sk-demo-env", answers=lambda m: "Rayleigh scattering, from the env endpoint") as server:
        out = subprocess.run(
            [sys.executable, "-m", "nbflow.demo"],
            capture_output=True,
            text=True,
            timeout=120,
            env={
                **env,
                "PYTHONPATH": os.pathsep.join(sys.path),
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": "sk-demo-env",
                "OPENAI_MODEL": "my-model",
            },
        )
        assert out.returncode == 0, out.stderr
        assert "(from the environment)" in out.stdout
        assert "from the env endpoint" in out.stdout
        assert server.completions == 7  # one run + a batch of 6 rows, all through this endpoint
        assert "sk-demo-env" not in out.stdout
