"""Lineage of reused and not-kept batch rows, and what a node's spans carry (issue 34, lineage items)."""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf


def _pipe(name: str = "pipe") -> nf.Flow:
    flow = nf.Flow(name)

    @flow.node
    def raw(n: int, noise: float = 0.1, seed: int = 0) -> pd.DataFrame:
        return pd.DataFrame({"x": [(i * 7 + seed) % 5 * noise for i in range(n * 100)]})

    @flow.node
    def score(raw: pd.DataFrame) -> float:
        return float(raw["x"].sum())

    return flow


def _edit_score(flow: nf.Flow) -> None:
    @flow.node
    def score(raw: pd.DataFrame) -> float:
        return float(raw["x"].sum()) * 2


def test_a_reused_node_records_the_inputs_it_was_fed_by_reference(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _pipe()
    flow.batch([{"n": 3}, {"n": 4, "seed": 2}], store=db, batch_id="b", progress=False)
    values_before = sqlite3.connect(db).execute("SELECT count(*) FROM nbflow_values").fetchone()[0]
    _edit_score(flow)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nf.NbflowWarning)
        again = flow.batch([{"n": 3}, {"n": 4, "seed": 2}], store=db, batch_id="b", resume=True, progress=False)
    assert [list(r) for r in again["reused"]] == [["raw"]] * 2
    run = again.nbflow.run(1)
    assert run.nodes["raw"].cached
    assert run.nodes["raw"].inputs == {"n": 4, "seed": 2}  # what it was fed (its defaults: in the lineage)
    assert run.nodes["score"].inputs["raw"] is run.nodes["raw"].output

    # Stored: the re-run rows added no copy of the frames (the fed output and score's input are one value).
    values_after = sqlite3.connect(db).execute("SELECT count(*) FROM nbflow_values").fetchone()[0]
    assert values_after == values_before
    loaded = nf.load_run(db, run.run_id)
    assert loaded.nodes["raw"].inputs == {"n": 4, "seed": 2}
    lin = loaded.lineage("score")
    got = {(r.node, r.parameter): (r.kind, r.value) for r in lin.itertuples()}
    assert got["raw", "seed"] == ("input", "2") and got["raw", "noise"] == ("default", "0.1")
    rows = {(r.node, r.parameter): r for r in lin.itertuples()}
    assert rows["score", "raw"].data_version == rows["raw", "n"].output_version  # the chain is whole
    # A frame's row answers the same through the accessor (its run kept in the store: keep="all").
    assert again.nbflow.lineage(1, "score")[["node", "parameter", "kind", "value"]].equals(
        lin[["node", "parameter", "kind", "value"]]
    )


def test_every_span_of_a_node_carries_its_resolved_inputs_defaults_and_versions() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    flow = nf.Flow("traced", retry=nf.Retry(attempts=2, backoff=0.01), clock=nf.FakeClock())
    calls = {"n": 0}

    @flow.node
    def raw(n: int, api_key: str, noise: float = 0.1, seed: int = 0) -> list[float]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("flaky")
        return [i * noise + seed for i in range(n)]

    @flow.node
    def score(raw: list[float], scale: int = 3) -> float:
        return sum(raw) * scale

    run = flow.run(n=4, api_key="sk-never-shown-123", trace=provider)
    lin = {(r.node, r.parameter): r for r in run.lineage().itertuples()}
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("node ")]
    raws = [dict(s.attributes or {}) for s in spans if s.name == "node raw"]
    assert len(raws) == 2  # the failed attempt's span too
    for attrs in raws:
        assert attrs["nbflow.input.noise"] == "0.1" and attrs["nbflow.input.noise.kind"] == "default"
        assert attrs["nbflow.input.seed"] == "0" and attrs["nbflow.input.seed.kind"] == "default"
        assert attrs["nbflow.input.n"] == "4" and attrs["nbflow.input.n.kind"] == "input"
        assert attrs["nbflow.input.noise.version"] == lin["raw", "noise"].data_version
        assert attrs["nbflow.input.api_key"] == "[REDACTED]" and "nbflow.input.api_key.version" not in attrs
        assert attrs["nbflow.code_version"] == lin["raw", "n"].code_version
    (s,) = [dict(s.attributes or {}) for s in spans if s.name == "node score"]
    assert s["nbflow.input.scale"] == "3" and s["nbflow.input.scale.kind"] == "default"
    assert s["nbflow.input.raw.kind"] == "node" and s["nbflow.input.raw.source"] == "raw"
    assert s["nbflow.input.raw.version"] == lin["score", "raw"].data_version == lin["raw", "n"].output_version
    assert "sk-never-shown-123" not in repr([dict(x.attributes or {}) for x in exporter.get_finished_spans()])

    # A node that did not run (its cached output) has one instant span carrying the same.
    cached = nf.Flow("cached_trace", cache=True)

    @cached.node
    def f(x: int, k: int = 5) -> int:
        return x * k

    cached.run(x=2)
    exporter.clear()
    cached.run(x=2, trace=provider)
    (c,) = [dict(s.attributes or {}) for s in exporter.get_finished_spans() if s.name == "node f"]
    assert c["nbflow.cached"] is True and c["nbflow.input.k"] == "5" and c["nbflow.input.k.kind"] == "default"
    assert c["nbflow.code_version"] and c["nbflow.output_version"]


PIPE_MODULE = """
import nbflow as nf
import pandas as pd
import pytest

flow = nf.Flow("pipe")

@flow.node
def raw(n: int, noise: float = 0.1, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"x": [(i * 7 + seed) % 5 * noise for i in range(n * 100)]})

@flow.node
def score(raw: pd.DataFrame, api_key: str) -> float:
    return float(raw["x"].sum())
"""


def _run_python(cwd: Path, code: str) -> str:
    import subprocess
    import sys
    import textwrap

    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_row_whose_run_was_not_kept_still_answers_which_code_and_data_made_it(tmp_path: Path) -> None:
    (tmp_path / "pipe_rows.py").write_text(PIPE_MODULE)
    _run_python(
        tmp_path,
        """
        import nbflow as nf, pipe_rows as pipe
        rows = [{"n": 2, "api_key": "sk-row-secret-1"}, {"n": 5, "api_key": "sk-row-secret-1", "seed": 3}]
        df = pipe.flow.batch(rows, store="runs.db", keep="none", experiment="sweep", progress=False)
        assert list(df["status"]) == ["succeeded"] * 2
        # in this process: the runs were not kept, the store answers
        try:
            df.nbflow.run(1)
        except nf.BatchError:
            pass
        else:
            raise AssertionError("the run was kept")
        lin = df.nbflow.lineage(1, "score")
        print("LIVE", lin[["node", "parameter", "kind", "value"]].values.tolist())
        print("LIVECODE", lin["code_version"].tolist())
        print("LIVEV", lin["data_version"].tolist(), lin["output_version"].tolist())
        """,
    )
    out = _run_python(
        tmp_path,
        """
        import nbflow as nf
        df = nf.load_batch("runs.db", "sweep")
        lin = df.nbflow.lineage(1, "score")
        print("ROWS", lin[["node", "parameter", "kind", "value"]].values.tolist())
        print("CODE", lin["code_version"].tolist())
        print("V", lin["data_version"].tolist(), lin["output_version"].tolist())
        print("ENV", sorted(lin.attrs["environment"]))
        """,
    )
    assert (
        "ROWS [['raw', 'n', 'input', '5'], ['raw', 'noise', 'default', '0.1'], ['raw', 'seed', 'input', '3'], "
        "['score', 'raw', 'node', None], ['score', 'api_key', 'input', '[REDACTED]']]" in out
    )
    code = next(line for line in out.splitlines() if line.startswith("CODE"))
    assert "None" not in code and len(set(eval(code[5:]))) == 2  # both nodes' code versions
    versions = next(line for line in out.splitlines() if line.startswith("V "))
    inputs, outputs = eval(versions[2:].replace("] [", "], ["))
    assert inputs[3] == outputs[0] and inputs[3].startswith("v:")  # score's input is raw's output, by digest
    assert inputs[4] is None  # (a secret has no data version)
    assert "ENV ['git', 'nbflow', 'packages', 'python']" in out
    assert b"sk-row-secret-1" not in (tmp_path / "runs.db").read_bytes()
    # The same numbers as a kept run's lineage computed in memory.
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        import pipe_rows as pipe  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    live = pipe.flow.run(n=5, seed=3, api_key="k").lineage("score")
    assert live["output_version"].tolist() == outputs
    assert live["code_version"].tolist() == eval(code[5:])


def test_keep_nodes_drops_outputs_but_not_their_data_versions(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _pipe("kept_nodes")
    df = flow.batch([{"n": 3}, {"n": 4, "seed": 2}], store=db, keep=["score"], batch_id="k", progress=False)
    run = nf.load_run(db, df["run_id"].iloc[1])
    with pytest.raises(nf.NodeOutputError):
        run["raw"]  # dropped: not in keep=
    lin = df.nbflow.lineage(1, "score")
    rows = {(r.node, r.parameter): r for r in lin.itertuples()}
    assert rows["raw", "n"].output_version is not None and rows["raw", "n"].output_version.startswith("v:")
    assert rows["score", "raw"].data_version == rows["raw", "n"].output_version
    assert rows["raw", "n"].output_version == flow.run(n=4, seed=2).lineage("raw")["output_version"].iloc[0]


def test_a_store_written_before_row_lineage_still_opens_and_says_why_a_row_has_none(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    flow = _pipe("older")
    flow.batch([{"n": 3}], store=db, keep="none", batch_id="old", progress=False)
    with sqlite3.connect(db) as con:  # the file as nbflow wrote it before rows kept their lineage
        con.execute("ALTER TABLE batch_rows DROP COLUMN lineage")
    df = nf.load_batch(db, "old")  # (read-only)
    assert df["status"].tolist() == ["succeeded"]
    with pytest.raises(nf.BatchError, match="no lineage stored"):
        df.nbflow.lineage(0)
    # Opened writable, the file gets the column; new rows keep their lineage, the old row still has none.
    again = flow.batch([{"n": 3}, {"n": 4}], store=db, keep="none", batch_id="old", resume=True, progress=False)
    assert again.nbflow.lineage(1, "raw")["value"].tolist() == ["4", "0.1", "0"]
    with pytest.raises(nf.BatchError, match="no lineage stored"):
        again.nbflow.lineage(0)


def test_a_secret_named_default_has_no_value_and_no_data_version() -> None:
    flow = nf.Flow("secret_default")

    @flow.node
    def call(x: int, api_key: str = "sk-default-key-123") -> int:
        return x

    lin = flow.run(x=1).lineage()
    assert lin[["parameter", "kind", "value"]].values.tolist() == [
        ["x", "input", "1"],
        ["api_key", "default", "[REDACTED]"],
    ]
    assert lin["data_version"].tolist()[1] is None  # (a digest of a secret would identify it)
    assert "sk-default-key-123" not in lin.to_csv()


def test_a_row_whose_run_was_not_kept_names_what_its_kept_run_would(tmp_path: Path) -> None:
    """A row's stored lineage (keep="none") is made by its own path: it must say what a kept run's lineage says,
    for the values a row's inputs usually are (numbers, flags, None, texts short and long, defaults)."""
    flow = nf.Flow("shapes")

    @flow.node
    def prep(a: int, b: float, c: str, d: bool | None = None, e: str = "e" * 200) -> str:
        return f"{a}{b}{c}{d}{e}"

    @flow.node
    def out(prep: str, flag: bool) -> int:
        return len(prep) + flag

    rows = [
        {"a": 1, "b": 0.5, "c": "y" * 150, "flag": False},
        {"a": 2**70, "b": -0.0, "c": "", "d": True, "flag": True},
        {"a": -3, "b": 1e300, "c": "it's", "d": None, "e": "short", "flag": False},
    ]
    none = flow.batch(rows, store=tmp_path / "none.db", keep="none", progress=False)
    kept = flow.batch(rows, store=tmp_path / "all.db", keep="all", progress=False)
    for i, row in enumerate(rows):
        expected = flow.run(**row).lineage()
        pd.testing.assert_frame_equal(none.nbflow.lineage(i), expected)
        pd.testing.assert_frame_equal(kept.nbflow.lineage(i), expected)
    first = none.nbflow.lineage(0).set_index("parameter")
    assert first.loc["a", "value"] == "1" and first.loc["b", "value"] == "0.5" and first.loc["flag", "value"] == "False"
    assert first.loc["c", "value"] == repr("y" * 150)[:117] + "..."
    assert first.loc["e", "kind"] == "default" and first.loc["e", "value"] == repr("e" * 200)[:117] + "..."
    second = none.nbflow.lineage(1).set_index("parameter")
    assert second.loc["a", "value"] == str(2**70) and second.loc["b", "value"] == "-0.0"
    assert second.loc["b", "data_version"] != first.loc["b", "data_version"]  # (by value: -0.0 is not 0.5)
    third = none.nbflow.lineage(2).set_index("parameter")
    assert third.loc["d", "kind"] == "input" and third.loc["d", "value"] == "None"
    assert third.loc["a", "data_version"].startswith("v:")


@pytest.mark.parametrize("keep", ["none", "all"])
def test_rows_copied_by_reuse_keep_the_lineage_of_the_batch_that_computed_them(tmp_path: Path, keep: str) -> None:
    """``reuse=`` copies a row whose nodes did not change into the new batch: its lineage is the reused row's (its
    values were computed there), in this process, after a restart and after the reused batch is deleted; and the
    environment it names is that batch's when it differs from the new batch's."""
    db = tmp_path / "runs.db"
    flow = _pipe()
    cases = [{"n": 3}, {"n": 4, "seed": 2}]
    v1 = flow.batch(cases, store=db, experiment="v1", keep=keep, progress=False)
    before = [v1.nbflow.lineage(i) for i in range(2)]
    # v1 as if it had run at another commit: its experiment record names another environment.
    con = sqlite3.connect(db)
    meta = json.loads(con.execute("SELECT meta FROM batches WHERE batch_id = 'v1'").fetchone()[0])
    meta["environment"] = {**meta["environment"], "git": {"commit": "0" * 40, "dirty": False}}
    with con:
        con.execute("UPDATE batches SET meta = ? WHERE batch_id = 'v1'", (json.dumps(meta),))
    con.close()

    v2 = flow.batch([*cases, {"n": 5}], store=db, experiment="v2", reuse="v1", keep=keep, progress=False)
    assert v2["status"].tolist() == ["succeeded"] * 3
    assert list(v2["reused"][:2]) == [["raw", "score"]] * 2  # copied whole: nothing ran again

    def same(a: pd.DataFrame, b: pd.DataFrame) -> None:
        cols = ["node", "parameter", "source", "kind", "value", "data_version", "output_version", "code_version"]
        pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), b[cols].reset_index(drop=True))

    for i in range(2):
        same(v2.nbflow.lineage(i), before[i])
    assert v2.nbflow.lineage(2, "score")["output_version"].notna().all()  # the row that ran in v2

    loaded = nf.load_batch(db, "v2")  # another process's view: the file alone
    with nf.BatchStore(db) as store:
        store.delete_batch("v1")
    reloaded = nf.load_batch(db, "v2")
    for frame in (loaded, reloaded):
        for i in range(2):
            same(frame.nbflow.lineage(i), before[i])
    # The environment a copied row names is the one its values were computed in (v1's); the new row's is v2's.
    for frame in (v2, loaded, reloaded):
        assert frame.nbflow.lineage(0).attrs["environment"]["git"] == {"commit": "0" * 40, "dirty": False}
        assert frame.nbflow.lineage(2).attrs["environment"]["git"] != {"commit": "0" * 40, "dirty": False}
        assert frame.nbflow.lineage(2).attrs["environment"]["python"] == before[0].attrs["environment"]["python"]
