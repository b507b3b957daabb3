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
    "pydantic",
    "pandas",
    "numpy",
    "ipywidgets",
    "IPython",
    "graphviz",
    "distributed",
    "cloudpickle",
    "nbflow._core.events",
    "nbflow._flow.flow",
)

# What defining a flow (`nf.Flow` and a node; compiling it builds pydantic validators) must not load: batches, stores, the notebook view and
# the third-party stack. (The engine's event loop is still imported here: `asyncio` is what a
# hand-written DAG imports too.)
NOT_ON_DEFINE = (
    "sqlite3",
    "pathlib",
    "uuid",
    "anyio.from_thread",
    "pydantic",
    "pandas",
    "numpy",
    "ipywidgets",
    "IPython",
    "graphviz",
    "distributed",
    "cloudpickle",
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
    assert {"asyncio", "dataclasses", "nbflow._flow.flow"} <= set(loaded)
    assert "nbflow._batch.api" in _loaded_after("import nbflow as nf\nnf.Flow('x').batch", NOT_ON_DEFINE)


def test_defining_a_flow_loads_no_batch_store_or_notebook_stack():
    code = "import nbflow as nf\nflow = nf.Flow('x', retry=2)\n@flow.node\ndef a(x: int) -> int:\n    return x + 1\n"
    assert _loaded_after(code, NOT_ON_DEFINE) == []


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
