"""The public surface is pinned: additions are deliberate, removals are breaking."""

import types

import nbflow as nf

EXPECTED = {
    "MISSING",
    "REDACTED",
    "SYSTEM_CLOCK",
    "AnswerError",
    "Attempt",
    "BatchError",
    "BatchInterrupted",
    "BatchProgress",
    "BatchStore",
    "CallError",
    "CheckpointStore",
    "Clock",
    "ConfigError",
    "CycleError",
    "Default",
    "ErrorInfo",
    "Event",
    "Failed",
    "FakeClock",
    "FirstOf",
    "Flow",
    "FlowDefinitionError",
    "GraphError",
    "ItemFailed",
    "ItemRecord",
    "Iteration",
    "Limit",
    "Loop",
    "LoopLimitError",
    "Map",
    "MapItemError",
    "Missing",
    "MissingColumnError",
    "MissingInputError",
    "NbflowError",
    "NbflowWarning",
    "NodeCache",
    "NodeCall",
    "NodeCancelled",
    "NodeEvent",
    "NodeFailed",
    "NodeOutputError",
    "NodeStillRunningWarning",
    "ProcessNodeError",
    "QuestionExpiredError",
    "InputMutationError",
    "NodePaused",
    "NodeRecord",
    "NodeRetrying",
    "NodeSkipped",
    "NodeStarted",
    "NodeStatus",
    "NodeSucceeded",
    "NodeTimeoutError",
    "NodeUsage",
    "Question",
    "ResourceError",
    "ResumeConflictError",
    "Retry",
    "RoutingError",
    "Run",
    "RunFailedError",
    "RunFinished",
    "RunHandle",
    "RunInterrupted",
    "RunPaused",
    "RunStarted",
    "RunStatus",
    "RunnerError",
    "Score",
    "ScorerError",
    "Secret",
    "StateTransitionError",
    "StoreError",
    "StoredError",
    "SubflowFailedError",
    "SystemClock",
    "TypeValidationError",
    "UnknownInputError",
    "UnknownNodeError",
    "UsageError",
    "ask",
    "compare",
    "config",
    "explore",
    "env",
    "experiments",
    "first_of",
    "is_transient",
    "load_batch",
    "load",
    "load_run",
    "openlineage_events",
    "optional",
    "record_call",
    "recorded",
    "stream",
    "report",
    "summarize",
    "usage",
}


def test_all_is_sorted_and_pinned():
    """Exactly the public surface (httpx's test_exported_members, anyio's test_all_attributes)."""
    assert nf.__all__ == sorted(nf.__all__, key=lambda s: (not s.isupper(), s))
    assert set(nf.__all__) == EXPECTED
    for name in nf.__all__:
        assert hasattr(nf, name), name
    # Nothing else public is importable from the package root: every other module-level name is
    # private (underscore) or a submodule.
    extra = {n for n, v in vars(nf).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert extra - set(nf.__all__) <= {"annotations"}, sorted(extra - set(nf.__all__))


def test_public_modules_declare_all():
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(nf.__path__, "nbflow."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]) or info.name == "nbflow.demo":
            continue
        module = importlib.import_module(info.name)
        assert isinstance(getattr(module, "__all__", None), list), f"{info.name} has no __all__"


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
