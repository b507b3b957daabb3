"""The one store codec (checkpoints, node caches, batch stores): plain JSON where it fits, else pickle
signed with this user's key (``trust.py``); secrets redacted, exceptions kept as StoredError, and files
written before the package was split into layers still load (old class paths, with ``allow_pickle``).

Safe to open: ``loads`` never unpickles data without a valid tag unless ``allow_pickle=True``; it raises
``UntrustedData`` (a StoreError) instead, before a single byte is unpickled.

Formats of one stored value: ``b"NBJ1" + JSON`` (values JSON gives back exactly), ``b"NBD1" + pickle``
of built-in data only (``core_bytes``: no class or function in it, so loading it runs no code; a
whole run's record), ``b"NBT1" + ...``
(plain data JSON cannot hold: DataFrames, arrays, models, tuples... - ``plain.py``, no code runs on
load), ``b"NBS1" + tag(32) + pickle`` (signed), or a bare pickle (nbflow 0.1: untrusted).
"""

from __future__ import annotations

import io
import json
import pickle
import threading
from collections.abc import Callable
from typing import Any

from nbflow._core.errors import StoreError
from nbflow._core.missing import MISSING
from nbflow._core.secrets import REDACTED, Redactor, Secret
from nbflow._store import trust
from nbflow._store.stored_error import StoredError

_JSON = b"NBJ1"
_SIGNED = b"NBS1"
_PLAIN = b"NBT1"  # nbflow/_store/plain.py: code-free tagged JSON + blobs
_CORE = b"NBD1"  # a pickle of built-in data only (core_bytes): unsigned, loading it runs no code
_TAG = 32

HOW_TO_TRUST = (
    "Unpickling runs code chosen by whoever wrote it, so nbflow refuses it: it has no valid tag made with "
    "your store key (the file was written by someone else, with another key, or by nbflow 0.1). If you "
    "trust the file, open it with allow_pickle=True (nf.load_run(path, run_id, allow_pickle=True), "
    "nf.BatchStore(path, allow_pickle=True), nf.NodeCache(path, allow_pickle=True))"
)


class UntrustedData(StoreError):
    """A stored value needs pickle and carries no valid tag for this user's key (nothing was unpickled)."""


class StorePickler(pickle.Pickler):
    """Pickles values for the store: secrets redacted, exceptions as StoredError."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Secret):
            return (_redacted, ())
        if isinstance(obj, StoredError):
            return (StoredError, (obj.type_name, str(obj)))
        if isinstance(obj, BaseException):
            return (StoredError, (type(obj).__name__, str(obj)))
        return NotImplemented


class _RedactingPickler(StorePickler):
    """The store pickler, and every string holding a known secret's text is written redacted.

    A ``str`` never reaches ``reducer_override``, but it does reach ``persistent_id``: a string with a
    secret is written as a persistent id holding its redacted text, which ``loads`` turns back into a
    string. Wherever it sits (an output, an object's attribute, a sub-flow's record), the text is gone.
    """

    def __init__(self, file: Any, protocol: int, redactor: Redactor) -> None:
        super().__init__(file, protocol=protocol)
        self._redactor = redactor

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is str and self._redactor.found_in(obj):
            return (_REDACTED_TEXT_ID, self._redactor(obj))
        return None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, BaseException) and not isinstance(obj, StoredError):
            return (StoredError, (type(obj).__name__, self._redactor(str(obj))))
        return super().reducer_override(obj)


_REDACTED_TEXT_ID = "nbflow-redacted-text"
_VALUE_ID = "nbflow-value"  # a large value inside a pickle, stored once (``values.py``): (_VALUE_ID, its key)
_DATA_MODULES = frozenset({"pandas", "numpy"})  # whose large values a sharing pickle stores by reference


def _large_data(obj: Any) -> bool:
    """A frame, series or array of at least ~1 KB (``size``: its number of elements)."""
    if type(obj).__module__.partition(".")[0] not in _DATA_MODULES:
        return False
    size = getattr(obj, "size", None)
    return type(size) is int and size * 8 >= 1024


def _shared_id(share: Callable[[Any], str | None], obj: Any) -> tuple[str, str] | None:
    """The persistent id of ``obj`` stored once (a large frame or array ``share`` keyed), else None."""
    if _large_data(obj):
        key = share(obj)
        if key is not None:
            return (_VALUE_ID, key)
    return None


class _SharingPickler(StorePickler):
    """The store pickler; large frames and arrays inside the value are stored once (``share`` gives their key,
    or None to pickle one in place) and pickled as a persistent id naming that key."""

    def __init__(self, file: Any, protocol: int, share: Callable[[Any], str | None]) -> None:
        super().__init__(file, protocol=protocol)
        self._share = share

    def persistent_id(self, obj: Any) -> Any:
        return _shared_id(self._share, obj)


class _SharingRedactingPickler(_RedactingPickler):
    """``_RedactingPickler`` that stores large values once, as ``_SharingPickler``."""

    def __init__(self, file: Any, protocol: int, redactor: Redactor, share: Callable[[Any], str | None]) -> None:
        super().__init__(file, protocol, redactor)
        self._share = share

    def persistent_id(self, obj: Any) -> Any:
        found = _shared_id(self._share, obj)
        return found if found is not None else super().persistent_id(obj)


def _redacted() -> Any:
    return REDACTED


_SCALARS = frozenset({str, int, bool, float, type(None)})  # NaN and infinities round-trip (allow_nan)


def json_exact(value: Any, reserved: tuple[str, ...] = ()) -> bool:
    """True if JSON gives ``value`` back with the same types (tuples, int keys, objects do not).

    ``reserved``: dict keys that mark encoded values in a format, so a plain dict must not use them.
    """
    t = type(value)
    if t in _SCALARS:
        return True
    if t is list:
        for v in value:  # noqa: SIM110  (a loop, not all(...): this runs for every stored value)
            if type(v) not in _SCALARS and not json_exact(v, reserved):
                return False
        return True
    if t is dict:
        for k, v in value.items():
            if type(k) is not str or (reserved and k in reserved):
                return False
            if type(v) not in _SCALARS and not json_exact(v, reserved):
                return False
        return True
    return False


def sign_pickle(data: bytes) -> bytes:
    """A pickle as stored: tagged with this user's key."""
    return _SIGNED + trust.sign(data) + data


def pickled(value: Any, redactor: Redactor | None = None, share: Callable[[Any], str | None] | None = None) -> bytes:
    """``value`` pickled by the store pickler; with a ``redactor``, no secret's text reaches the bytes.
    ``share``: the key of a large frame or array inside ``value`` stored once (or None: pickled in place);
    ``loads`` then needs ``values`` to read it back."""
    buf = io.BytesIO()
    if share is not None:
        if redactor:
            _SharingRedactingPickler(buf, pickle.HIGHEST_PROTOCOL, redactor, share).dump(value)
        else:
            _SharingPickler(buf, pickle.HIGHEST_PROTOCOL, share).dump(value)
    elif redactor:
        _RedactingPickler(buf, pickle.HIGHEST_PROTOCOL, redactor).dump(value)
    else:
        StorePickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buf.getvalue()


def _no_default(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _make_json_text() -> Any:
    """``json.dumps(value)`` (same text: ASCII, ``", "``/``": "``, NaN allowed) without building an encoder
    per call: JSONEncoder.encode makes a new C encoder for every value, most of its cost for small ones.
    For values ``json_exact`` accepted (so no cycles: it recursed through them)."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return json.JSONEncoder(allow_nan=True).encode
    one = make(None, _no_default, encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True)
    join = "".join

    def text(value: Any) -> str:
        return join(one(value, 0))

    return text


json_text = _make_json_text()

_ORJSON: list[Callable[..., bytes] | None] = []  # [orjson.dumps, or None without orjson], once known


def load_orjson() -> Callable[..., bytes] | None:
    """orjson's ``dumps`` (None without orjson), imported on first use: ``import nbflow`` does not pay for it."""
    try:
        import orjson
    except ImportError:  # (a dependency of nbflow; without it the standard encoder writes)
        _ORJSON.append(None)
    else:
        _ORJSON.append(orjson.dumps)
    return _ORJSON[0]


_encode_json = json_text


def json_bytes(value: Any, redactor: Redactor | None = None) -> bytes | None:
    """``value`` as ``dumps`` stores it when JSON gives it back exactly (secrets' texts redacted), else None."""
    try:
        if json_exact(value):
            data = _JSON + _encode_json(value).encode()
            # Written first, searched after (no copy of the value for the common one, holding no secret).
            if redactor and (not redactor.json_safe or redactor.found_in(data)):
                data = _JSON + _encode_json(redactor.scrub(value)).encode()
            return data
        if redactor:  # a Secret (not JSON-exact) becomes REDACTED; anything else stays unexact
            scrubbed = redactor.scrub(value)
            if json_exact(scrubbed):
                return _JSON + _encode_json(scrubbed).encode()
    except RecursionError:
        pass
    return None


class _NotCore(Exception):
    pass


class _CorePickler(pickle.Pickler):
    """Pickles built-in data only: None, bool, int, float, str, bytes, bytearray and lists, tuples, dicts,
    sets, frozensets of those (exact types; pickle writes them without calling ``reducer_override``).
    Anything else (a class, a function, an instance, a str subclass, an enum...) is refused."""

    def reducer_override(self, obj: Any) -> Any:
        raise _NotCore


class _CoreUnpickler(pickle.Unpickler):
    """Loads what ``_CorePickler`` wrote: a pickle naming any class or function is refused before it is
    looked up, so no code chosen by the file runs (the "restricting globals" rule of the pickle docs)."""

    def find_class(self, module: str, name: str) -> Any:
        raise UntrustedData(f"a stored record of built-in data names {module}.{name}: the file was tampered with")


_CORE_PICKLERS = threading.local()  # one pickler per thread, reused (a new one per value costs more than the value)


def core_bytes(value: Any, redactor: Redactor | None = None) -> bytes | None:
    """``value`` stored as built-in data (``b"NBD1"`` + pickle), read back exactly and without running code;
    None if it holds anything else (the caller stores it another way). Secrets' texts are redacted."""
    data = _core_pickle(value)
    if data is not None and redactor and redactor.found_in(data):  # (a pickle holds each str as its UTF-8 text)
        data = _core_pickle(redactor.scrub(value))
    return data


def _core_pickle(value: Any) -> bytes | None:
    found = getattr(_CORE_PICKLERS, "one", None)
    if found is None:
        buf = io.BytesIO()
        found = _CORE_PICKLERS.one = (buf, _CorePickler(buf, protocol=5))
    buf, pickler = found
    try:
        pickler.dump(value)
        return _CORE + buf.getvalue()
    except Exception:  # _NotCore, RecursionError (too deep), ...
        return None
    finally:
        pickler.clear_memo()  # holds what it pickled: let go of it now
        if buf.tell() > 1 << 20:  # a big value: do not keep its buffer for the next one
            del _CORE_PICKLERS.one
        else:
            buf.seek(0)
            buf.truncate()


def dumps(value: Any, redactor: Redactor | None = None) -> bytes:
    """``value`` as stored: JSON when JSON keeps it exactly, else the code-free form of ``plain.py``
    (DataFrames, arrays, models, tuples, datetimes...), else a signed pickle; secrets' texts redacted."""
    t = type(value)
    if t is int or t is float or t is bool or value is None:  # no text to redact: straight to JSON
        return _JSON + _encode_json(value).encode()
    found = json_bytes(value, redactor)
    if found is not None:
        return found
    if redactor:
        value = redactor.scrub(value)  # (a table's string buffers too: a pickle would carry them as they are)
    from nbflow._store import plain  # imported on first use: it is not needed by JSON-only stores

    try:
        return plain.to_bytes(value, redactor)
    except plain.NotPlain:
        pass
    return sign_pickle(pickled(value, redactor))


# Module paths before the layered layout (0.1.0) -> today's, for classes stores pickle.
_OLD_PATHS = {
    "nbflow._missing": "nbflow._core.missing",
    "nbflow.secret": "nbflow._core.secrets",
    "nbflow.errors": "nbflow._core.errors",
    "nbflow.engine.states": "nbflow._core.states",
    "nbflow.engine.events": "nbflow._core.events",
    "nbflow.engine.pause": "nbflow._core.question",
    "nbflow.run": "nbflow._record.run",
    "nbflow.checkpoint": "nbflow._store.pickling",
    "nbflow.control": "nbflow._dsl.control",
    "nbflow.policies": "nbflow._dsl.policies",
    "nbflow.limits": "nbflow._dsl.limits",
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: Any, values: Callable[[str], Any] | None = None) -> None:
        super().__init__(file)
        self._values = values

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(_OLD_PATHS.get(module, module), name)

    def persistent_load(self, pid: Any) -> Any:
        if type(pid) is tuple and len(pid) == 2 and pid[0] == _REDACTED_TEXT_ID:
            return pid[1]
        if type(pid) is tuple and len(pid) == 2 and pid[0] == _VALUE_ID and type(pid[1]) is str:
            if self._values is None:
                raise pickle.UnpicklingError("a store value refers to a value stored once, read without its store")
            return self._values(pid[1])
        raise pickle.UnpicklingError(f"unknown persistent id in a store value: {pid!r}")


def loads(data: bytes | None, *, allow_pickle: bool = False, values: Callable[[str], Any] | None = None) -> Any:
    """A value written by ``dumps`` (or by nbflow 0.1.0, whose class paths are mapped to today's).

    Unpickles only a pickle whose tag this user's key verifies, or any pickle with ``allow_pickle``;
    else raises UntrustedData without unpickling anything. ``values``: reads a value stored once by its key
    (a pickle written by ``pickled(..., share=)`` refers to them).
    """
    if data is None:
        return MISSING
    data = bytes(data)
    if data[:4] == _JSON:
        return json.loads(data[4:])
    if data[:4] == _CORE:
        return _CoreUnpickler(io.BytesIO(data[4:])).load()
    if data[:4] == _PLAIN:
        from nbflow._store import plain

        return plain.from_bytes(data)
    if data[:4] == _SIGNED:
        tag, body = data[4 : 4 + _TAG], data[4 + _TAG :]
        if not (allow_pickle or trust.verify(body, tag)):
            raise UntrustedData(
                f"a stored value is a pickle with a tag that your store key does not verify. {HOW_TO_TRUST}"
            )
    else:
        body = data
        if not allow_pickle:
            raise UntrustedData(f"a stored value is an unsigned pickle. {HOW_TO_TRUST}")
    return _Unpickler(io.BytesIO(body), values).load()


NOT_OPENED = "<pickled value: not opened (a viewer never unpickles)>"


def peek(data: bytes | None) -> Any:
    """A stored value read without ever unpickling (what a viewer shows): JSON, built-in data (``core_bytes``,
    restricted: no class is looked up) and plain data (``plain.py``) are decoded; a pickle, signed or not, is
    ``NOT_OPENED``, whoever's key signed it. None for None."""
    if data is None:
        return None
    data = bytes(data)
    if data[:4] in (_JSON, _CORE, _PLAIN):
        return loads(data)
    return NOT_OPENED
