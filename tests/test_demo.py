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
