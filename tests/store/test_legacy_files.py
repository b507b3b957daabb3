"""Files written by nbflow 0.1.0, before the package was split into layers, still load (old class paths)."""

import shutil
from pathlib import Path

import pytest

import nbflow as nf

RESOURCES = Path(__file__).parent.parent / "resources"


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    for f in RESOURCES.glob("legacy_*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def test_a_checkpoint_written_before_the_refactor_loads(legacy: Path) -> None:
    run_id = (legacy / "legacy_run_id.txt").read_text()
    run = nf.load_run(legacy / "legacy_runs.db", run_id)
    assert run.status is nf.RunStatus.PAUSED
    (question,) = run.pending.values()
    assert isinstance(question, nf.Question) and question.options == ("yes", "no")
    assert run["draft"] == {"text": "about tea", "n": 3}
    assert run.record("broken").output == "n/a" and run.record("broken").error is not None


def test_a_batch_store_written_before_the_refactor_loads(legacy: Path) -> None:
    batch_id = (legacy / "legacy_batch_id.txt").read_text()
    with nf.BatchStore(legacy / "legacy_batch.db") as store:
        frame = store.load(batch_id)
    from fractions import Fraction

    assert list(frame["ratio"]) == [Fraction(1, 3), Fraction(2, 3)]
