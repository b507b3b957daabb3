"""Code-free storage of plain data: the form stores use before pickle (nothing in it can run code on load).

A value is written as a JSON tree in which a dict holding the key ``"__nbflow__"`` is a tagged value:

- tuples, sets, frozensets, dicts with keys that are not strings, bytes/bytearray (base64 or a blob);
- datetime (naive, fixed offset or a ``zoneinfo`` zone), date, time, timedelta, Decimal, complex, UUID, paths;
- numpy arrays and scalars (``np.save`` with ``allow_pickle=False``: an object array is not plain);
- pandas DataFrames and Series (parquet when pyarrow is installed and parquet keeps the frame exactly,
  see ``frame_is_parquet_exact``), pandas Timestamps;
- pydantic models and enum members: their data plus the class's import path. Reading one back **never
  imports a module**: the class is looked up among the modules the reading process has already imported
  (``sys.modules``) and used only if it is a ``pydantic.BaseModel`` (an ``enum.Enum``) subclass; else
  the model comes back as a dict of its fields (the member as its value);
- exceptions (as ``StoredError``), ``nf.Secret`` (written as the redaction marker, or refused by a
  cache), nbflow's own records (``Question``, ``nf.Default``, ``nf.ErrorInfo``, ``nf.Failed``).

Anything else raises ``NotPlain``: the caller then pickles it (signed with the user's key, see
``trust.py``). Reading runs JSON, base64, ``np.load(allow_pickle=False)`` and ``pyarrow`` parquet only.

Bytes form (checkpoints, caches): ``b"NBT1"`` + JSON length (8 bytes, big endian) + JSON + blobs, where
a tag refers to a blob by offset and length (no base64). Text form (batch rows): blobs inline as base64.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import io
import json
import pathlib
import sys
import uuid
from typing import Any

from nbflow._core.missing import MISSING
from nbflow._core.secrets import REDACTED, Redactor, Secret
from nbflow._store.stored_error import StoredError

__all__ = [
    "MAGIC",
    "NotPlain",
    "SecretInValue",
    "decode",
    "encode",
    "frame_is_parquet_exact",
    "from_bytes",
    "to_bytes",
]

MAGIC = b"NBT1"
TAG = "__nbflow__"
_MAX_DEPTH = 200

_PATHS = {
    "PurePosixPath": pathlib.PurePosixPath,
    "PureWindowsPath": pathlib.PureWindowsPath,
    "PosixPath": pathlib.PosixPath,
    "WindowsPath": pathlib.WindowsPath,
}


class NotPlain(Exception):
    """The value (or a part of it) has no code-free form: pickle it instead."""


class SecretInValue(Exception):
    """A secret's value (or text) is in the value and the caller refuses to write secrets (a cache)."""


def _nbflow_records() -> dict[str, type]:
    from nbflow._core.question import Question
    from nbflow._dsl.policies import Default, ErrorInfo, Failed

    return {"Question": Question, "Default": Default, "ErrorInfo": ErrorInfo, "Failed": Failed}


class _Encoder:
    def __init__(self, redactor: Redactor | None, refuse_secrets: bool, blobs: list[bytes] | None) -> None:
        self.red = redactor if redactor else None
        self.refuse = refuse_secrets
        self.blobs = blobs
        self.size = 0

    def text(self, s: str) -> str:
        if self.red is not None and self.red.found_in(s):
            if self.refuse:
                raise SecretInValue
            return self.red(s)
        return s

    def blob(self, data: bytes) -> Any:
        if self.blobs is None:
            return base64.b64encode(data).decode("ascii")
        self.blobs.append(data)
        start = self.size
        self.size += len(data)
        return [start, len(data)]

    def __call__(self, v: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise NotPlain("nested too deeply")
        t = type(v)
        if v is None or t is bool or t is int:
            return v
        if t is float:
            return v  # NaN and infinities: json allow_nan; -0.0 kept
        if t is str:
            return self.text(v)
        d = depth + 1
        if t is list:
            return [self(x, d) for x in v]
        if t is dict:
            if all(type(k) is str for k in v) and TAG not in v:
                return {self.text(k): self(x, d) for k, x in v.items()}
            return {TAG: "dict", "items": [[self(k, d), self(x, d)] for k, x in v.items()]}
        if t is tuple:
            return {TAG: "tuple", "items": [self(x, d) for x in v]}
        if t is set or t is frozenset:
            return {TAG: t.__name__, "items": [self(x, d) for x in v]}
        if t is bytes or t is bytearray:
            if self.red is not None and self.red.found_in(bytes(v)):
                if self.refuse:
                    raise SecretInValue
                raise NotPlain("bytes holding a secret")
            return {TAG: t.__name__, "b": self.blob(bytes(v))}
        if isinstance(v, Secret):
            if self.refuse:
                raise SecretInValue
            return {TAG: "redacted"}
        if v is REDACTED:
            return {TAG: "redacted"}
        if v is MISSING:
            return {TAG: "missing"}
        module = t.__module__.split(".")[0]
        if module == "numpy":
            return self.numpy(v)
        if module == "pandas":
            return self.pandas(v, d)
        if t is dt.datetime:
            return self.datetime(v)
        if t is dt.date:
            return {TAG: "date", "v": v.isoformat()}
        if t is dt.time:
            if v.tzinfo is not None:
                raise NotPlain("a time with a time zone")
            return {TAG: "time", "v": v.isoformat(), "fold": v.fold}
        if t is dt.timedelta:
            return {TAG: "timedelta", "v": [v.days, v.seconds, v.microseconds]}
        if t is decimal.Decimal:
            return {TAG: "decimal", "v": str(v)}
        if t is complex:
            return {TAG: "complex", "v": [v.real, v.imag]}
        if t is uuid.UUID:
            return {TAG: "uuid", "v": str(v)}
        if t.__name__ in _PATHS and _PATHS[t.__name__] is t:
            return {TAG: "path", "kind": t.__name__, "v": self.text(str(v))}
        if isinstance(v, BaseException):
            name = v.type_name if isinstance(v, StoredError) else t.__name__
            return {TAG: "error", "type": name, "message": self.text(str(v))}
        if isinstance(v, enum.Enum):
            return {TAG: "enum", "cls": _class_path(t), "v": self(v.value, d)}
        if "pydantic" in sys.modules and _is_model(v):
            return self.model(v)
        if module == "nbflow":
            records = _nbflow_records()
            if records.get(t.__name__) is t:
                import dataclasses

                fields = {f.name: self(getattr(v, f.name), d) for f in dataclasses.fields(v)}
                return {TAG: "record", "cls": t.__name__, "fields": fields}
        raise NotPlain(f"{t.__module__}.{t.__qualname__}")

    def datetime(self, v: dt.datetime) -> Any:
        tz = v.tzinfo
        if tz is None or type(tz) is dt.timezone:
            return {TAG: "datetime", "v": v.isoformat(), "fold": v.fold}
        import zoneinfo

        if type(tz) is zoneinfo.ZoneInfo and tz.key:
            return {TAG: "datetime", "v": v.replace(tzinfo=None).isoformat(), "fold": v.fold, "zone": tz.key}
        raise NotPlain("a datetime with a time zone that is not a fixed offset or a zoneinfo zone")

    def numpy(self, v: Any) -> Any:
        import numpy as np

        if type(v) is np.ndarray:
            arr, kind = v, "ndarray"
        elif isinstance(v, np.generic):
            arr, kind = np.asarray(v), "npscalar"
        else:
            raise NotPlain(type(v).__qualname__)
        if arr.dtype.hasobject:
            raise NotPlain("a numpy array of Python objects")
        if self.red is not None and arr.dtype.kind in "US" and _array_has_secret(arr, self.red):
            if self.refuse:
                raise SecretInValue
            raise NotPlain("an array holding a secret")
        buf = io.BytesIO()
        try:
            np.save(buf, arr, allow_pickle=False)
        except ValueError as exc:
            raise NotPlain(str(exc)) from None
        return {TAG: kind, "b": self.blob(buf.getvalue())}

    def pandas(self, v: Any, depth: int) -> Any:
        import pandas as pd

        t = type(v)
        if t is pd.Timestamp:
            tz = None if v.tz is None else str(v.tz)
            out = {TAG: "timestamp", "v": v.isoformat(), "tz": tz, "unit": v.unit}
            if _timestamp(out) != v or (tz is not None and str(_timestamp(out).tz) != tz):
                raise NotPlain("a Timestamp the text form does not keep")
            return out
        if t is pd.Series:
            name = self(v.name, depth)
            frame = v.to_frame(name="value")
            return {TAG: "series", "name": name, "b": self.frame_blob(frame)}
        if t is pd.DataFrame:
            return {TAG: "frame", "b": self.frame_blob(v)}
        raise NotPlain(t.__qualname__)

    def frame_blob(self, frame: Any) -> Any:
        if not frame_is_parquet_exact(frame):
            raise NotPlain("a DataFrame parquet does not keep exactly (or pyarrow is not installed)")
        if self.red is not None and _frame_has_secret(frame, self.red):
            if self.refuse:
                raise SecretInValue
            raise NotPlain("a DataFrame holding a secret")
        buf = io.BytesIO()
        try:
            frame.to_parquet(buf)
        except Exception as exc:
            raise NotPlain(f"parquet: {type(exc).__name__}: {exc}") from None
        return self.blob(buf.getvalue())

    def model(self, v: Any) -> Any:
        t = type(v)
        text = v.model_dump_json()
        if self.red is not None and self.red.found_in(text):
            if self.refuse:
                raise SecretInValue
            raise NotPlain("a model holding a secret")
        try:
            same = t.model_validate_json(text) == v
        except Exception:
            same = False
        if not same:
            raise NotPlain(f"model {t.__qualname__}: its JSON does not give it back")
        return {TAG: "model", "cls": _class_path(t), "json": text}


def _is_model(v: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(v, BaseModel)


def _class_path(t: type) -> str:
    return f"{t.__module__}:{t.__qualname__}"


def _loaded_class(path: str, base: type) -> type | None:
    """The class at ``module:qualname`` if its module is already imported and it subclasses ``base``.

    Never imports anything: a stored file must not choose which module's code runs in the reader.
    """
    module_name, _, qualname = path.partition(":")
    obj: Any = sys.modules.get(module_name)
    if obj is None or "<locals>" in qualname:
        return None
    for part in qualname.split("."):
        obj = obj.__dict__.get(part) if hasattr(obj, "__dict__") else None
        if obj is None:
            return None
    return obj if isinstance(obj, type) and issubclass(obj, base) else None


def _array_has_secret(arr: Any, red: Redactor) -> bool:
    return any(red.found_in(str(x)) for x in arr.ravel().tolist())


def _frame_has_secret(frame: Any, red: Redactor) -> bool:
    import pandas as pd

    names = [*map(str, frame.columns), *map(str, frame.index.names)]
    if any(red.found_in(n) for n in names):
        return True
    parts = [frame[c] for c in frame.columns] + [frame.index.to_series()]
    for series in parts:
        texts = series.dtype == object or pd.api.types.is_string_dtype(series.dtype)
        if texts and red.found_in("\n".join(series.dropna().astype(str))):
            return True
    return False


def frame_is_parquet_exact(frame: Any) -> bool:
    """Whether parquet (pyarrow) gives ``frame`` back exactly: pyarrow installed, unique string column
    names, and object columns holding only strings (an object column of anything else is not kept)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    import pandas as pd

    if not all(type(c) is str for c in frame.columns) or frame.columns.has_duplicates:
        return False
    index = frame.index
    if index.dtype == object and pd.api.types.infer_dtype(index, skipna=True) not in ("string", "empty"):
        return False
    for col in frame.columns:
        series = frame[col]
        if series.dtype == object and pd.api.types.infer_dtype(series, skipna=True) not in ("string", "empty"):
            return False
    return not frame.attrs


# --- reading -------------------------------------------------------------------------------------
class _Decoder:
    def __init__(self, blobs: memoryview | None) -> None:
        self.blobs = blobs

    def blob(self, ref: Any) -> bytes:
        if self.blobs is None:
            return base64.b64decode(ref)
        start, length = ref
        return bytes(self.blobs[start : start + length])

    def __call__(self, v: Any) -> Any:
        t = type(v)
        if t is list:
            return [self(x) for x in v]
        if t is not dict:
            return v
        tag = v.get(TAG)
        if tag is None:
            return {k: self(x) for k, x in v.items()}
        if tag == "tuple":
            return tuple(self(x) for x in v["items"])
        if tag == "set":
            return {self(x) for x in v["items"]}
        if tag == "frozenset":
            return frozenset(self(x) for x in v["items"])
        if tag == "dict":
            return {self(k): self(x) for k, x in v["items"]}
        if tag == "bytes":
            return self.blob(v["b"])
        if tag == "bytearray":
            return bytearray(self.blob(v["b"]))
        if tag == "redacted":
            return REDACTED
        if tag == "missing":
            return MISSING
        if tag == "datetime":
            when = dt.datetime.fromisoformat(v["v"]).replace(fold=v.get("fold", 0))
            if v.get("zone"):
                import zoneinfo

                when = when.replace(tzinfo=zoneinfo.ZoneInfo(v["zone"]))
            return when
        if tag == "date":
            return dt.date.fromisoformat(v["v"])
        if tag == "time":
            return dt.time.fromisoformat(v["v"]).replace(fold=v.get("fold", 0))
        if tag == "timedelta":
            days, seconds, micro = v["v"]
            return dt.timedelta(days=days, seconds=seconds, microseconds=micro)
        if tag == "decimal":
            return decimal.Decimal(v["v"])
        if tag == "complex":
            return complex(*v["v"])
        if tag == "uuid":
            return uuid.UUID(v["v"])
        if tag == "path":
            return _PATHS[v["kind"]](v["v"])
        if tag == "error":
            return StoredError(v["type"], v["message"])
        if tag in ("ndarray", "npscalar"):
            import numpy as np

            arr = np.load(io.BytesIO(self.blob(v["b"])), allow_pickle=False)
            return arr[()] if tag == "npscalar" else arr
        if tag == "timestamp":
            return _timestamp(v)
        if tag == "frame":
            return _read_parquet(self.blob(v["b"]))
        if tag == "series":
            series = _read_parquet(self.blob(v["b"]))["value"]
            series.name = self(v["name"])
            return series
        if tag == "enum":
            value = self(v["v"])
            cls = _loaded_class(v["cls"], enum.Enum)
            if cls is None:
                return value
            try:
                return cls(value)
            except ValueError:
                return value
        if tag == "model":
            return _model(v["cls"], v["json"])
        if tag == "record":
            cls = _nbflow_records().get(v["cls"])
            if cls is None:
                raise ValueError(f"unknown nbflow record {v['cls']!r} (written by another nbflow version?)")
            return cls(**{k: self(x) for k, x in v["fields"].items()})
        raise ValueError(f"unknown tagged value {tag!r} (written by a newer nbflow?)")


def _timestamp(v: dict[str, Any]) -> Any:
    import pandas as pd

    ts = pd.Timestamp(v["v"])
    if v.get("tz"):
        ts = ts.tz_convert(v["tz"])
    return ts.as_unit(v["unit"]) if v.get("unit") else ts


def _read_parquet(data: bytes) -> Any:
    import pandas as pd

    return pd.read_parquet(io.BytesIO(data))


def _model(path: str, text: str) -> Any:
    if "pydantic" in sys.modules:
        from pydantic import BaseModel

        cls = _loaded_class(path, BaseModel)
        if cls is not None:
            try:
                return cls.model_validate_json(text)  # type: ignore[attr-defined]
            except Exception:  # the class changed since: its fields as data
                pass
    return json.loads(text)


# --- entry points ----------------------------------------------------------------------------------
def encode(value: Any, redactor: Redactor | None = None, *, refuse_secrets: bool = False) -> Any:
    """``value`` as a JSON-able tree (blobs inline as base64). NotPlain if a part has no code-free form;
    SecretInValue if ``refuse_secrets`` and the value holds a secret."""
    try:
        return _Encoder(redactor, refuse_secrets, None)(value)
    except (NotPlain, SecretInValue):
        raise
    except Exception as exc:  # RecursionError, a model's serializer failing...: pickle decides
        raise NotPlain(f"{type(exc).__name__}: {exc}") from None


def decode(tree: Any) -> Any:
    """A value from ``encode``'s tree. Runs no code chosen by the file (see the module's doc)."""
    return _Decoder(None)(tree)


def to_bytes(value: Any, redactor: Redactor | None = None, *, refuse_secrets: bool = False) -> bytes:
    """``value`` in the bytes form (``MAGIC`` ...); NotPlain / SecretInValue as ``encode``."""
    blobs: list[bytes] = []
    enc = _Encoder(redactor, refuse_secrets, blobs)
    try:
        tree = enc(value)
    except (NotPlain, SecretInValue):
        raise
    except Exception as exc:  # RecursionError, a model's serializer failing...: pickle decides
        raise NotPlain(f"{type(exc).__name__}: {exc}") from None
    head = json.dumps(tree, allow_nan=True, separators=(",", ":")).encode()
    return b"".join([MAGIC, len(head).to_bytes(8, "big"), head, *blobs])


def from_bytes(data: bytes) -> Any:
    """A value from ``to_bytes``."""
    view = memoryview(data)
    n = int.from_bytes(view[4:12], "big")
    tree = json.loads(bytes(view[12 : 12 + n]))
    return _Decoder(view[12 + n :])(tree)
