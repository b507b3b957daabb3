"""Data-pipeline conveniences: lineage, to_dot(targets=), keep=, raise_on_failure, clear messages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nbflow as nf


def diamond() -> nf.Flow:
    flow = nf.Flow("pipe")

    @flow.node
    def load(n: int) -> pd.DataFrame:
        return pd.DataFrame({"x": np.arange(n, dtype=float)})

    @flow.node
    def clean(load: pd.DataFrame) -> pd.DataFrame:
        return load[load["x"] > 0]

    @flow.node
    def features(clean: pd.DataFrame) -> pd.DataFrame:
        return clean.assign(x2=clean["x"] ** 2)

    @flow.node
    def stats(load: pd.DataFrame) -> dict:
        return {"rows": len(load)}

    @flow.node
    def metrics(features: pd.DataFrame, stats: dict) -> dict:
        return {"sum": float(features["x2"].sum()), **stats}

    return flow


def test_upstream_and_downstream_list_the_lineage_in_run_order():
    flow = diamond()
    assert flow.upstream("metrics") == ["load", "clean", "features", "stats"]
    assert flow.upstream("metrics", direct=True) == ["features", "stats"]
    assert flow.downstream("load") == ["clean", "features", "stats", "metrics"]
    assert flow.downstream("clean", direct=True) == ["features"]
    assert flow.upstream("load") == [] and flow.downstream("metrics") == []
    with pytest.raises(nf.UnknownNodeError, match=r"'featurs'.*'features'"):
        flow.upstream("featurs")


def test_to_dot_with_targets_draws_only_what_would_run():
    flow = diamond()
    src = flow.to_dot(targets="features").source
    for drawn in ("load", "clean", "features"):
        assert f'id="node-{drawn}"' in src
    assert "node-stats" not in src and "node-metrics" not in src
    assert "node-metrics" in flow.to_dot().source


def test_keep_drops_intermediates_once_nothing_needs_them():
    flow = diamond()
    run = flow.run(n=5, keep=["metrics"], show=False)
    assert run["metrics"] == {"sum": 30.0, "rows": 5}
    for dropped in ("load", "clean", "features", "stats"):
        assert run.nodes[dropped].status is nf.NodeStatus.SUCCEEDED
        with pytest.raises(
            nf.NodeOutputError, match=rf"'{dropped}' ran, but its output was dropped.*keep=\['metrics'\]"
        ):
            run[dropped]
        assert run.nodes[dropped].inputs == {}
    full = flow.run(n=5, show=False)
    assert isinstance(full["features"], pd.DataFrame)  # without keep= everything stays
    with pytest.raises(nf.UnknownNodeError, match="keep="):
        flow.run(n=5, keep=["nope"], show=False)


def test_a_node_outside_the_targets_is_not_in_this_run():
    flow = diamond()
    run = flow.run(n=3, targets="clean", show=False)
    with pytest.raises(nf.NodeOutputError, match=r"'metrics' is not in this run.*targets=\['clean'\]"):
        run["metrics"]
    with pytest.raises(nf.UnknownNodeError, match="'metricz'"):
        run["metricz"]


def test_raise_on_failure_makes_run_raise():
    flow = nf.Flow("strict")

    @flow.node
    def boom() -> int:
        raise ValueError("no")

    assert flow.run(show=False).status is nf.RunStatus.FAILED
    nf.config.raise_on_failure = True
    try:
        with pytest.raises(nf.RunFailedError, match="boom"):
            flow.run(show=False)
    finally:
        nf.config.raise_on_failure = False


def test_type_validation_error_shows_a_frame_by_its_shape():
    flow = nf.Flow("shape")

    @flow.node
    def make() -> pd.DataFrame:
        return pd.DataFrame(np.zeros((11380, 68)))

    @flow.node
    def use(make: int) -> int:
        return make

    err = flow.run(show=False).nodes["use"].error
    assert isinstance(err, nf.TypeValidationError)
    assert "DataFrame 11380×68" in str(err) and "\n" not in str(err)


def test_a_node_with_several_outputs_exposes_each_field_as_a_node():
    from dataclasses import dataclass

    @dataclass
    class Split:
        X_train: list
        X_test: list

    flow = nf.Flow("fields")

    @flow.node(outputs=("X_train", "X_test"))
    def split(n: int) -> Split:
        return Split(list(range(n))[:3], list(range(n))[3:])

    @flow.node
    def fit(X_train: list) -> int:
        return sum(X_train)

    @flow.node
    def evaluate(fit: int, X_test: list) -> int:
        return fit + len(X_test)

    run = flow.run(n=6, show=False)
    assert run["evaluate"] == 6 and run["X_test"] == [3, 4, 5]
    assert flow.upstream("fit") == ["split", "X_train"]

    @flow.node(outputs=("X_train", "X_test"))  # a dict (or a tuple, by position) works too
    def split(n: int) -> dict:  # noqa: F811 - re-declared, as a re-run cell does
        return {"X_train": [1], "X_test": [2, 3]}

    assert flow.run(n=6, show=False)["evaluate"] == 3

    @flow.node(outputs=("X_train", "X_test"))
    def split(n: int) -> tuple:  # noqa: F811
        return ([5], [])

    assert flow.run(n=6, show=False)["evaluate"] == 5

    @flow.node(outputs=("X_train", "X_test"))
    def split(n: int) -> dict:  # noqa: F811
        return {"X_train": [1]}

    err = flow.run(n=6, show=False).nodes["X_test"].error
    assert isinstance(err, nf.NbflowError) and "outputs= field 'X_test'" in str(err) and "'split'" in str(err)


def test_outputs_clashing_with_a_node_is_refused():
    flow = nf.Flow("fields_clash")

    @flow.node
    def X_test() -> int:
        return 1

    with pytest.raises(nf.FlowDefinitionError, match="'X_test', which is already a node"):

        @flow.node(outputs=("X_train", "X_test"))
        def split() -> tuple:
            return (1, 2)


import pandera.pandas as pa  # noqa: E402
from pandera.typing import DataFrame, Series  # noqa: E402


class Patients(pa.DataFrameModel):  # module level: the string hint below resolves in this module
    age: Series[int] = pa.Field(ge=0)


def test_a_pandera_model_as_a_hint_checks_the_frame_and_names_the_node():
    flow = nf.Flow("schema")

    @flow.node
    def clean(raw: pd.DataFrame) -> DataFrame[Patients]:
        return raw

    bad = flow.run(raw=pd.DataFrame({"age": [1, -2]}), show=False)
    err = bad.nodes["clean"].error
    assert isinstance(err, nf.TypeValidationError) and err.node == "clean" and err.parameter == "return"
    assert "greater_than_or_equal_to(0)" in str(err) and "DataFrame 2×1" in str(err)
    assert flow.run(raw=pd.DataFrame({"age": [1, 2]}), show=False).status is nf.RunStatus.SUCCEEDED
