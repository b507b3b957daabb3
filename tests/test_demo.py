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
