"""The inspector shows lists compactly: a map's list of numbers takes a few wrapped lines (not one line per
number), a long one shows its first items and a count, with every item behind "show all"; nested lists of plain
values stay on one line inside indented JSON."""

from __future__ import annotations

import html
import re

import pytest

import nbflow as nf
from nbflow.widgets.render import FLAT_SHOWN, MAX_ITEMS, render_value

pytestmark = pytest.mark.anyio


def _pres(out: str) -> list[str]:
    return [html.unescape(p) for p in re.findall(r"<pre[^>]*>([\s\S]*?)</pre>", out)]


async def test_a_maps_list_output_is_a_few_lines_with_a_count_and_show_all() -> None:
    flow = nf.Flow("mapped")

    @flow.node
    def items() -> list[int]:
        return list(range(320))

    @flow.node(map=nf.Map("items"))
    def double(items: int) -> int:
        return items * 2

    run = await flow.arun(show=False)
    out = render_value(run.outputs["double"])
    first, every = _pres(out)
    assert first.count("\n") == 0 and first.startswith("[0, 2, 4,") and first.endswith(f"… {320 - FLAT_SHOWN} more]")
    assert "<summary>show all 320 items</summary>" in out
    assert every.count("\n") == 0 and every.endswith(f"… {320 - MAX_ITEMS} more items not shown]")
    assert every.startswith("[0, 2, 4,") and f", {2 * (MAX_ITEMS - 1)}," in every


def test_short_lists_and_arrays_are_one_wrapped_line() -> None:
    np = pytest.importorskip("numpy")
    assert _pres(render_value([1.5, "x", None, True])) == ['[1.5, "x", null, true]']
    assert _pres(render_value(np.arange(4))) == ["[0, 1, 2, 3]"]
    assert _pres(render_value((1, 2))) == ["[1, 2]"]


def test_nested_lists_of_values_stay_on_one_line_in_indented_json() -> None:
    (text,) = _pres(render_value({"scores": [0.5, 0.25, 1.0], "meta": {"ids": [1, 2], "rows": [{"a": 1}]}}))
    assert text == (
        '{\n  "scores": [0.5, 0.25, 1.0],\n  "meta": {\n    "ids": [1, 2],\n    "rows": [\n      {\n'
        '        "a": 1\n      }\n    ]\n  }\n}'
    )
    (odd,) = _pres(render_value({(1, 2): "tuple key"}))  # not JSON: pprint's text, as before
    assert "(1, 2)" in odd
