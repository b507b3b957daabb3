"""Rendering any node output or input as HTML: tables, pretty JSON, scrollable text, images.

Pure functions (no widgets), so the inspector's content can be tested as text.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import io
import json
import pprint
from collections.abc import Callable, Mapping
from typing import Any

from nbflow._core.missing import MISSING
from nbflow.widgets.redact import MASK, is_secret_name, mask_mapping
from nbflow.widgets.style import esc

__all__ = ["describe", "render_value", "short_value"]

MAX_TEXT = 100_000  # characters shown of a long string / JSON / repr (the rest is cut with a note)
MAX_ROWS = 50
MAX_ITEMS = 200  # entries shown per list/dict in JSON

Redact = Callable[[str], str]

_REPR_IS_PRETTY = frozenset({int, float, complex, bool, type(None)})  # pprint.pformat of these is their repr
_PLAIN = _REPR_IS_PRETTY | {str}  # values with no shape, not pandas, not a container


def _identity(text: str) -> str:
    return text


def _scroll(inner: str) -> str:
    # (a scroll box is reachable by keyboard: Tab to it, then the arrow keys scroll it)
    return f'<div class="nbflow-scroll" tabindex="0" role="region" aria-label="value">{inner}</div>'


def _pre(text: str, redact: Redact) -> str:
    cut = ""
    if len(text) > MAX_TEXT:
        cut = f'<div class="nbflow-muted">… {len(text) - MAX_TEXT:,} more characters not shown</div>'
        text = text[:MAX_TEXT]
    return _scroll(f"<pre>{esc(redact(text))}</pre>") + cut


def _module(value: Any) -> str:
    return type(value).__module__.split(".")[0]


def describe(value: Any) -> str:
    """A one-line description of a value's type and size: ``DataFrame 120×4``, ``str, 5,230 chars``."""
    kind = type(value)
    if kind in _PLAIN:  # what ``_describe`` says of these exact types, without its checks
        return f"str, {len(value):,} chars" if kind is str else kind.__name__
    return _describe(value)


def _describe(value: Any) -> str:
    name = type(value).__name__
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(s, int) for s in shape):
        return f"{name} {'×'.join(str(s) for s in shape)}"
    if isinstance(value, str | bytes):
        return f"{name}, {len(value):,} {'chars' if isinstance(value, str) else 'bytes'}"
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        return f"{name}, {len(value):,} items"
    return name


def _image(value: Any) -> str | None:
    """An <img>/<svg> for images: PNG/JPEG bytes, objects with _repr_png_/_repr_jpeg_/_repr_svg_, figures."""
    data: Any = None
    mime = "image/png"
    if isinstance(value, bytes) and value[:8] == b"\x89PNG\r\n\x1a\n":
        data = value
    elif isinstance(value, bytes) and value[:3] == b"\xff\xd8\xff":
        data, mime = value, "image/jpeg"
    elif _module(value) == "matplotlib" and hasattr(value, "savefig"):
        buf = io.BytesIO()
        value.savefig(buf, format="png", bbox_inches="tight")
        data = buf.getvalue()
    else:
        for meth, m in (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg")):
            fn = getattr(value, meth, None)
            if callable(fn):
                try:
                    data = fn()
                except Exception:
                    data = None
                if data:
                    mime = m
                    break
        if data is None:
            fn = getattr(value, "_repr_svg_", None)
            if callable(fn):
                try:
                    svg = fn()
                except Exception:
                    svg = None
                if isinstance(svg, str):
                    return _scroll(svg)
    if not data:
        return None
    # IPython allows base64 text from _repr_png_
    b64 = data if isinstance(data, str) else base64.b64encode(data).decode("ascii")
    return _scroll(f'<img src="data:{mime};base64,{b64}" style="max-width:100%"/>')


def _to_jsonable(value: Any) -> Any:
    """Models and dataclasses as plain data (for pretty JSON), or MISSING when not structured."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and _module(value) != "pandas":
        try:
            return dump(mode="json")  # pydantic v2: SecretStr comes out as '**********'
        except Exception:
            return MISSING
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Mapping | list | tuple):
        return value
    return MISSING


def _clip(data: Any, depth: int = 0) -> Any:
    """Long lists/dicts cut to MAX_ITEMS entries (with a note), so a huge output renders quickly."""
    if depth > 30:
        return data
    if isinstance(data, Mapping):
        items = list(data.items())
        out = {k: _clip(v, depth + 1) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out["…"] = f"{len(items) - MAX_ITEMS:,} more keys not shown"
        return out
    if isinstance(data, list | tuple):
        clipped = [_clip(v, depth + 1) for v in data[:MAX_ITEMS]]
        if len(data) > MAX_ITEMS:
            clipped.append(f"… {len(data) - MAX_ITEMS:,} more items not shown")
        return clipped
    return data


def _json(value: Any) -> str | None:
    data = _to_jsonable(value)
    if data is MISSING:
        return None
    data = _clip(data)
    if isinstance(data, Mapping):
        data = mask_mapping(data)
    try:
        return _compact(data, 0)
    except (TypeError, ValueError):  # e.g. non-string keys mixed with others: fall back to pprint
        return pprint.pformat(data, width=100, sort_dicts=False)


_SCALARS = (str, int, float, bool, type(None))


def _compact(data: Any, depth: int) -> str:
    """JSON, indented by structure, but a list of plain values on one line that the box wraps: a map's 320
    numbers take a few lines, not 320."""
    dumps = functools.partial(json.dumps, ensure_ascii=False, default=repr)
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(data, Mapping) and data and depth < 30:
        body = ",\n".join(f"{inner}{dumps(_key(k))}: {_compact(v, depth + 1)}" for k, v in data.items())
        return f"{{\n{body}\n{pad}}}"
    if isinstance(data, list | tuple) and data and depth < 30:
        if all(isinstance(v, _SCALARS) for v in data):
            return dumps(list(data))
        return "[\n" + ",\n".join(inner + _compact(v, depth + 1) for v in data) + f"\n{pad}]"
    return dumps(data)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, int | float | bool) or key is None:
        return json.dumps(key)  # as json.dumps writes such a key
    raise TypeError(f"key {key!r}")


FLAT_SHOWN = 60  # items of a long flat list shown at first; the rest behind "show all"


def _flat(value: Any) -> list[Any] | None:
    """A list, tuple or 1-D array of plain values (numbers, strings, ...) as a list, else None."""
    if isinstance(value, list | tuple):
        items = list(value)
    elif _module(value) == "numpy" and getattr(value, "ndim", None) == 1 and hasattr(value, "tolist"):
        items = value.tolist()
    else:
        return None
    return items if items and all(isinstance(v, _SCALARS) for v in items) else None


def _flat_html(items: list[Any], redact: Redact) -> str:
    """A flat list compactly: its first items on wrapped lines with a count of the rest, and every item (up to
    MAX_ITEMS) behind a "show all" that opens in place."""
    dumps = functools.partial(json.dumps, ensure_ascii=False, default=repr)
    if len(items) <= FLAT_SHOWN:
        return _pre(dumps(items), redact)
    first = dumps(items[:FLAT_SHOWN])[:-1] + f", … {len(items) - FLAT_SHOWN:,} more]"
    every = items[:MAX_ITEMS]
    text = dumps(every)
    if len(items) > MAX_ITEMS:
        text = text[:-1] + f", … {len(items) - MAX_ITEMS:,} more items not shown]"
    return (
        f'<pre class="nbflow-list">{esc(redact(first))}</pre>'
        f'<details class="nbflow-list-all"><summary>show all {len(items):,} items</summary>{_pre(text, redact)}</details>'
    )


MAX_PARTS = 20  # tables shown for a dict/list/tuple of DataFrames (the rest named in a note)


def _is_frame(value: Any) -> bool:
    """A pandas DataFrame or Series (shown as a table)."""
    return _module(value) == "pandas" and (hasattr(value, "to_html") or hasattr(value, "to_frame"))


def _parts(value: Any) -> list[tuple[str, Any]] | None:
    """The (label, value) parts of a dict/list/tuple holding at least one DataFrame/Series, else None."""
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        items = [(f"[{i}]", v) for i, v in enumerate(value)]
    else:
        return None
    return items if any(_is_frame(v) for _, v in items) else None


def _render_parts(head: str, parts: list[tuple[str, Any]], redact: Redact, depth: int) -> str:
    """A titled section per part: a dict of DataFrames shows a table per key (secret-named keys masked)."""
    out = [head]
    for label, part in parts[:MAX_PARTS]:
        body = esc(MASK) if is_secret_name(label) else render_value(part, redact, _depth=depth + 1)
        out.append(f'<div class="nbflow-part"><div><b>{esc(label)}</b></div>{body}</div>')
    if len(parts) > MAX_PARTS:
        rest = ", ".join(label for label, _ in parts[MAX_PARTS : MAX_PARTS + 10])
        more = "…" if len(parts) > MAX_PARTS + 10 else ""
        out.append(f'<div class="nbflow-muted">{len(parts) - MAX_PARTS:,} more not shown: {esc(rest)}{more}</div>')
    return "".join(out)


def render_value(value: Any, redact: Redact = _identity, *, _depth: int = 0) -> str:
    """HTML for ``value``: DataFrame/Series as a table, dict/list/model as JSON, str in a scroll box, images inline.

    A dict (or list/tuple) holding DataFrames shows a table per key, each under its key.
    """
    if value is MISSING:
        return '<span class="nbflow-muted">no output</span>'
    head = f'<div class="nbflow-muted">{esc(describe(value))}</div>'
    parts = _parts(value) if _depth < 3 else None
    if parts is not None:
        return _render_parts(head, parts, redact, _depth)
    if _is_frame(value):
        frame = value.to_frame() if hasattr(value, "to_frame") and getattr(value, "ndim", 2) == 1 else value
        try:
            table = frame.to_html(max_rows=MAX_ROWS, max_cols=30, border=0, show_dimensions=True)
        except Exception:
            return head + _pre(repr(value), redact)
        return head + _scroll(redact(table))
    if isinstance(value, str):
        return head + _pre(value, redact)
    image = _image(value)
    if image is not None:
        return head + image
    flat = _flat(value)
    if flat is not None:
        return head + _flat_html(flat, redact)
    text = _json(value)
    if text is not None:
        return head + _pre(text, redact)
    rich = getattr(value, "_repr_html_", None)
    if callable(rich):
        try:
            out = rich()
        except Exception:
            out = None
        if isinstance(out, str) and len(out) <= MAX_TEXT:
            return head + _scroll(redact(out))
    # (pformat of a plain number, bool or None is its repr, without building a PrettyPrinter: ~0.1 ms)
    text = (
        repr(value) if type(value) in _REPR_IS_PRETTY or isinstance(value, bytes) else pprint.pformat(value, width=100)
    )
    return head + _pre(text, redact)


def short_value(name: str, value: Any, redact: Redact = _identity, limit: int = 300) -> str:
    """A compact HTML rendering of an input value (masked when ``name`` looks secret)."""
    if is_secret_name(name):
        return esc(MASK)
    if type(value) in _PLAIN:  # what ``_short_value`` gives these exact types (their repr), without its checks
        return _short_repr(value, redact, limit)
    return _short_value(value, redact, limit)


def _short_value(value: Any, redact: Redact, limit: int) -> str:
    if _module(value) == "pandas" or getattr(value, "shape", None) is not None:
        return f'<span class="nbflow-muted">{esc(describe(value))}</span>'
    if isinstance(value, Mapping):
        value = mask_mapping(value)
    return _short_repr(value, redact, limit)


def _short_repr(value: Any, redact: Redact, limit: int) -> str:
    text = redact(repr(value))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"<code>{esc(text)}</code>"
