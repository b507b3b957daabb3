"""Safe to open: every public way of opening a store, checkpoint or cache file someone else wrote
executes none of its author's code. The author is simulated with another store key (the files are
real nbflow files whose pickled parts carry the author's tag) and with bare pickles (nbflow 0.1)."""

from __future__ import annotations

import base64
import json
import os
import pickle
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf
from tests.store.evil import Evil


def _flow(name: str, marker: Path, **kw: object) -> nf.Flow:
    flow = nf.Flow(name, **kw)  # type: ignore[arg-type]

    @flow.node
    def make(x: int) -> object:
        return Evil(str(marker)) if x >= 0 else x

    @flow.node
    async def review(make: object) -> str:
        return await nf.ask("ok?")

    return flow


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The author's files: a paused checkpointed run, a batch, a cache; all holding an Evil value."""
    marker = tmp_path / "pwned"
    monkeypatch.setenv("NBFLOW_STORE_KEY", "the author's key, not yours")
    runs, batch, cache = tmp_path / "runs.db", tmp_path / "batch.db", tmp_path / "cache.db"
    run = _flow("mal_run", marker).run(x=1, store=runs, show=False)
    assert run.status is nf.RunStatus.PAUSED
    frame = nf.Flow("mal_batch")

    @frame.node
    def out(x: int) -> object:
        return Evil(str(marker))

    frame.batch(pd.DataFrame({"x": [1, 2]}), store=batch)
    cached = nf.Flow("mal_cache", cache=cache)

    @cached.node
    def value(x: int) -> object:
        return Evil(str(marker))

    cached.run(x=1, show=False)
    monkeypatch.delenv("NBFLOW_STORE_KEY")
    nf.NodeCache  # noqa: B018
    from nbflow._store import checkpoint, node_cache

    checkpoint._STORES.clear()  # a fresh process: nothing kept open from the author's side
    node_cache._FILES.clear()
    assert not marker.exists()
    return {"marker": marker, "runs": runs, "run_id": run.run_id, "batch": batch, "cache": cache, "out": out}


def test_load_run_refuses_with_how_to_trust(files: dict) -> None:
    with pytest.raises(nf.StoreError, match=r"allow_pickle=True"):
        nf.load_run(files["runs"], files["run_id"])
    assert not files["marker"].exists()


def test_flow_resume_by_id_refuses(files: dict) -> None:
    flow = _flow("mal_run", files["marker"])
    with pytest.raises(nf.StoreError, match="allow_pickle"):
        flow.resume(files["run_id"], "yes", store=files["runs"])
    assert not files["marker"].exists()


def test_a_new_run_in_the_file_executes_nothing(files: dict) -> None:
    run = _flow("mal_run", files["marker"]).run(x=-1, store=files["runs"], show=False)
    assert run.status is nf.RunStatus.PAUSED and not files["marker"].exists()


def test_batch_store_load_and_rows_refuse(files: dict) -> None:
    with nf.BatchStore(files["batch"]) as store:
        (info,) = store.batches()
        with pytest.raises(nf.StoreError, match="allow_pickle"):
            store.load(info["batch_id"])
        with pytest.raises(nf.StoreError, match="allow_pickle"):
            store.rows(info["batch_id"])
        assert store.rows(info["batch_id"], unpickle=False)[0].status == "succeeded"
    assert not files["marker"].exists()


def test_flow_batch_on_the_file_with_and_without_resume_executes_nothing(files: dict) -> None:
    flow = nf.Flow("mal_batch")

    @flow.node
    def out(x: int) -> int:
        return x

    rows = pd.DataFrame({"x": [1, 2]})
    with pytest.raises(nf.StoreError, match="already holds 2 finished rows"):
        flow.batch(rows, store=files["batch"])
    with pytest.warns(nf.NbflowWarning, match="allow_pickle"):
        frame = flow.batch(rows, store=files["batch"], resume=True)
    assert list(frame.out) == [1, 2]  # the untrusted rows ran again
    assert not files["marker"].exists()


def test_a_cache_file_entry_is_a_miss_not_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker, db = tmp_path / "pwned", tmp_path / "cache.db"
    ran = []

    def make() -> nf.Flow:
        flow = nf.Flow("mal_cache", cache=db)

        @flow.node
        def value(x: int) -> int:
            ran.append(x)
            return x

        return flow

    make().run(x=1, show=False)
    # The author swaps the entry's value for a payload tagged with their own key.
    from nbflow._store import node_cache
    from nbflow._store.pickling import sign_pickle

    monkeypatch.setenv("NBFLOW_STORE_KEY", "the author's key")
    evil = sign_pickle(pickle.dumps(Evil(str(marker))))
    monkeypatch.delenv("NBFLOW_STORE_KEY")
    with sqlite3.connect(db) as raw:
        assert raw.execute("UPDATE node_cache SET value=?", (evil,)).rowcount == 1
    node_cache._FILES.clear()
    with pytest.warns(nf.NbflowWarning, match="allow_pickle"):
        run = make().run(x=1, show=False)
    assert run["value"] == 1 and ran == [1, 1]  # a miss: the node ran again
    assert not marker.exists()


def test_bare_pickles_of_nbflow_0_1_are_refused_everywhere(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    db = tmp_path / "old.db"
    with nf.BatchStore(db) as store:
        store.begin_batch("b", "f", 1, ["x"])
        payload = base64.b64encode(pickle.dumps(Evil(str(marker)))).decode()
        with sqlite3.connect(db) as raw:
            raw.execute(
                "INSERT INTO batch_rows(batch_id, case_key, row_index, run_id, status, finished_at, data) "
                "VALUES ('b', 'row:0', 0, 'r', 'succeeded', 0, ?)",
                (json.dumps({"x": {"__nbflow_pickle__": payload}}),),
            )
        with pytest.raises(nf.StoreError, match="unsigned pickle"):
            store.load("b")
    assert not marker.exists()
    with nf.BatchStore(db, allow_pickle=True) as store:  # the user trusts it: then, and only then
        store.load("b")
    assert marker.exists()  # proves the payload is live: the refusals above are what kept it from running


def test_your_own_files_open_without_any_option(tmp_path: Path) -> None:
    flow = nf.Flow("own")

    @flow.node
    def make(x: int) -> object:
        return (x, {"k": {1, 2}})

    @flow.node
    async def review(make: object) -> str:
        return await nf.ask("ok?")

    run = flow.run(x=1, store=tmp_path / "r.db", show=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = nf.load_run(tmp_path / "r.db", run.run_id)
    assert back["make"] == (1, {"k": {1, 2}})


def test_load_batch_experiments_explore_and_compare_execute_nothing(files: dict) -> None:
    (experiment,) = nf.experiments(files["batch"])["batch_id"]
    with pytest.raises(nf.StoreError, match="allow_pickle"):
        nf.load_batch(files["batch"], experiment)
    frame = nf.load_batch(files["batch"], experiment, unpickle=False)  # markers, not values
    assert list(frame.status) == ["succeeded", "succeeded"]
    nf.compare(frame, frame, scores="x")
    nf.explore(frame)
    assert not files["marker"].exists()


EVIL_SOURCE = "import pathlib\npathlib.Path({marker!r}).mkdir()\nimport nbflow as nf\nflow = nf.Flow('mal_run')\n"


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NBFLOW_STORE_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "nbflow", *args],
        cwd=cwd,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("tagged", [False, True], ids=["untagged", "tagged-with-the-author-key"])
def test_cli_show_and_resume_never_load_a_source_the_file_names(
    files: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tagged: bool
) -> None:
    """The CLI remembers where a stored flow is defined, in the store: a file naming a source of its
    author's choice (a .py file that runs code) must not get it imported by `nbflow show/resume`."""
    evil = tmp_path / "evil_flow.py"
    evil.write_text(EVIL_SOURCE.format(marker=str(files["marker"])))
    source = f"{evil}:flow"
    if tagged:
        from nbflow._cli_io import remember_source

        monkeypatch.setenv("NBFLOW_STORE_KEY", "the author's key, not yours")
        remember_source(str(files["runs"]), "mal_run", source)
        monkeypatch.delenv("NBFLOW_STORE_KEY")
    else:
        with sqlite3.connect(files["runs"]) as raw:
            raw.execute("INSERT OR REPLACE INTO nbflow_meta VALUES ('cli_source:mal_run', ?)", (source,))
    shown = _cli(tmp_path, "show", str(files["runs"]), files["run_id"])
    assert shown.returncode != 0 and "allow_pickle" in shown.stderr, shown.stderr
    resumed = _cli(tmp_path, "resume", str(files["runs"]), files["run_id"], "--answer", '"yes"')
    assert resumed.returncode != 0 and "--flow" in resumed.stderr, resumed.stderr
    listed = _cli(tmp_path, "show", str(files["batch"]))
    assert listed.returncode == 0, listed.stderr
    (batch_id,) = nf.experiments(files["batch"])["batch_id"]
    batch = _cli(tmp_path, "show", str(files["batch"]), batch_id)
    assert batch.returncode != 0 and "allow_pickle" in batch.stderr, batch.stderr
    assert not files["marker"].exists()
