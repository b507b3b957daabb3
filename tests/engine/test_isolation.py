"""A node never changes another node's input: frames as copy-on-write copies, arrays read-only,
other values checked (nf.config.check_mutation, on in these tests) with the node named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nbflow as nf


def frame_flow() -> nf.Flow:
    flow = nf.Flow("iso")

    @flow.node
    def load() -> pd.DataFrame:
        return pd.DataFrame({"a": [1, 2, 3], "b": [4.0, 5.0, 6.0]})

    @flow.node
    def vandal(load: pd.DataFrame) -> int:
        load["extra"] = 1  # adds a column in place
        load.loc[0, "a"] = 999  # and overwrites a value
        del load["b"]
        return len(load.columns)

    @flow.node
    def sibling(load: pd.DataFrame) -> list[str]:
        return list(load.columns)

    @flow.node
    def total(load: pd.DataFrame, vandal: int) -> int:
        return int(load["a"].sum())

    return flow


def test_a_node_changing_a_dataframe_in_place_changes_nothing_for_its_siblings():
    flow = frame_flow()
    for _ in range(30):  # siblings run concurrently in threads: every run, the same answer
        run = flow.run(show=False)
        assert run.status is nf.RunStatus.SUCCEEDED, {n: r.error for n, r in run.nodes.items()}
        assert run["vandal"] == 2
        assert run["sibling"] == ["a", "b"]
        assert run["total"] == 6
        assert list(run["load"].columns) == ["a", "b"] and run["load"]["a"].tolist() == [1, 2, 3]


def test_a_series_and_a_dict_of_frames_are_isolated_too():
    flow = nf.Flow("iso_dict")

    @flow.node
    def split() -> dict:
        return {"train": pd.DataFrame({"x": [1, 2]}), "y": pd.Series([0, 1])}

    @flow.node
    def scale(split: dict) -> int:
        split["train"]["x"] *= 10
        split["y"][0] = 5
        return 0

    @flow.node
    def check(split: dict, scale: int) -> tuple[list, list]:
        return split["train"]["x"].tolist(), split["y"].tolist()

    run = flow.run(show=False)
    assert run["check"] == ([1, 2], [0, 1])


def test_a_numpy_input_is_read_only_and_the_upstream_array_unchanged():
    flow = nf.Flow("iso_np")

    @flow.node
    def arr() -> np.ndarray:
        return np.arange(4.0)

    @flow.node
    def writer(arr: np.ndarray) -> float:
        arr[0] = 100.0
        return float(arr.sum())

    @flow.node
    def copier(arr: np.ndarray) -> float:
        mine = arr.copy()  # the documented way to change it
        mine[0] = 100.0
        return float(mine.sum())

    run = flow.run(show=False)
    assert isinstance(run.nodes["writer"].error, ValueError)
    assert "read-only" in str(run.nodes["writer"].error)
    assert run["copier"] == 106.0
    assert run["arr"].tolist() == [0.0, 1.0, 2.0, 3.0] and run["arr"].flags.writeable


def test_the_mutation_check_names_the_node_and_parameter_that_changed_a_list():
    flow = nf.Flow("iso_list")

    @flow.node
    def rows() -> list[dict]:
        return [{"id": 1}, {"id": 2}]

    @flow.node
    def dedupe(rows: list[dict]) -> int:
        rows.append({"id": 3})
        return len(rows)

    run = flow.run(show=False)
    err = run.nodes["dedupe"].error
    assert isinstance(err, nf.InputMutationError) and isinstance(err, nf.NbflowError)
    assert err.node == "dedupe" and err.param == "rows"
    assert "node 'dedupe' changed its input 'rows'" in str(err) and "rows.copy()" in str(err)


def test_the_mutation_check_is_off_unless_asked_for():
    nf.config.check_mutation = False
    flow = nf.Flow("iso_off")

    @flow.node
    def rows() -> list[int]:
        return [1]

    @flow.node
    def grow(rows: list[int]) -> int:
        rows.append(2)
        return len(rows)

    assert flow.run(show=False)["grow"] == 2


def test_a_node_with_a_policy_is_checked_too():
    flow = nf.Flow("iso_policy")

    @flow.node
    def cfg() -> dict:
        return {"k": 1}

    @flow.node(retry=2)
    def tweak(cfg: dict) -> int:
        cfg["k"] += 1
        return cfg["k"]

    run = flow.run(show=False)
    assert isinstance(run.nodes["tweak"].error, nf.InputMutationError)


def test_config_rejects_non_bool_switches():
    with pytest.raises(nf.ConfigError, match="check_mutation"):
        nf.config.check_mutation = "yes"  # type: ignore[assignment]
    with pytest.raises(nf.ConfigError, match="process_workers"):
        nf.config.process_workers = 0


def test_a_flow_input_frame_is_isolated_for_each_node_and_for_the_caller():
    """A node fed by a flow input (not by another node) gets its own view of a frame or an array too: the
    caller's objects and the sibling reading the same input see them unchanged (chain and fan-out runs)."""
    flow = nf.Flow("iso_input")

    @flow.node
    def vandal(df: pd.DataFrame, arr: np.ndarray, k: int) -> int:
        df.loc[0, "a"] = 999
        df["extra"] = 1
        try:
            arr[0] = 999
        except ValueError:  # read-only: numpy's own refusal
            return -k
        return k

    @flow.node
    def sibling(df: pd.DataFrame, vandal: int) -> list[int]:
        return df["a"].tolist()

    df = pd.DataFrame({"a": [1, 2, 3]})
    arr = np.array([1, 2, 3])
    for _ in range(3):  # the first calls in a thread, then inline once the nodes proved quick
        run = flow.run({"df": df, "arr": arr, "k": 5}, show=False)
        assert run.status is nf.RunStatus.SUCCEEDED, {n: r.error for n, r in run.nodes.items()}
        assert run["vandal"] == -5
        assert run["sibling"] == [1, 2, 3]
    assert df["a"].tolist() == [1, 2, 3] and list(df.columns) == ["a"]
    assert arr.tolist() == [1, 2, 3] and arr.flags.writeable
