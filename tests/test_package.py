"""The package a user installs: build the wheel and the sdist, check them, install the wheel into a
clean virtual environment and run the demo from it (catches files missing from the wheel)."""

from __future__ import annotations

import email
import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

import nbflow as nf

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.package

# What only development needs: none of it may come with `nbflow[demo]`.
DEV_ONLY = {"pytest", "jupyterlab", "playwright", "dask", "distributed", "mypy", "ruff", "mkdocs", "nbval"}


def run(*cmd: str | Path, cwd: Path = ROOT, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--installer", "uv", "--outdir", out, ROOT)
    return out


def only(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def test_twine_check_passes(dist: Path):
    out = run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))
    assert out.stdout.count("PASSED") == 2, out.stdout


def test_wheel_holds_the_whole_package_and_its_metadata(dist: Path):
    wheel = only(dist, f"nbflow-{nf.__version__}-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = email.message_from_bytes(z.read(f"nbflow-{nf.__version__}.dist-info/METADATA"))
    package_files = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "nbflow").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert "nbflow/py.typed" in package_files
    assert package_files <= names, f"missing from the wheel: {sorted(package_files - names)}"
    assert not any(n.startswith(("tests/", "docs/", "notebooks/")) for n in names)
    assert f"nbflow-{nf.__version__}.dist-info/licenses/LICENSE" in names
    assert meta["Version"] == nf.__version__
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["License-Expression"] == "MIT"
    assert set(meta.get_all("Provides-Extra")) == {
        "ui",
        "dask",
        "demo",
        "process",
        "data",
        "otel",
        "parquet",
        "scorers",
    }
    classifiers = set(meta.get_all("Classifier"))
    assert {"Programming Language :: Python :: 3.11", "Typing :: Typed"} <= classifiers
    assert meta["Description-Content-Type"] == "text/markdown"


def test_sdist_builds_the_same_package(dist: Path):
    sdist = only(dist, f"nbflow-{nf.__version__}.tar.gz")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for needed in ("pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE", "nbflow/__init__.py", "nbflow/py.typed"):
        assert needed in names, needed
    assert not any(n.startswith((".venv", ".tools", "site/", "dist/")) for n in names)


def test_demo_runs_from_the_wheel_in_a_clean_environment(dist: Path, tmp_path: Path):
    wheel = only(dist, "*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    run(sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", python, f"nbflow[demo] @ {wheel.as_uri()}")

    where = run(python, "-c", "import nbflow; print(nbflow.__file__, nbflow.__version__)", cwd=tmp_path).stdout
    assert where.startswith(str(env_dir)) and where.split()[1] == nf.__version__, where

    demo = run(python, "-m", "nbflow.demo", cwd=tmp_path, timeout=300)
    assert "SUCCEEDED" in demo.stdout, demo.stdout

    listed = run(
        python, "-c", "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"
    )
    installed = {name.lower() for name in listed.stdout.split()}
    assert {"nbflow", "ipywidgets", "openai"} <= installed
    assert not installed & DEV_ONLY, f"the demo's install pulls in development tools: {installed & DEV_ONLY}"
