"""Closing a run view or the explorer closes every widget it made: no comm is left open per displayed run (the
views a cell showed are closed when the cell runs again)."""

from __future__ import annotations

import warnings
from typing import Any

import ipywidgets
import pytest

import nbflow as nf
from nbflow.widgets import RunView
from tests.helpers import widget_comm


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return widget_comm.install(monkeypatch)


def _open_comms() -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (Widget.widgets: the registry of live widgets)
        return {k for k, w in ipywidgets.Widget.widgets.items() if w.comm is not None}


def test_a_closed_run_view_leaves_no_widget_open(comm_log: list[Any]) -> None:
    flow = nf.Flow("closed_view")

    @flow.node
    def a() -> int:
        return 1

    run = flow.run(show=False)
    before = _open_comms()
    views = [RunView(run) for _ in range(3)]
    assert len(_open_comms() - before) >= 3
    for view in views:
        view.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        left = [type(ipywidgets.Widget.widgets[k]).__name__ for k in _open_comms() - before]
    assert left == []


def test_a_closed_explorer_leaves_no_widget_open(comm_log: list[Any]) -> None:
    flow = nf.Flow("closed_explorer")

    @flow.node
    def a(x: int) -> int:
        if x == 1:
            raise ValueError("one")
        return x

    df = flow.batch([{"x": i} for i in range(3)], progress=False)
    before = _open_comms()
    view = nf.explore(df)
    view.table._handle_custom_msg({"type": "open", "pos": 1}, [])
    view.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        left = [type(ipywidgets.Widget.widgets[k]).__name__ for k in _open_comms() - before]
    assert left == []
