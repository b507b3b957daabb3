"""The circuit breaker's cool-down: pause new rows, probe once (half-open), resume or stop; FakeClock time."""

from __future__ import annotations

import asyncio

import pytest

import nbflow as nf


def outage_flow(clock: nf.FakeClock, until: float) -> nf.Flow:
    """A provider that is down until virtual time ``until``."""
    flow = nf.Flow("outage", clock=clock)

    @flow.node
    async def call(i: int) -> int:
        if clock.monotonic() < until:
            raise ConnectionError("503 service unavailable")
        return i

    return flow


ROWS = [{"i": i} for i in range(10)]


def test_a_cool_down_pauses_then_a_probe_resumes_the_batch(tmp_path):
    clock = nf.FakeClock()
    flow = outage_flow(clock, until=600)
    db = tmp_path / "runs.db"
    df = flow.batch(
        ROWS, concurrency=1, max_consecutive_failures=3, cooldown=300, store=db, experiment="night", progress=False
    )
    # rows 0-2 fail (t=0) -> cool-down to t=300 -> probe row 3 fails -> cool-down to t=600 -> probe row 4 succeeds
    assert df["status"].tolist() == ["failed"] * 4 + ["succeeded"] * 6
    assert clock.sleeps == [300, 300]
    assert df.attrs["stopped"] is None
    assert [c["seconds"] for c in df.attrs["cooldowns"]] == [300, 300]
    assert df.attrs["cooldowns"][0]["failures"] == 3 and "503" in df.attrs["cooldowns"][0]["error"]
    with nf.BatchStore(db) as store:
        meta = store.batch_info("night")["meta"]
    assert len(meta["cooldowns"]) == 2  # the store records the pauses


def test_after_max_cooldowns_it_stops_as_without_one():
    clock = nf.FakeClock()
    flow = outage_flow(clock, until=10_000)
    with pytest.warns(nf.NbflowWarning, match="stopped early"):
        df = flow.batch(ROWS, concurrency=1, max_consecutive_failures=2, cooldown=60, max_cooldowns=2, progress=False)
    # 2 failures, probe fails, probe fails: stop after 2 cool-downs
    assert df["status"].tolist() == ["failed"] * 4 + ["pending"] * 6
    assert clock.sleeps == [60, 60]
    assert "after 2 cool-downs of 60s" in df.attrs["stopped"]


def test_without_a_cool_down_the_breaker_stops_for_good():
    clock = nf.FakeClock()
    with pytest.warns(nf.NbflowWarning):
        df = outage_flow(clock, until=600).batch(ROWS, concurrency=1, max_consecutive_failures=3, progress=False)
    assert df["status"].tolist() == ["failed"] * 3 + ["pending"] * 7
    assert clock.sleeps == []


class SlowFakeClock(nf.FakeClock):
    """Virtual time, but a sleep also takes a little real time, so the progress display can see the pause."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0.7)
        await super().sleep(seconds)


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def update(self, state: nf.BatchProgress) -> None:
        self.lines.append(state.text())

    def close(self, state: nf.BatchProgress) -> None:
        self.lines.append(state.text())


def test_the_progress_line_shows_the_pause_and_the_time_left():
    clock = SlowFakeClock()
    recorder = Recorder()
    df = outage_flow(clock, until=250).batch(
        ROWS, concurrency=2, max_consecutive_failures=2, cooldown=300, progress=recorder
    )
    assert df["status"].tolist().count("succeeded") == 8
    paused = [line for line in recorder.lines if "paused" in line]
    assert paused, recorder.lines
    assert "paused: cool-down 1/3 after failures in a row, 5m00s left" in paused[0]
    assert "paused" not in recorder.lines[-1]


def test_a_timeout_during_a_cool_down_keeps_every_finished_row():
    flow = nf.Flow("down")

    @flow.node
    async def call(i: int) -> int:
        if i < 2:
            raise ConnectionError("down")
        return i

    with pytest.warns(nf.NbflowWarning, match="timeout"):
        df = flow.batch(
            [{"i": i} for i in range(6)],
            concurrency=1,
            max_consecutive_failures=2,
            cooldown=30,
            timeout=1.0,
            progress=False,
        )  # real clock: the 30 s cool-down is cut by the batch timeout after 1 s
    assert df["status"].tolist() == ["failed", "failed"] + ["pending"] * 4
    assert len(df.attrs["cooldowns"]) == 1


def test_cooldown_options_are_checked():
    flow = nf.Flow("x")
    flow.node(lambda i: i, name="f")
    with pytest.raises(nf.BatchError, match="pass both"):
        flow.batch(ROWS, cooldown=10)
    with pytest.raises(nf.BatchError, match="positive"):
        flow.batch(ROWS, max_consecutive_failures=2, cooldown=-1)
    with pytest.raises(nf.BatchError, match="max_cooldowns"):
        flow.batch(ROWS, max_consecutive_failures=2, cooldown=1, max_cooldowns=0)


CTRL_C_SCRIPT = r"""
import json, sys
import nbflow as nf

flow = nf.Flow("down")

@flow.node
async def call(i: int) -> int:
    if i >= 3:
        raise ConnectionError("503 service unavailable")
    return i

class Announce:
    said = False
    def update(self, state):
        if "paused" in state.text() and not self.said:
            self.said = True
            print("PAUSED", flush=True)
    def close(self, state):
        pass

try:
    flow.batch([{"i": i} for i in range(8)], concurrency=1, max_consecutive_failures=2, cooldown=300,
               store=sys.argv[1], experiment="night", progress=Announce())
except nf.BatchInterrupted as stop:
    print(json.dumps(stop.frame["status"].tolist()), flush=True)
"""


def test_ctrl_c_during_a_cool_down_keeps_every_finished_row_and_the_store_records_the_pause(tmp_path):
    import json
    import signal
    import subprocess
    import sys

    db = tmp_path / "runs.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_SCRIPT, str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "PAUSED", proc.communicate(timeout=60)
    proc.send_signal(signal.SIGINT)  # a real Ctrl-C, 300 s before the cool-down would end
    out, err = proc.communicate(timeout=60)
    # rows 0-2 succeed, 3-4 fail (2 in a row): the breaker pauses; the interrupt keeps every finished row
    assert json.loads(out.strip().splitlines()[-1]) == ["succeeded"] * 3 + ["failed"] * 2 + ["pending"] * 3, err
    with nf.BatchStore(db) as store:
        info = store.batch_info("night")
        stored = store.load("night")
    assert len(info["meta"]["cooldowns"]) == 1
    assert sorted(stored["status"].tolist()) == ["failed"] * 2 + ["succeeded"] * 3  # every finished row, stored
