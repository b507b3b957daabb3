"""The public surface is pinned: additions are deliberate, removals are breaking."""

import nbflow as nf

EXPECTED = {
    "MISSING",
    "Attempt",
    "BatchError",
    "BatchInterrupted",
    "BatchProgress",
    "CycleError",
    "Event",
    "Flow",
    "FlowDefinitionError",
    "GraphError",
    "Missing",
    "MissingColumnError",
    "MissingInputError",
    "NbflowError",
    "NbflowWarning",
    "NodeCancelled",
    "NodeEvent",
    "NodeFailed",
    "NodeOutputError",
    "NodeRecord",
    "NodeSkipped",
    "NodeStarted",
    "NodeStatus",
    "NodeSucceeded",
    "Run",
    "RunFailedError",
    "RunFinished",
    "RunHandle",
    "RunInterrupted",
    "RunStarted",
    "RunStatus",
    "RunnerError",
    "StateTransitionError",
    "BatchStore",
    "StoreError",
    "TypeValidationError",
    "UnknownInputError",
    "UnknownNodeError",
    "summarize",
    # resilience (docs/resilience.md)
    "SYSTEM_CLOCK",
    "Clock",
    "Default",
    "ErrorInfo",
    "Failed",
    "FakeClock",
    "Limit",
    "NodeRetrying",
    "NodeTimeoutError",
    "Retry",
    "SystemClock",
    "is_transient",
    # caching (docs/caching.md)
    "NodeCache",
}


def test_all_is_sorted_and_pinned():
    assert nf.__all__ == sorted(nf.__all__, key=lambda s: (not s.isupper(), s))
    assert set(nf.__all__) >= EXPECTED
    for name in nf.__all__:
        assert hasattr(nf, name), name


def test_every_error_is_an_nbflow_error_except_the_interrupt():
    for name in nf.__all__:
        obj = getattr(nf, name)
        if isinstance(obj, type) and issubclass(obj, BaseException) and name.endswith("Error"):
            if name == "StoredError":  # stands for a user's exception read back from a store
                continue
            assert issubclass(obj, nf.NbflowError), name
    assert issubclass(nf.RunInterrupted, KeyboardInterrupt)
    assert issubclass(nf.BatchInterrupted, KeyboardInterrupt)


def test_engine_imports_no_ui_or_pandas_at_module_level():
    import subprocess
    import sys

    code = (
        "import sys, nbflow as nf\n"
        "f = nf.Flow('x'); f.add(lambda: 1, name='a') if False else None\n"
        "bad = [m for m in ('ipywidgets', 'IPython', 'pandas', 'graphviz') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_missing_is_a_falsy_singleton_distinct_from_none():
    assert nf.MISSING is nf.Missing() and not nf.MISSING and nf.MISSING is not None
    assert repr(nf.MISSING) == "nbflow.MISSING"
