"""``record``: a dataclass whose methods cost one ``exec`` to make, not six.

On Python 3.11 and 3.12, ``dataclasses.dataclass`` compiles each method it writes with an ``exec`` of its own:
``__init__``, ``__repr__``, ``__eq__``, and for a frozen class ``__hash__``, ``__setattr__`` and ``__delattr__``.
Each compile costs ~0.2 ms, so nbflow's records cost ~60 ms of a script's first ``flow.run`` (measured: 296
compiles, 68 ms of 160; issue 35's cold start). Python 3.13 compiles a class's methods in one ``exec``.

``record`` keeps what ``dataclass`` does without writing code (its fields, ``field()``, ``KW_ONLY``, slots,
``__match_args__``, ``dataclasses.fields``/``replace``/``asdict``) and adds the methods itself:

* ``__init__``, compiled (one ``exec``): it sets each field through its slot, so a frozen record is built
  as fast as a plain one, and calls ``__post_init__`` when the class has one;
* ``__repr__``, ``__eq__``, ``__hash__`` and a frozen record's ``__setattr__``/``__delattr__``: the same
  functions for every record, reading the class's field names. They behave as ``dataclass``'s do (the
  same repr text; equal when of the same class with equal compared fields; a frozen record raises
  ``dataclasses.FrozenInstanceError``; ``hash`` follows ``dataclass``'s rules) and pickle as a frozen
  dataclass does.

What it does not do (``InitVar``, ``order=True``, a record without slots, a class that defines
``__setattr__``), it leaves to ``dataclass``, unchanged.
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

__all__ = ["record"]

T = TypeVar("T")

_HAS_FACTORY: Any = type("_HasFactory", (), {"__repr__": lambda self: "<factory>"})()


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(
    *,
    frozen: bool = False,
    kw_only: bool = False,
    eq: bool = True,
    repr: bool = True,
    unsafe_hash: bool = False,
) -> Callable[[type[T]], type[T]]:
    """``@dataclass(slots=True, ...)`` with the same arguments, made without ``dataclass``'s compiles."""

    def wrap(cls: type[T]) -> type[T]:
        return _record(cls, frozen=frozen, kw_only=kw_only, eq=eq, repr=repr, unsafe_hash=unsafe_hash)

    return wrap


def _record(cls: type[T], *, frozen: bool, kw_only: bool, eq: bool, repr: bool, unsafe_hash: bool) -> type[T]:
    own = cls.__dict__
    if "__setattr__" in own or "__delattr__" in own or _has_initvar(cls):
        return dataclasses.dataclass(
            cls, slots=True, frozen=frozen, kw_only=kw_only, eq=eq, repr=repr, unsafe_hash=unsafe_hash
        )
    doc = own.get("__doc__")
    cls.__doc__ = doc or " "  # (without one, dataclass writes a signature's text: an inspect.signature each)
    new: Any = dataclasses.dataclass(cls, slots=True, kw_only=kw_only, init=False, repr=False, eq=False)
    fields = dataclasses.fields(new)
    new.__doc__ = doc
    if "__init__" not in own:
        new.__init__ = _init(new, fields, frozen)
    if repr and "__repr__" not in own:
        new.__record_repr__ = tuple(f.name for f in fields if f.repr)
        new.__repr__ = _repr
    if eq and "__eq__" not in own:
        new.__record_eq__ = _getter([f.name for f in fields if f.compare])
        new.__eq__ = _eq
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if unsafe_hash and explicit_hash:
        raise TypeError(f"Cannot overwrite attribute __hash__ in class {cls.__name__}")
    if unsafe_hash or (eq and frozen and not explicit_hash):
        new.__record_hash__ = _getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
        new.__hash__ = _hash
    elif eq and not explicit_hash:
        new.__hash__ = None  # as dataclass: equal by value, so unhashable
    if frozen:
        new.__setattr__ = _frozen_setattr
        new.__delattr__ = _frozen_delattr
        if "__getstate__" not in own and "__setstate__" not in own:
            new.__getstate__ = _getstate
            new.__setstate__ = _setstate
    return new


def _has_initvar(cls: type) -> bool:
    return any("InitVar" in str(note) for note in inspect.get_annotations(cls).values())


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> Callable[..., None]:
    """The class's ``__init__``: ``dataclass``'s signature; a frozen record's fields set through their slots'
    descriptors (a C call, where ``dataclass`` calls ``object.__setattr__``), a plain one's by assignment."""
    names: dict[str, Any] = {"_HAS_FACTORY": _HAS_FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        if frozen:
            slot = next(k.__dict__[f.name] for k in cls.__mro__ if f.name in k.__dict__)
            names[f"_set_{f.name}"] = slot.__set__
        if f.default_factory is not dataclasses.MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
        if not f.init:
            if f.default_factory is not dataclasses.MISSING:
                body.append(_set(f.name, f"_factory_{f.name}()", frozen))
            elif f.default is not dataclasses.MISSING:
                body.append(_set(f.name, f"_default_{f.name}", frozen))
            continue
        if f.default_factory is not dataclasses.MISSING:
            param = f"{f.name}=_HAS_FACTORY"
            body.append(_set(f.name, f"_factory_{f.name}() if {f.name} is _HAS_FACTORY else {f.name}", frozen))
        else:
            param = f.name if f.default is dataclasses.MISSING else f"{f.name}=_default_{f.name}"
            body.append(_set(f.name, f.name, frozen))
        (keyword if f.kw_only else positional).append(param)
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params = ["self", *positional, *(["*", *keyword] if keyword else [])]
    exec(f"def __init__({', '.join(params)}):\n" + ("\n".join(body) or "    pass"), names)
    init: Callable[..., None] = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
    return init


def _set(name: str, value: str, frozen: bool) -> str:
    return f"    _set_{name}(self, {value})" if frozen else f"    self.{name} = {value}"


def _getter(names: list[str]) -> Callable[[Any], Any]:
    if not names:
        return lambda self: ()
    get = attrgetter(*names)
    return get if len(names) > 1 else lambda self: (get(self),)


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    cls = type(self)
    return f"{cls.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in cls.__record_repr__)})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        get = type(self).__record_eq__
        return get(self) == get(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(type(self).__record_hash__(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state):  # noqa: B905 (as dataclass's: fewer values, fewer fields)
        object.__setattr__(self, f.name, value)
