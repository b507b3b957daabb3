"""A secret whose text is also a word nbflow writes itself (a status, a node's name, an exception's type) is
redacted in the values a store holds, never in the fields that say what happened: the stored rows and runs read
back with their statuses, node names and ids, every kept row opens, and the secret's text is still not written
where it is a value."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nbflow as nf

pytestmark = pytest.mark.usefixtures("forget_generated_secrets")


def _flow() -> nf.Flow:
    flow = nf.Flow("structural")

    @flow.node
    def prepare(x: int, api_key: str) -> str:
        return f"{x}:{api_key}"  # echoes the row's secret: a value, redacted on disk

    class PrepareFailed(Exception):
        pass

    @flow.node
    def score(prepare: str, x: int) -> int:
        if x == 2:
            raise PrepareFailed(f"no score for {prepare}")
        return x * 10

    return flow


@pytest.mark.parametrize("keep", ["all", "none", "failed"])
def test_a_learned_secret_equal_to_a_status_leaves_stored_rows_readable(tmp_path: Path, keep: str) -> None:
    nf.Secret("succeeded")  # learned for the whole process: its text is redacted wherever it is a value
    flow = _flow()
    path = tmp_path / "rows.db"
    rows = pd.DataFrame({"x": [1, 2, 3], "api_key": ["k-1", "k-2", "k-3"]})
    df = flow.batch(rows, store=path, keep=keep, batch_id="b")
    assert df["status"].tolist() == ["succeeded", "failed", "succeeded"]

    back = nf.load_batch(path, "b")
    assert back["status"].tolist() == ["succeeded", "failed", "succeeded"]
    assert back["score"].tolist()[0] == 10
    assert back["error_node"].tolist()[1] == "score"
    assert back["error_type"].tolist()[1] == "PrepareFailed"
    assert back["run_id"].tolist() == df["run_id"].tolist()
    for suffix in (".jsonl", ".csv"):
        saved = df.nbflow.save(tmp_path / f"rows{suffix}")
        read = pd.read_json(saved, lines=True) if suffix == ".jsonl" else pd.read_csv(saved)
        assert read["status"].tolist() == ["succeeded", "failed", "succeeded"]
        assert read["api_key"].tolist() == ["[REDACTED]"] * 3
    if keep == "all":
        assert back.nbflow.run(0).status == "succeeded"
        assert back.nbflow.run(0)["score"] == 10
    if keep != "all":
        lineage = back.nbflow.lineage(0, "score")
        assert set(lineage["node"]) == {"prepare", "score"}
        assert set(lineage["parameter"]) == {"prepare", "x", "api_key"}


def test_a_row_secret_equal_to_a_node_name_is_redacted_as_a_value_only(tmp_path: Path) -> None:
    flow = _flow()
    path = tmp_path / "rows.db"
    # Each row's api_key is its secret (a secret-looking name); row 2's equals the failing node's name.
    rows = pd.DataFrame({"x": [1, 2, 3], "api_key": ["key-one", "score", "key-three"]})
    df = flow.batch(rows, store=path, keep="all", batch_id="b")
    assert df["error_node"].tolist()[1] == "score"

    back = nf.load_batch(path, "b")
    assert back["status"].tolist() == ["succeeded", "failed", "succeeded"]
    assert back["error_node"].tolist()[1] == "score"
    run = nf.load_run(path, df["run_id"][1])  # as the file holds it
    assert run.status == "failed"
    assert run.nodes["score"].status == "failed"
    assert run["prepare"] == "2:[REDACTED]"  # the secret's text as a value is redacted
    lineage = run.lineage()
    assert set(lineage["node"]) == {"prepare", "score"}
    assert lineage.loc[lineage["parameter"] == "api_key", "value"].tolist() == ["[REDACTED]"]
    assert "[REDACTED]" in str(back["error_message"].tolist()[1])
    with sqlite3.connect(path) as db:
        data = db.execute("SELECT data FROM batch_rows WHERE row_index = 1").fetchone()[0]
    assert "no score for" not in data  # the error message quoted the secret: redacted in the stored row


def test_a_learned_secret_equal_to_a_status_leaves_a_checkpointed_run_readable(tmp_path: Path) -> None:
    nf.Secret("succeeded")
    flow = _flow()
    path = tmp_path / "runs.db"
    run = flow.run({"x": 1, "api_key": "key-one"}, store=path)
    back = nf.load_run(path, run.run_id)
    assert back.status == "succeeded"
    assert [back.nodes[n].status for n in ("prepare", "score")] == ["succeeded", "succeeded"]
    assert back["score"] == 10
    assert set(back.lineage()["node"]) == {"prepare", "score"}


class PrepareFailed(Exception):
    pass


def test_records_of_every_shape_keep_their_words_and_lose_their_secrets(tmp_path: Path) -> None:
    # Learned secrets that are also a status, a node's name, an exception's type; one that is a real token.
    for word in ("succeeded", "summarize", "PrepareFailed"):
        nf.Secret(word)
    token = nf.Secret("tok-7f3a9c1e5b2d8e4f")
    flow = nf.Flow("shapes")
    tried: set[int] = set()

    @flow.node(retry=nf.Retry(attempts=2, backoff=0, on=PrepareFailed))
    def prepare(x: int) -> str:
        first = x not in tried
        tried.add(x)
        if x == 1 and first:  # (row 1's own first try, whichever row's call comes first)
            raise PrepareFailed(f"first try, with {token.reveal()}")  # recovered by the retry: an attempt's error
        return f"v{x}:{token.reveal()}"

    @flow.node
    def summarize(prepare: str, x: int) -> dict[str, Any]:
        print("summarizing", prepare)
        if x == 2:
            raise PrepareFailed(f"no summary of {prepare}")
        return {"summarize": prepare, "n": x}

    path = tmp_path / "rows.db"
    df = flow.batch(pd.DataFrame({"x": [1, 2, 3]}), store=path, batch_id="b")
    assert df["status"].tolist() == ["succeeded", "failed", "succeeded"]
    back = nf.load_batch(path, "b")
    assert back["status"].tolist() == ["succeeded", "failed", "succeeded"]
    assert back["error_type"].tolist()[1] == "PrepareFailed"
    assert back["error_node"].tolist()[1] == "summarize"
    for i, status in enumerate(["succeeded", "failed", "succeeded"]):
        run = nf.load_run(path, df["run_id"][i])
        assert run.status == status
        assert list(run.nodes) == ["prepare", "summarize"]
        assert run.nodes["prepare"].status == "succeeded"
        assert run.nodes["summarize"].status == ("failed" if i == 1 else "succeeded")
        assert set(run.lineage()["node"]) == {"prepare", "summarize"}
    assert nf.load_run(path, df["run_id"][0])["prepare"] == "v1:[REDACTED]"
    assert len(nf.load_run(path, df["run_id"][0]).nodes["prepare"].attempts) == 2
    assert token.reveal().encode() not in path.read_bytes()
