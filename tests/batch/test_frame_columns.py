"""The batch frame is built column by column (homogeneous int/float/bool columns through numpy); it must
be exactly what ``pandas.DataFrame.from_records`` gives for the same rows: dtypes, values, missing cells."""

from __future__ import annotations

import datetime
import decimal
import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbflow as nf

_values = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),  # beyond int64 too (uint64 / object columns)
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.binary(max_size=2),
    st.just(decimal.Decimal("1.5")),
    st.just(datetime.date(2024, 1, 2)),
    st.just(pd.Timestamp("2024-01-02")),
    st.just(np.int64(7)),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


def _echo_flow() -> nf.Flow:
    flow = nf.Flow("echo")

    @flow.node
    def out(v: object) -> object:
        return v

    return flow


def _missing(value: object) -> bool:
    return value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def _same(a: object, b: object) -> bool:
    if _missing(a) and _missing(b):  # NaN and NaT are never equal to themselves
        return type(a) is type(b)
    return type(a) is type(b) and bool(a == b) if not isinstance(a, np.ndarray) else bool((a == b).all())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(_values, min_size=1, max_size=6), st.lists(st.integers(-5, 5), min_size=1, max_size=6)))
def test_an_output_column_is_what_from_records_builds(values: list[object]) -> None:
    flow = _echo_flow()
    frame = flow.batch([{"v": v} for v in values], progress=False)
    expected = pd.DataFrame.from_records([{"out": v} for v in values], columns=["out"])
    assert frame["out"].dtype == expected["out"].dtype, (values, frame["out"].dtype, expected["out"].dtype)
    got, want = frame["out"].tolist(), expected["out"].tolist()
    assert all(_same(a, b) for a, b in zip(got, want, strict=True)), (got, want)
    # the input column, carried through the same way
    assert frame["v"].dtype == pd.DataFrame.from_records([{"v": v} for v in values])["v"].dtype
    # the status columns (text alone, None alone: built directly, as pandas would infer them)
    for column in ("status", "error_type", "error_message", "error_node", "run_id"):
        cells = frame[column].tolist()
        assert frame[column].dtype == pd.DataFrame.from_records([{column: c} for c in cells])[column].dtype, column


def test_error_columns_with_and_without_errors_are_what_from_records_builds() -> None:
    flow = nf.Flow("sometimes")

    @flow.node
    def half(x: int) -> int:
        if x % 2:
            raise ValueError("odd")
        return x

    for xs in ([0, 2, 4], [0, 1, 2], [1, 3]):
        frame = flow.batch([{"x": x} for x in xs], progress=False)
        for column in ("status", "error_type", "error_message", "error_node", "run_id"):
            cells = frame[column].tolist()
            expected = pd.DataFrame.from_records([{column: c} for c in cells])[column]
            assert frame[column].dtype == expected.dtype, (xs, column, frame[column].dtype, expected.dtype)
            assert all(_same(a, b) for a, b in zip(cells, expected.tolist(), strict=True)), (xs, column)


def test_status_columns_keep_their_dtypes_and_missing_question_cells_are_nan() -> None:
    flow = nf.Flow("asks")

    @flow.node
    async def review(x: int) -> str:
        if x == 1:
            return await nf.ask("Publish?", options=["yes", "no"])
        return "auto"

    frame = flow.batch([{"x": i} for i in range(3)], progress=False)
    assert frame["attempts"].dtype == "int64" and frame["latency"].dtype == "float64"
    assert frame["x"].dtype == "int64"
    assert list(frame["status"]) == ["succeeded", "paused", "succeeded"]
    assert frame.loc[1, "question_options"] == ["yes", "no"]
    assert isinstance(frame.loc[0, "question_options"], float) and math.isnan(frame.loc[0, "question_options"])


def test_a_secret_input_column_stays_an_object_column_of_secrets() -> None:
    flow = nf.Flow("secretive")

    @flow.node
    def used(api_key: str, x: int) -> int:
        return len(api_key) + x

    frame = flow.batch(
        [{"api_key": nf.Secret("sk-123"), "x": 1}, {"api_key": nf.Secret("sk-4567"), "x": 2}], progress=False
    )
    assert frame["api_key"].dtype == object
    assert all(isinstance(v, nf.Secret) for v in frame["api_key"])
    assert list(frame["used"]) == [7, 9] and frame["used"].dtype == "int64"
