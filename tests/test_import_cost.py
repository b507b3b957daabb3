"""What `import nbflow` and defining a flow import: pinned, so the import-time gain cannot silently regress.

`import nbflow` loads its public names on first use (PEP 562 module ``__getattr__``); the heavy
modules below must not be in ``sys.modules`` afterwards. Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import nbflow as nf

# The heavy dependencies: neither importing nbflow nor defining a flow may load any of them.
HEAVY = ("pydantic", "pandas", "numpy", "ipywidgets", "IPython", "graphviz", "distributed", "cloudpickle")

# What the bare `import nbflow` must not load: the event loop, threads and networking it pulls in,
# storage, hashing and serialisation, type-heavy modules, dataclass creation, and every third-party
# dependency.
NOT_ON_IMPORT = (
    "asyncio",
    "anyio",
    "ssl",
    "socket",
    "concurrent.futures",
    "sqlite3",
    "hashlib",
    "json",
    "pickle",
    "pathlib",
    "inspect",
    "dataclasses",
    "typing",
    "uuid",
    *HEAVY,
    "nbflow._core.events",
    "nbflow._flow.flow",
)

# What defining a flow (`nf.Flow`, sync and async nodes, compiling it, its text drawing) must not load:
# the engine (the event loop, anyio, threads, the scheduler, events, run records, fingerprinting: the
# first run imports them), pydantic (the type checks' adapters are built at the first run), batches,
# stores, the notebook view and the third-party stack.
NOT_ON_DEFINE = (
    "asyncio",
    "anyio",
    "concurrent.futures",
    "socket",
    "ssl",
    "hashlib",
    "json",
    "pickle",
    "nbflow._core.events",
    "nbflow._record.run",
    "nbflow._engine.scheduler",
    "nbflow._engine.node",
    "nbflow._engine.policy",
    "nbflow._engine.kernel",
    "nbflow._engine.fingerprint",
    "nbflow._engine.caching",
    "nbflow._flow.resume",
    "sqlite3",
    "pathlib",
    "uuid",
    "anyio.from_thread",
    *HEAVY,
    "nbflow._batch.api",
    "nbflow._batch.rows",
    "nbflow._batch.paused",
    "nbflow._store.checkpoint",
    "nbflow._store.batch_store",
    "nbflow._store.node_cache",
    "nbflow._store.outputs",
    "nbflow._notebook",
    "nbflow.widgets",
)


def _loaded_after(code: str, watch: tuple[str, ...]) -> list[str]:
    """The modules of ``watch`` that running ``code`` in a fresh interpreter leaves loaded."""
    probe = f"import sys\n{code}\nprint([m for m in {list(watch)!r} if m in sys.modules])\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_import_nbflow_loads_nothing_heavy():
    assert _loaded_after("import nbflow", NOT_ON_IMPORT) == []


def test_the_probe_can_fail():
    assert _loaded_after("import nbflow, json", NOT_ON_IMPORT) == ["json"]
    loaded = _loaded_after("import nbflow\nnbflow.Flow", NOT_ON_IMPORT)
    assert {"dataclasses", "nbflow._flow.flow"} <= set(loaded)
    ran = _loaded_after(_DEFINE + "flow.run(path='p', show=False).raise_for_status()\n", NOT_ON_DEFINE)
    assert {"asyncio", "anyio", "pydantic", "nbflow._engine.scheduler", "nbflow._record.run"} <= set(ran)
    assert "nbflow._batch.api" in _loaded_after("import nbflow as nf\nnf.Flow('x').batch", NOT_ON_DEFINE)


# Defining a flow as a notebook does: options, sync and async nodes with and without hints, a limit,
# the compiled graph (policies and type checks resolved), its inputs and its text drawing (the
# `text/plain` of its display; the SVG needs graphviz).
_DEFINE = """
import nbflow as nf
from nbflow._show.draw import text_graph
flow = nf.Flow("x", retry=2, limits={"llm": nf.Limit(max_concurrency=2)})
@flow.node
def load(path: str) -> list[int]:
    return [len(path)]
@flow.node(uses="llm", timeout=5)
async def score(load: list[int], scale: float = 1.0) -> float:
    return sum(load) * scale
@flow.node
def report(score, load):
    return f"{score} {len(load)}"
assert list(flow.graph.nodes) == ["load", "score", "report"] and list(flow.inputs) == ["path", "scale"]
assert "score <- load, <scale>" in text_graph(flow.graph) and repr(flow) == "<Flow 'x': load, score, report>"
"""


def test_defining_a_flow_loads_no_engine_pydantic_batch_store_or_notebook_stack():
    assert _loaded_after(_DEFINE, NOT_ON_DEFINE) == []


def test_the_first_run_loads_the_engine_and_checks_types_before_any_node_starts():
    """The type checks made at compile build their pydantic adapters when the first run starts."""
    code = _DEFINE + (
        "import sys\n"
        "assert 'pydantic' not in sys.modules\n"
        "run = flow.run(path='abc', scale=2.0, show=False)\n"
        "assert run.status == 'succeeded' and run['report'] == '6.0 1', (run.status, run.outputs)\n"
        "try:\n"
        "    flow.run(path=['not', 'a', 'str'], show=False)\n"
        "except nf.TypeValidationError as exc:\n"
        "    assert exc.node == 'load' and exc.parameter == 'path', exc\n"
        "else:\n"
        "    raise AssertionError('no TypeValidationError')\n"
        "bad = nf.Flow('bad')\n"
        "@bad.node\n"
        "def out() -> int:\n"
        "    return 'x'\n"
        "assert 'validation' in str(bad.run(show=False).nodes['out'].error).lower()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "ok"


def test_the_lazy_methods_are_the_real_ones():
    from nbflow._batch import api, paused

    assert nf.Flow.batch is api.batch and nf.Flow.abatch is api.abatch
    assert nf.Flow.answer is paused.answer and nf.Flow.aanswer is paused.aanswer
    flow = nf.Flow("lazy")
    assert flow.batch.__func__ is api.batch and flow.batch.__self__ is flow


def test_every_public_name_resolves_to_its_module_and_type_checkers_see_the_same():
    """`_EXPORTS` (what runs) and the TYPE_CHECKING imports (what type checkers read) agree."""
    tree = ast.parse(Path(nf.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    static = {a.asname or a.name: node.module for node in block.body for a in node.names}
    assert static == nf._EXPORTS
    assert set(nf._EXPORTS) == set(nf.__all__)
    for name, module in nf._EXPORTS.items():
        assert getattr(nf, name) is getattr(importlib.import_module(module), name), name
    assert set(nf.__all__) <= set(dir(nf))


def test_an_unknown_name_is_a_plain_attribute_error():
    try:
        nf.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("no AttributeError")
    assert not hasattr(nf, "NoSuchThing")


def test_star_import_gives_every_public_name():
    namespace: dict[str, object] = {}
    exec("from nbflow import *", namespace)
    assert set(nf.__all__) <= set(namespace)


def test_pandas_first_then_nbflow_has_the_accessor_at_once():
    code = "import pandas as pd\nimport nbflow\nprint(hasattr(pd.DataFrame(), 'nbflow'))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


# What a script's plain run must not load (issue 35's cold start): the frame, the notebook views, drawing,
# storage and tracing are for the runs that ask for them.
NOT_ON_RUN = (
    "pandas",
    "numpy",
    "ipywidgets",
    "IPython",
    "graphviz",
    "sqlite3",
    "opentelemetry",
    "cloudpickle",
    "distributed",
    "nbflow._notebook",
    "nbflow.widgets",
    "nbflow._batch.api",
    "nbflow._store.checkpoint",
    "nbflow.otel",
)


def test_a_scripts_first_run_loads_no_frame_view_drawing_store_or_tracing():
    ran = _DEFINE + "assert flow.run(path='abc', scale=2.0)['report'] == '6.0 1'\n"
    assert _loaded_after(ran, NOT_ON_RUN) == []
    # the probe sees them when a run asks: show=True prints its progress through the notebook module
    assert _loaded_after(_DEFINE + "flow.run(path='abc', show=True)\n", NOT_ON_RUN) == ["nbflow._notebook"]


_BUILTIN_HINTS = """
import nbflow as nf
flow = nf.Flow("b")
@flow.node
def a(x: int, name: str = "n") -> int:
    return x + len(name)
@flow.node
def b(a: int) -> float:
    return a * 2
"""


def test_a_run_whose_values_have_their_builtin_hints_does_not_import_pydantic():
    # b returns an int for its float hint: converted as pydantic's lax mode does, without pydantic
    ran = _BUILTIN_HINTS + "out = flow.run(x=1)['b']\nassert out == 4.0 and type(out) is float, out\n"
    assert _loaded_after(ran, ("pydantic",)) == []
    # a value of another type is converted (or refused) by pydantic, imported then
    converted = _BUILTIN_HINTS + "assert flow.run(x='2')['b'] == 6.0\n"
    assert _loaded_after(converted, ("pydantic",)) == ["pydantic"]
    refused = _BUILTIN_HINTS + (
        "try:\n    flow.run(x='two')\nexcept nf.TypeValidationError as e:\n    assert \"parameter 'x'\" in str(e)\n"
        "else:\n    raise AssertionError('not refused')\n"
    )
    assert _loaded_after(refused, ("pydantic",)) == ["pydantic"]
