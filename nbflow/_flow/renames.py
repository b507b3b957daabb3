"""A notebook cell re-run with a node's function renamed: say that the old node is still wired.

Re-running a cell that defines ``@flow.node def clean`` replaces node ``clean``. Renaming the function
to ``clean2`` and re-running the cell *adds* ``clean2``, and ``clean`` stays in the flow: nodes that
take ``clean`` still get the old function's output, silently. So, in IPython, every node declared by a
function remembers where it was declared: the cell (the front end's cell id; without one, the
function's body, byte code and constants) and the line of its ``def``/decorator. When a cell's
execution ends (``post_run_cell``), a node it declared at the place where an earlier execution of the
same cell declared another node, which is still in the flow unchanged, gets a warning naming both
and the fix (``flow.remove("clean")``).

Checked after the cell, not at each declaration, so a cell that declares several nodes from one
factory (the same function, so the same place) never warns about a node it declares again a few
lines later. Outside IPython nothing is recorded (a script declares each node once).
"""

from __future__ import annotations

import sys
import warnings
import weakref
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import NbflowWarning
from nbflow._core.records import record

if TYPE_CHECKING:
    from nbflow._dsl.spec import NodeSpec
    from nbflow._flow.flow import Flow

__all__ = ["note_declared"]


@record(frozen=True)
class _Origin:
    place: tuple[str, ...]  # ("cell", cell id) or ("code", hash of the body)
    line: int
    execution: str
    spec: NodeSpec


_origins: weakref.WeakKeyDictionary[Flow, dict[str, _Origin]] = weakref.WeakKeyDictionary()
# The same origins by place: (place, line) -> the names declared there (a cell's end looks up its own only).
_places: weakref.WeakKeyDictionary[Flow, dict[tuple[tuple[str, ...], int], dict[str, None]]] = (
    weakref.WeakKeyDictionary()
)
_declared: list[tuple[weakref.ref[Flow], str]] = []  # declared in the current execution
_hooked: set[int] = set()  # ids of the IPython shells the hook is registered with


def _shell() -> Any:
    if "IPython" not in sys.modules:  # never imported: not in IPython (costs nothing in scripts)
        return None
    from IPython import get_ipython

    return get_ipython()


def _parent(shell: Any) -> dict[str, Any]:
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else None
    except Exception:
        parent = None
    return parent or {}


def _body(code: Any) -> str:
    """The function's body without its name: a rename keeps it (consts hold nested code objects by repr)."""
    consts = tuple(c.co_code if hasattr(c, "co_code") else repr(c) for c in code.co_consts)
    text = repr((code.co_code, consts, code.co_names, code.co_varnames))
    import hashlib  # here: only a cell without an id (an old front end) needs it

    return hashlib.sha1(text.encode()).hexdigest()


def note_declared(flow: Flow, spec: NodeSpec, func: Any) -> None:
    """Remember where node ``spec`` was declared (in IPython only); checked when the cell ends."""
    if "IPython" not in sys.modules:  # (what _shell checks first: a script declaring many nodes pays nothing)
        return
    shell = _shell()
    code = getattr(func, "__code__", None)
    events = getattr(shell, "events", None)
    if shell is None or code is None or events is None:  # not IPython (or a shell without events)
        return
    parent = _parent(shell)
    cell = (parent.get("metadata") or {}).get("cellId")
    execution = (parent.get("header") or {}).get("msg_id") or f"count-{getattr(shell, 'execution_count', 0)}"
    place = ("cell", str(cell)) if cell else ("code", _body(code))
    origins = _origins.setdefault(flow, {})
    places = _places.setdefault(flow, {})
    before = origins.get(spec.name)
    if before is not None:
        places.get((before.place, before.line), {}).pop(spec.name, None)
    origins[spec.name] = _Origin(place, code.co_firstlineno, str(execution), spec)
    places.setdefault((place, code.co_firstlineno), {})[spec.name] = None
    _declared.append((weakref.ref(flow), spec.name))
    if id(shell) not in _hooked:
        try:
            events.register("post_run_cell", _after_cell)
        except Exception:  # a diagnostic only: never fail a declaration over it
            return
        _hooked.add(id(shell))


def _after_cell(*_args: Any) -> None:
    declared = list(_declared)
    _declared.clear()
    by_flow: dict[int, tuple[Flow, list[str]]] = {}
    for ref, name in declared:
        flow = ref()
        if flow is not None:
            by_flow.setdefault(id(flow), (flow, []))[1].append(name)
    for flow, names in by_flow.values():
        _check(flow, names)


def _check(flow: Flow, names: list[str]) -> None:
    """Warn for each node of ``names`` declared where an earlier execution declared another, still wired.

    Only the nodes declared at the same place are looked at (``_places``), not every origin of the flow
    per declared node: a cell declaring the 1,000 nodes of a flow took ~1 s after it ran (a million
    comparisons), one redefining a node of it a scan of 1,000.
    """
    origins = _origins.get(flow, {})
    places = _places.get(flow, {})
    for name in names:
        new = origins.get(name)
        if new is None or flow._specs.get(name) is not new.spec:
            continue
        here = places.get((new.place, new.line), {})
        for old_name in list(here):
            old = origins.get(old_name)
            if old is None or old_name == name or old.execution == new.execution:
                continue
            if flow._specs.get(old_name) is not old.spec:  # removed or declared again since: not stale
                origins.pop(old_name, None)
                here.pop(old_name, None)
                continue
            _warn(flow, old_name, name, new)


def _warn(flow: Flow, old: str, new: str, origin: _Origin) -> None:
    try:
        users = [n for n in flow.downstream(old, direct=True) if n != new]
    except Exception:  # a flow that does not compile yet: its own error says why when it runs
        users = []
    wired = (
        f"{', '.join(repr(u) for u in users)} still take{'s' if len(users) == 1 else ''} its output"
        if users
        else "it still runs with the flow"
    )
    where = "this cell" if origin.place[0] == "cell" else "this code"
    message = (
        f"node {new!r} was declared where {where} declared node {old!r} before (line {origin.line}), but "
        f"{old!r} is still in flow {flow.name!r}: {wired}. If you renamed the function, remove the old node: "
        f"flow.remove({old!r})"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("always", NbflowWarning)  # every re-run that leaves it wired, not once
        # Shown as "<cell>:5: NbflowWarning: ...": the place of the rename, not a line of nbflow's
        warnings.warn_explicit(message, NbflowWarning, "<cell>" if origin.place[0] == "cell" else "<code>", origin.line)
