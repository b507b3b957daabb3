"""Property: a run stored and loaded back equals the run in memory, field by field (random flows)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbflow as nf

VALUES = st.one_of(
    st.integers(-5, 5),
    st.text(max_size=4),
    st.lists(st.integers(0, 3), max_size=3),
    st.tuples(st.integers(0, 3), st.text(max_size=2)),
    st.dictionaries(st.text(max_size=2), st.integers(0, 3), max_size=2),
)
ERRORS = st.sampled_from([ValueError, KeyError, ZeroDivisionError, ConnectionError, RuntimeError])


@st.composite
def node_specs(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 6))
    specs = []
    for i in range(n):
        specs.append(
            {
                "deps": sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else [],
                "value": draw(VALUES),
                "fails": draw(st.integers(0, 3)),  # how many first attempts raise
                "error": draw(ERRORS),
                "attempts": draw(st.integers(1, 3)),
                "on_error": draw(st.sampled_from(["fail", "continue", "default"])),
            }
        )
    return specs


def build(specs: list[dict[str, Any]], name: str) -> nf.Flow:
    flow = nf.Flow(name, validate=False)
    for i, spec in enumerate(specs):
        calls = {"n": 0}

        def fn(_spec: dict[str, Any] = spec, _calls: dict[str, int] = calls, **kw: Any) -> Any:
            _calls["n"] += 1
            if _calls["n"] <= _spec["fails"]:
                raise _spec["error"](f"attempt {_calls['n']} of {sorted(kw)}")
            return _spec["value"]

        params = ", ".join(f"n{d}" for d in spec["deps"])
        src = f"def n{i}({params}):\n    return fn(**{{{', '.join(f'{p!r}: {p}' for p in params.split(', ') if p)}}})\n"
        scope: dict[str, Any] = {"fn": fn}
        exec(src, scope)
        on_error: Any = {"fail": "fail", "continue": "continue", "default": nf.Default(("default", i))}[
            spec["on_error"]
        ]
        flow.add(scope[f"n{i}"], retry=nf.Retry(attempts=spec["attempts"], backoff=0.0), on_error=on_error)
    return flow


def same_error(a: BaseException | None, b: BaseException | None) -> None:
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert type(a).__name__ == type(b).__name__ and str(a) == str(b)


def same_value(a: Any, b: Any) -> None:
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        same_error(a, b)
    elif isinstance(a, nf.Failed):
        assert isinstance(b, nf.Failed)
        assert (a.node, a.type, a.message) == (b.node, b.type, b.message)
    else:
        assert a == b and type(a) is type(b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_specs())
def test_a_reloaded_run_equals_the_run_in_memory(specs: list[dict[str, Any]]) -> None:
    flow = build(specs, "faithful_property")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "runs.db"
        run = flow.run(store=db, show=False)
        back = nf.load_run(db, run.run_id)
    same_run(back, run)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_specs())
def test_a_batch_row_stored_with_its_run_loads_back_equal(specs: list[dict[str, Any]]) -> None:
    # flow.batch(store=, keep="all") writes a whole run at once: one record per run when it is built-in
    # data (checkpoint schema 2), a row per node otherwise (an error in an attempt). Both load back equal.
    flow = build(specs, "faithful_batch_property")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "runs.db"
        frame = flow.batch([{}], store=db, keep="all", progress=False)
        run = frame.nbflow.run(0)
        back = nf.load_run(db, run.run_id)
    same_run(back, run)


def same_run(back: nf.Run, run: nf.Run) -> None:
    for field in ("run_id", "flow", "status", "reason", "started_at", "finished_at", "targets", "inputs"):
        assert getattr(back, field) == getattr(run, field), field
    assert list(back.nodes) == list(run.nodes)
    for name, rec in run.nodes.items():
        got = back.nodes[name]
        for field in (
            "status",
            "skip_reason",
            "started_at",
            "finished_at",
            "recovered",
            "cached",
            "cache_key",
            "overridden",
            "error_type",
            "error_message",
            "traceback",
            "duration",
        ):
            assert getattr(got, field) == getattr(rec, field), (name, field)
        same_value(got.output, rec.output)
        same_error(got.error, rec.error)
        assert len(got.attempts) == len(rec.attempts)
        for a, b in zip(got.attempts, rec.attempts, strict=True):
            assert (a.number, a.started_at, a.finished_at, a.delay) == (b.number, b.started_at, b.finished_at, b.delay)
            same_error(a.error, b.error)
        assert set(got.inputs) == set(rec.inputs)
        for k in rec.inputs:
            same_value(got.inputs[k], rec.inputs[k])
    assert back.to_frame().drop(columns=["output"]).equals(run.to_frame().drop(columns=["output"]))
