"""The viewer's data layer over real stores: read-only, paged, never unpickling; the pages' JSON."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import nbflow as nf
from nbflow._view.data import PAGE, StoreSource
from tests.view.conftest import digest, hostile_store


def test_experiments_list_names_every_experiment_with_counts_and_scores(runs_db: Path) -> None:
    src = StoreSource([runs_db])
    try:
        listed = {e["name"]: e for e in src.experiments()["experiments"]}
    finally:
        src.close()
    assert set(listed) == {"v1", "v2"}
    v1 = listed["v1"]
    assert (v1["rows"], v1["succeeded"], v1["failed"], v1["paused"]) == (15, 11, 1, 3)
    assert v1["flow"] == "qa" and v1["notes"] == "first try" and not v1["running"]
    assert "score terse 0.667" in v1["scores"]
    assert v1["store"] == "runs.db"  # the file's name only: never its folder
    assert str(runs_db.parent) not in json.dumps(src.labels)


def test_experiment_page_summary_is_nf_summarize_with_intervals(runs_db: Path) -> None:
    src = StoreSource([runs_db])
    try:
        exp = src.experiment("0:v1")
    finally:
        src.close()
    expected = nf.summarize(nf.load_batch(runs_db, "v1"), digits=None)
    table = exp["summary"]
    assert {"score_mean", "score_ci_low", "score_ci_high"} <= set(table["columns"])
    got = {row[0]: dict(zip(table["columns"], row, strict=True)) for row in table["rows"]}
    for variant, rec in expected.iterrows():
        assert got[variant]["score_mean"] == pytest.approx(rec["score_mean"])
        assert got[variant]["score_ci_low"] == pytest.approx(rec["score_ci_low"])
        assert got[variant]["failed"] == rec["failed"]
    assert sorted(exp["variants"]) == ["plain", "steps", "terse"]
    counts = {p["label"]: p["counts"] for p in exp["progress"]}
    assert counts["terse"]["failed"] == 1 and counts["terse"]["paused"] == 1 and counts["plain"]["succeeded"] == 4


def test_rows_filter_by_status_variant_score_search_and_sort(runs_db: Path) -> None:
    src = StoreSource([runs_db])
    try:
        failed = src.rows("0:v1", {"status": "failed"})
        steps = src.rows("0:v1", {"variant": "steps"})
        high = src.rows("0:v1", {"score": "score", "score_min": "1"})
        found = src.rows("0:v1", {"search": "ASK ME"})
        ordered = src.rows("0:v1", {"sort": "score desc"})
    finally:
        src.close()
    assert [(r["prompt"], r["status"]) for r in failed["rows"]] == [("terse", "failed")]
    assert failed["total"] == 1 and "model refused" in failed["rows"][0]["error_message"]
    assert steps["total"] == 5 and {r["prompt"] for r in steps["rows"]} == {"steps"}
    assert high["total"] > 0 and all(r["score"] >= 1 for r in high["rows"])
    assert found["total"] == 3 and {r["status"] for r in found["rows"]} == {"paused"}
    scores = [r["score"] for r in ordered["rows"] if r["score"] != ""]
    assert scores == sorted(scores, reverse=True) and ordered["rows"][-1]["score"] == ""  # missing last


def test_rows_are_paged(tmp_path: Path) -> None:
    flow = nf.Flow("many")

    @flow.node
    def double(x: int) -> int:
        return 2 * x

    flow.batch([{"x": i} for i in range(130)], store=tmp_path / "m.db", experiment="many", progress=False)
    src = StoreSource([tmp_path / "m.db"])
    try:
        first, last = src.rows("0:many", {}), src.rows("0:many", {"page": 2})
        beyond = src.rows("0:many", {"page": 99})
    finally:
        src.close()
    assert first["total"] == 130 and first["pages"] == 3 and len(first["rows"]) == PAGE
    assert [r["x"] for r in last["rows"]] == list(range(100, 130))
    assert beyond["page"] == 2  # past the end: the last page


def test_row_page_has_the_failed_nodes_traceback_and_the_paused_rows_question(runs_db: Path) -> None:
    src = StoreSource([runs_db])
    try:
        failed_index = src.rows("0:v1", {"status": "failed"})["rows"][0]["__index"]
        paused_index = src.rows("0:v1", {"status": "paused"})["rows"][0]["__index"]
        failed, paused, ok = src.row("0:v1", failed_index), src.row("0:v1", paused_index), src.row("0:v1", 0)
    finally:
        src.close()
    nodes = {n["name"]: n for n in failed["nodes"]}
    assert nodes["answer"]["status"] == "failed" and nodes["answer"]["error"].startswith("ValueError: model refused")
    assert "Traceback" in nodes["answer"]["traceback"] and nodes["score"]["status"] == "skipped"
    assert paused["questions"][0]["prompt"] == "Is this right?" and paused["questions"][0]["options"] == ["yes", "no"]
    assert ok["kept"] and {n["status"] for n in ok["nodes"]} == {"succeeded"}  # a succeeded row opens too
    assert ok["graph"] and 'id="node&#45;answer"' in ok["graph"]  # the flow's picture, from the store alone


def test_compare_lists_regressions_first_with_both_sides(runs_db: Path) -> None:
    src = StoreSource([runs_db])
    try:
        cmp = src.compare("0:v1", "0:v2")
        variants = src.compare("0:v1", "", ["terse", "steps"])
    finally:
        src.close()
    expected = nf.compare(nf.load_batch(runs_db, "v1"), nf.load_batch(runs_db, "v2"))
    assert cmp["summary"] == expected.attrs["summary"]
    assert [r["change"] for r in cmp["rows"]] == expected["change"].tolist()
    assert cmp["rows"][0]["change"] in ("newly_failing", "regressed")
    assert cmp["rows"][0]["__a"] is not None and cmp["rows"][0]["__b"] is not None
    assert variants["labels"] == ["terse", "steps"] and "steps vs terse" in variants["summary"]


def test_the_viewer_never_writes_the_store(runs_db: Path, tmp_path: Path) -> None:
    before = digest(runs_db)
    copy = tmp_path / "ro.db"
    copy.write_bytes(runs_db.read_bytes())
    os.chmod(copy, stat.S_IRUSR)  # a file nobody may write: the viewer reads it all the same
    for path in (runs_db, copy):
        src = StoreSource([path])
        try:
            src.experiments()
            src.experiment("0:v1", {"status": "failed", "sort": "score asc"})
            src.row("0:v1", 6)
            src.compare("0:v1", "0:v2")
            with pytest.raises(Exception, match=r"readonly|read-only"):
                src.stores[0]._db.execute("DELETE FROM batch_rows")
        finally:
            src.close()
    assert digest(runs_db) == before


def test_hostile_store_is_read_as_text_and_its_pickle_never_opened(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    db = hostile_store(tmp_path / "evil.db", marker)
    src = StoreSource([db])
    try:
        eid = src.experiments()["experiments"][0]["id"]
        exp = src.experiment(eid)
        rows = {r["x"]: r for r in exp["page"]["rows"]}
        details = [src.row(eid, r["__index"]) for r in exp["page"]["rows"]]
    finally:
        src.close()
    assert not marker.exists()  # the pickle (signed with this user's key) was never unpickled
    assert "not opened" in rows["huge"]["thing"] or "not unpickled" in rows["huge"]["thing"]
    assert len(rows["huge"]["text"]) <= 200  # a table cell is cut
    huge = next(d for d in details if d["values"]["x"] == "huge")
    text = next(n for n in huge["nodes"] if n["name"] == "text")["output"]
    assert len(text) < 25_000 and "more characters" in text
    thing = next(n for n in huge["nodes"] if n["name"] == "thing")["output"]
    assert "not opened" in thing


def test_a_missing_or_foreign_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(nf.StoreError, match="no store at"):
        StoreSource([tmp_path / "nope.db"])
    (tmp_path / "text.db").write_text("not a database")
    with pytest.raises(nf.StoreError, match=r"not a readable nbflow store|not a database|no nbflow batches"):
        StoreSource([tmp_path / "text.db"])


def test_several_stores_are_listed_together(runs_db: Path, tmp_path: Path) -> None:
    other = tmp_path / "runs.db"  # the same file name in another folder
    other.write_bytes(runs_db.read_bytes())
    src = StoreSource([runs_db, other])
    try:
        listed = src.experiments()
        second = src.experiment("1:v2")
    finally:
        src.close()
    assert listed["stores"] == ["runs.db (1)", "runs.db (2)"]
    assert sorted(e["id"] for e in listed["experiments"]) == ["0:v1", "0:v2", "1:v1", "1:v2"]
    assert second["store"] == "runs.db (2)" and second["page"]["total"] == 15


def test_a_running_batch_is_counted_by_sqlite_without_reading_its_rows(runs_db: Path, tmp_path: Path) -> None:
    """An experiment still being written (no end recorded) lists its counts from SQL (GROUP BY status): a row whose
    stored text cannot be decoded is counted too, as it would not be if the list read every row into Python."""
    import shutil
    import sqlite3

    db = tmp_path / "running.db"
    shutil.copy(runs_db, db)
    con = sqlite3.connect(db)
    with con:
        for batch_id, meta in con.execute("SELECT batch_id, meta FROM batches").fetchall():
            data = json.loads(meta)
            if data.get("experiment") == "v1":
                data.pop("counts", None)
                data.pop("finished_at", None)
                con.execute("UPDATE batches SET meta = ? WHERE batch_id = ?", (json.dumps(data), batch_id))
                con.execute(
                    "INSERT INTO batch_rows (batch_id, case_key, row_index, run_id, status, finished_at, data) "
                    "VALUES (?, 'k-garbled', 99, NULL, 'failed', 0, 'not json')",
                    (batch_id,),
                )
    con.close()
    src = StoreSource([db])
    try:
        listed = {e["name"]: e for e in src.experiments()["experiments"]}
    finally:
        src.close()
    v1 = listed["v1"]
    assert v1["running"]
    assert (v1["succeeded"], v1["failed"], v1["paused"]) == (11, 2, 3)
    assert nf.experiments(db).set_index("experiment").loc["v1", "failed"] == 2


def test_the_viewer_waits_for_a_store_a_report_needs_at_once(tmp_path: Path) -> None:
    """A file a batch is creating (empty here) is waited for by the viewer (``wait=True``: its pages raise NotYet
    until a batch is in it) and refused by a report; a folder, or a path in a missing folder, is never waited for."""
    from nbflow._view.data import NotYet

    db = tmp_path / "new.db"
    db.touch()
    with pytest.raises(nf.StoreError, match="no nbflow batches"):
        StoreSource([db])
    for path, said in ((tmp_path, "is a folder"), (tmp_path / "nope" / "new.db", "no folder")):
        with pytest.raises(nf.StoreError, match=said):
            StoreSource([path], wait=True)
    src = StoreSource([db], wait=True)
    try:
        assert src.stores == [None]
        with pytest.raises(NotYet, match=r"'new\.db' holds no experiment yet"):
            src.experiment("0:x")
        nf.BatchStore(db).close()  # its tables made, no batch in it yet
        assert src.experiments() == {"stores": ["new.db"], "experiments": [], "waiting": []}
        with pytest.raises(NotYet, match=r"no experiment '0:x' in new\.db yet"):
            src.experiment("0:x")
        with pytest.raises(nf.StoreError, match="no experiment") as found:
            src.experiment("x")
        assert not isinstance(found.value, NotYet)  # not an id at all: an error, not something to wait for
    finally:
        src.close()
    assert db.stat().st_size > 0 and not (tmp_path / "nope").exists()
