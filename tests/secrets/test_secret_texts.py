"""``secret_texts`` (the texts a store redacts from a row): its shortcut for rows of plain scalars finds
exactly what the full walk finds (issue 14 made the common row skip the walk)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbflow as nf
from nbflow._core.secrets import _secret_values, secret_texts

pytestmark = pytest.mark.usefixtures("forget_generated_secrets")


def _walk(values: dict[str, Any], by_name: bool) -> tuple[str, ...]:
    found = {s for s in _secret_values(values, by_name=by_name) if len(s) >= 4}
    return tuple(sorted(found, key=len, reverse=True))


names = st.sampled_from(["x", "prompt", "api_key", "HF_TOKEN", "max_tokens", "password", "note"])
plain = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(), st.text(max_size=12))
leaves = st.one_of(plain, st.builds(nf.Secret, st.text(min_size=4, max_size=12)))
values = st.one_of(
    leaves,
    st.lists(leaves, max_size=3),
    st.dictionaries(names, leaves, max_size=3),
    st.builds(pydantic.SecretStr, st.text(min_size=4, max_size=8)),
)


@settings(max_examples=300, deadline=None)
@given(
    row=st.one_of(st.dictionaries(names, plain, max_size=5), st.dictionaries(names, values, max_size=5)),
    by_name=st.booleans(),
)
def test_the_shortcut_finds_what_the_full_walk_finds(row: dict[str, Any], by_name: bool) -> None:
    assert secret_texts(row, by_name=by_name) == _walk(row, by_name)


def test_a_plain_string_under_a_secret_name_is_found_and_a_plain_row_has_none() -> None:
    assert secret_texts({"x": 1, "api_key": "sk-abcdef"}) == ("sk-abcdef",)
    assert secret_texts({"x": 1, "api_key": "sk-abcdef"}, by_name=False) == ()
    assert secret_texts({"x": 1, "note": "sk-abcdef", "f": 0.5, "b": True, "n": None}) == ()
    assert secret_texts({"x": nf.Secret("hunter22")}, by_name=False) == ("hunter22",)
