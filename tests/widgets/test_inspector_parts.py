"""The inspector shows a dict (or tuple) of DataFrames as one table per key, not as a repr."""

from __future__ import annotations

import re
from typing import Any

import pytest

import nbflow as nf
from nbflow.widgets import RunView
from tests.helpers import widget_comm

pytestmark = pytest.mark.anyio


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def split_flow() -> nf.Flow:
    flow = nf.Flow("split")

    @flow.node
    def data(n: int) -> Any:
        import pandas as pd

        return pd.DataFrame({"x": range(n), "y": [i % 2 for i in range(n)]})

    @flow.node
    def split(data: Any) -> dict[str, Any]:
        cut = len(data) * 3 // 4
        return {
            "X_train": data.iloc[:cut][["x"]],
            "X_test": data.iloc[cut:][["x"]],
            "y_train": data.iloc[:cut]["y"],
            "api_key": data.iloc[:1],
            "rows": cut,
        }

    @flow.node
    def pair(data: Any) -> tuple[Any, Any]:
        return data.head(2), data.tail(3)

    return flow


async def test_a_dict_of_dataframes_is_a_table_per_key(comm_log: list[Any]) -> None:
    view = RunView(split_flow().run(n=8, show=False))
    view.select("split")
    html = view.inspector
    assert "dict, 5 items" in html
    # one titled section per key, each with the part's own table
    labels = re.findall(r'<div class="nbflow-part"><div><b>([^<]+)</b>', html)
    assert labels == ["X_train", "X_test", "y_train", "api_key", "rows"]
    assert "DataFrame 6×1" in html and "DataFrame 2×1" in html and "Series 6" in html
    sections = html.split('<div class="nbflow-part">')[1:]
    assert all("<table" in s for s in sections[:3])
    assert "<table" not in sections[3] and "••" in sections[3]  # a secret-named key is masked, never a table
    assert (
        '<b>rows</b></div><div class="nbflow-muted">int</div><div class="nbflow-scroll" tabindex="0" role="region" aria-label="value"><pre>6</pre>'
        in html
    )
    assert "{&#x27;X_train&#x27;" not in html and "{'X_train'" not in html  # not the dict's repr


async def test_a_tuple_of_dataframes_is_a_table_per_position(comm_log: list[Any]) -> None:
    view = RunView(split_flow().run(n=8, show=False))
    view.select("pair")
    html = view.inspector
    labels = re.findall(r'<div class="nbflow-part"><div><b>([^<]+)</b>', html)
    assert labels == ["[0]", "[1]"]
    assert html.count('<table class="dataframe"') == 2 and "DataFrame 2×2" in html and "DataFrame 3×2" in html


async def test_many_frames_are_cut_with_a_note(comm_log: list[Any]) -> None:
    import pandas as pd

    from nbflow.widgets.render import MAX_PARTS, render_value

    frames = {f"part{i}": pd.DataFrame({"x": [i]}) for i in range(MAX_PARTS + 3)}
    html = render_value(frames)
    assert html.count("<table") == MAX_PARTS
    assert "3 more not shown: part20, part21, part22" in html


async def test_what_a_node_printed_is_shown_in_the_inspector_as_a_cell_output(comm_log: list[Any]) -> None:
    flow = nf.Flow("printer")

    @flow.node
    def train(api_key: str) -> int:
        print("epoch 1: loss 0.5")
        print(f"<b>not html</b> with {api_key}")
        return 1

    view = RunView(flow.run(api_key="sk-hidden-1234", show=False))
    view.select("train")
    html = view.inspector
    assert '<div><b>printed</b></div><pre class="nbflow-printed">epoch 1: loss 0.5\n' in html
    assert "&lt;b&gt;not html&lt;/b&gt; with [REDACTED]" in html  # escaped, and the secret never reached it
    assert "sk-hidden-1234" not in html
