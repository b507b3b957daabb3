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
    # nbflow 0.1 wrote bare pickles, with no tag of this user's key: refused unless trusted explicitly.
    run_id = (legacy / "legacy_run_id.txt").read_text()
    with pytest.raises(nf.StoreError, match="allow_pickle=True"):
        nf.load_run(legacy / "legacy_runs.db", run_id)
    run = nf.load_run(legacy / "legacy_runs.db", run_id, allow_pickle=True)
    assert run.status is nf.RunStatus.PAUSED
    (question,) = run.pending.values()
    assert isinstance(question, nf.Question) and question.options == ("yes", "no")
    assert run["draft"] == {"text": "about tea", "n": 3}
    assert run.record("broken").output == "n/a" and run.record("broken").error is not None


def test_a_batch_store_written_before_the_refactor_loads(legacy: Path) -> None:
    batch_id = (legacy / "legacy_batch_id.txt").read_text()
    with nf.BatchStore(legacy / "legacy_batch.db") as store, pytest.raises(nf.StoreError, match="allow_pickle"):
        store.load(batch_id)
    with nf.BatchStore(legacy / "legacy_batch.db", allow_pickle=True) as store:
        frame = store.load(batch_id)
    from fractions import Fraction

    assert list(frame["ratio"]) == [Fraction(1, 3), Fraction(2, 3)]
