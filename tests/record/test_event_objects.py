"""Event objects keep the dataclass contract after their faster __init__ (nbflow/_core/events.py):
every field set, keyword-only, defaults, frozen, equal, hashable where their values are, picklable."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

import nbflow as nf
from nbflow._core import events

EVENT_CLASSES = [getattr(events, name) for name in events.__all__ if name not in ("Event", "NodeEvent")]

SAMPLES = {
    "str": "x",
    "float": 1.5,
    "int": 2,
    "bool": True,
    "RunStatus": nf.RunStatus.SUCCEEDED,
    "BaseException": ValueError("boom"),
    "tuple[str, ...]": ("a", "b"),
}


def _value(f: dataclasses.Field) -> object:
    hint = str(f.type)
    for key, value in SAMPLES.items():
        if hint.startswith(key):
            return value
    return f"value of {f.name}"


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
def test_every_field_is_set_and_the_dataclass_contract_holds(cls: type) -> None:
    fields = dataclasses.fields(cls)
    given = {f.name: _value(f) for f in fields}
    event = cls(**given)
    assert {f.name: getattr(event, f.name) for f in fields} == given
    assert event == cls(**given)
    assert repr(pickle.loads(pickle.dumps(event))) == repr(event)  # (an exception field is equal by identity)
    assert dataclasses.replace(event, run_id="other").run_id == "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.run_id = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        cls(*given.values())  # keyword-only, as declared
    required = [f.name for f in fields if f.default is dataclasses.MISSING]
    with pytest.raises(TypeError, match=required[-1]):
        cls(**{k: v for k, v in given.items() if k != required[-1]})
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    minimal = cls(**{k: given[k] for k in required})
    assert {k: getattr(minimal, k) for k in defaults} == defaults
    assert list(inspect.signature(cls).parameters) == [f.name for f in fields]
