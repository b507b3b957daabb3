"""Progress state, the terminal line and the notebook widget (through a plain, kernel-less widget)."""

from __future__ import annotations

import io
import re

import nbflow as nf
from nbflow._notebook import make_renderer
from nbflow._show.text import TextProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def state(clock: Clock) -> nf.BatchProgress:
    return nf.BatchProgress("qa", total=200, started_at=clock(), clock=clock)


def test_rate_and_eta_come_from_finished_rows_and_the_injected_clock():
    clock = Clock()
    s = state(clock)
    assert s.rate is None and s.eta is None
    clock.now += 10
    s.succeeded, s.failed, s.in_flight, s.resumed = 45, 5, 8, 50
    assert s.done == 100
    assert s.rate == 5.0
    assert s.eta == 20.0
    assert s.text() == "qa: 100/200 done (5 failed), 50 from store, 8 in flight, 5.0 rows/s, ETA 20s"
    s.finished_at = clock.now
    s.stopped = "cancelled"
    assert s.text() == "qa: 100/200 done (5 failed), 50 from store, 5.0 rows/s, in 10s, stopped: cancelled"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_line_is_redrawn_in_place_after_a_delay():
    clock = Clock()
    s = state(clock)
    out = FakeTTY()
    text = TextProgress(out, delay=1.0)
    text.update(s)  # too early: a short batch prints nothing
    assert out.getvalue() == ""
    clock.now += 2
    s.succeeded = 10
    text.update(s)
    s.succeeded = 20
    text.update(s)
    s.finished_at = clock.now
    text.close(s)
    lines = out.getvalue().split("\r")
    assert lines[0] == ""
    assert lines[1].startswith("qa: 10/200 done")
    assert lines[2].startswith("qa: 20/200 done")
    assert out.getvalue().endswith("\n")


def test_a_short_batch_closes_without_output_and_non_terminals_get_sparse_lines():
    clock = Clock()
    s = state(clock)
    out = FakeTTY()
    TextProgress(out, delay=1.0).close(s)
    assert out.getvalue() == ""

    log = io.StringIO()
    text = TextProgress(log, every=5.0)
    for _ in range(10):
        clock.now += 1
        text.update(s)
    assert log.getvalue().count("\n") == 2  # one line per 5 s, not one per refresh


def test_auto_mode_outside_a_kernel_and_a_terminal_shows_nothing():
    assert make_renderer(None, kernel=False) is None  # pytest's stderr is not a terminal
    assert make_renderer(False, kernel=True) is None
    assert isinstance(make_renderer(True, kernel=False), TextProgress)


def test_widget_bar_shows_each_state_in_proportion():
    from nbflow.widgets.batch_progress import BatchProgressWidget

    clock = Clock()
    s = state(clock)
    w = BatchProgressWidget(display=False)
    clock.now += 4
    s.succeeded, s.failed = 30, 2
    w.update(s)
    assert "32/200 done (2 failed)" in w.label.value
    s.finished_at = clock.now
    s.succeeded, s.failed, s.paused = 27, 2, 1
    s.total = 30
    w.close(s)
    # the bar shows the proportions (27/30 succeeded, a thin patterned slice of 2/30 failed), not one colour
    widths = dict(re.findall(r'nbflow-seg-([\w-]+)" title="[^"]*" style="width:([\d.]+)%', w.bar.value))
    assert widths == {"succeeded": "90.000", "failed": "6.667", "paused": "3.333"}
    assert "repeating-linear-gradient(45deg" in w.bar.value  # failed: a pattern as well as a colour
    assert 'aria-label="✓ 27 succeeded, ✗ 2 failed, ‖ 1 paused"' in w.bar.value
    assert w._repr_mimebundle_()["text/plain"].startswith("<batch progress: qa: 30/30")


def test_a_batch_outside_a_kernel_does_not_import_ipywidgets():
    import os
    import subprocess
    import sys

    code = (
        "import sys, nbflow as nf\n"
        "flow = nf.Flow('x')\n"
        "flow.node(lambda a: a, name='echo')\n"
        "flow.batch([{'a': 1}], progress=True)\n"
        "print('ipywidgets' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert "x: 1/1 done" in out.stderr
    assert out.stdout.strip() == "False"


def test_the_displayed_line_is_updated_when_the_batch_ends(monkeypatch):
    """A saved notebook shows the final line, not the one of the first display (issue 18: frozen at 0/630)."""
    import IPython.display

    from nbflow.widgets.batch_progress import BatchProgressWidget
    from tests.helpers import widget_comm

    widget_comm.install(monkeypatch)
    shown = []

    snapshots = []

    class Handle:
        def update(self, obj, raw=False):
            if raw:  # the static snapshot beside the widget (saved notebooks)
                snapshots.append(obj["text/html"])
                return
            shown.append(obj._repr_mimebundle_()["text/plain"])

    def display(obj, display_id=None, raw=False):
        if raw:
            snapshots.append(obj["text/html"])
            return Handle()
        shown.append(obj._repr_mimebundle_()["text/plain"])
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    clock = Clock()
    s = state(clock)
    w = BatchProgressWidget(s)
    s.succeeded = 200
    s.finished_at = clock.now + 1
    w.close(s)
    assert shown[0].startswith("<batch progress: qa: 0/200")
    assert shown[-1].startswith("<batch progress: qa: 200/200")
    # the snapshot: empty while the batch runs (the live bar shows it), the final line once it ended
    assert len(snapshots) == 2 and "nbflow-snap" not in snapshots[0]
    assert "nbflow-snap" in snapshots[-1] and "qa: 200/200" in snapshots[-1]
