"""``record`` behaves as ``dataclass(slots=True, ...)`` does, for every shape nbflow's records take.

Each shape is defined twice, with ``dataclass`` and with ``record``, and the two are compared on what a user
or nbflow's code can see: the signature, the repr, equality, hashing, freezing, pickling, copying,
``dataclasses.fields``/``replace``/``asdict``, and ``__post_init__``.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import subprocess
import sys
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any

import cloudpickle
import pytest

from nbflow._core.events import NodeSucceeded
from nbflow._core.records import record

SHAPES: dict[str, dict[str, Any]] = {
    "frozen": {"frozen": True},
    "frozen, keyword-only": {"frozen": True, "kw_only": True},
    "plain": {},
    "frozen, eq=False": {"frozen": True, "eq": False},
    "plain, eq=False": {"eq": False},
    "unsafe_hash": {"unsafe_hash": True},
    "frozen, repr=False": {"frozen": True, "repr": False},
}


def _define(decorate: Any, **options: Any) -> tuple[type, type]:
    @decorate(**options)
    class Base:
        """A record."""

        a: int
        b: list[int] = field(default_factory=list)
        c: str = "c"
        hidden: float = field(default=0.5, repr=False, compare=False)

    @decorate(**options)
    class Child(Base):
        _: KW_ONLY
        d: dict[str, int] = field(default_factory=dict)
        e: int | None = None

    return Base, Child


def _pair(options: dict[str, Any]) -> tuple[tuple[type, type], tuple[type, type]]:
    return _define(lambda **o: dataclass(slots=True, **o), **options), _define(record, **options)


def _outcome(f: Any) -> Any:
    try:
        return ("value", f())
    except Exception as exc:
        return ("raises", type(exc).__name__, str(exc))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_record_looks_and_behaves_as_the_dataclass(shape: str) -> None:
    (d_base, d_child), (r_base, r_child) = _pair(SHAPES[shape])
    for d_cls, r_cls in ((d_base, r_base), (d_child, r_child)):
        assert str(inspect.signature(r_cls)) == str(inspect.signature(d_cls))
        assert [(f.name, f.default, f.kw_only) for f in dataclasses.fields(r_cls)] == [
            (f.name, f.default, f.kw_only) for f in dataclasses.fields(d_cls)
        ]
        assert r_cls.__match_args__ == d_cls.__match_args__
        assert r_cls.__slots__ == d_cls.__slots__

    def cases(base: type, child: type) -> list[Any]:
        x, y = base(a=1, b=[2]), base(a=1, b=[2], hidden=9.0)
        k = child(a=1, d={"x": 1})
        return [
            repr(x) if "repr=False" not in shape else "(own)",
            repr(k) if "repr=False" not in shape else "(own)",
            x == y,
            x == base(a=2),
            x == k,
            k == child(a=1, d={"x": 1}),
            (x != y),
            _outcome(lambda: hash(base(a=1, b=[2])) == hash(base(a=1, b=[2]))),
            _outcome(lambda: hash(child(a=1)) == hash(child(a=1))),
            _outcome(lambda: setattr(x, "a", 5)),
            _outcome(lambda: delattr(x, "c")),
            x.a,
            x.b is not base(a=1).b,  # a fresh default each time
            dataclasses.asdict(k),
            dataclasses.replace(k, a=7).a,
            dataclasses.replace(k, a=7).d,
            _outcome(lambda: base()),
            _outcome(lambda: base(1, 2, 3, 4, 5)),
            _outcome(lambda: child(a=1, unknown=2)),
            _outcome(lambda: base(1).a),
            dataclasses.astuple(cloudpickle.loads(cloudpickle.dumps(k))),  # (local classes: pickled by value)
            copy.copy(k).d,
            copy.deepcopy(x).b,
        ]

    made, wanted = cases(r_base, r_child), cases(d_base, d_child)
    made = [
        m.replace(r_base.__qualname__, "Q").replace(r_child.__qualname__, "Q") if isinstance(m, str) else m
        for m in made
    ]
    wanted = [
        w.replace(d_base.__qualname__, "Q").replace(d_child.__qualname__, "Q") if isinstance(w, str) else w
        for w in wanted
    ]
    assert made == wanted


def test_post_init_runs_and_may_set_a_frozen_field_through_object() -> None:
    @record(frozen=True)
    class Checked:
        n: int
        twice: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("n must not be negative")
            object.__setattr__(self, "twice", 2 * self.n)

    assert Checked(3).twice == 6
    assert "twice" not in str(inspect.signature(Checked))
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


def test_a_record_is_one_compile_where_dataclass_makes_six() -> None:
    """The point of ``record``: counted, not assumed (Python 3.13 made dataclass's methods in one exec)."""
    code = """
import builtins, dataclasses
from nbflow._core.records import record
n = 0
real = builtins.exec
def counting(*a, **k):
    global n
    n += 1
    return real(*a, **k)
builtins.exec = counting
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class D:
    a: int
    b: str = ""
made_by_dataclass, n = n, 0
@record(frozen=True, kw_only=True)
class R:
    a: int
    b: str = ""
print(made_by_dataclass, n)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    by_dataclass, by_record = map(int, out)
    assert by_record == 1
    assert by_dataclass >= 2 or sys.version_info >= (3, 13)


def test_what_record_does_not_handle_is_left_to_dataclass() -> None:
    @record(frozen=True)
    class WithInitVar:
        a: int
        scale: InitVar[int] = 1
        scaled: int = field(init=False, default=0)

        def __post_init__(self, scale: int) -> None:
            object.__setattr__(self, "scaled", self.a * scale)

    assert WithInitVar(2, 5).scaled == 10
    assert WithInitVar(2) == WithInitVar(2)

    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):  # as dataclass says

        @record(frozen=True)
        class OwnSetattr:
            a: int

            def __setattr__(self, name: str, value: Any) -> None:
                raise AttributeError(name)


def test_an_event_is_frozen_and_builds_with_its_keywords() -> None:
    event = NodeSucceeded(run_id="r", time=1.0, node="n", duration=0.5)
    assert repr(event) == (
        "NodeSucceeded(run_id='r', time=1.0, node='n', duration=0.5, overridden=False, recovered=False, cached=False)"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.node = "m"  # type: ignore[misc]
    with pytest.raises(TypeError):
        NodeSucceeded("r", 1.0, "n", 0.5)  # type: ignore[misc]
