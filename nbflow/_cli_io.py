"""What the ``nbflow`` command reads and writes: flows from modules, files and notebooks; values; case and result files.

Nothing here prints: ``cli.py`` turns ``CliError`` into one line and exit code 2.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import sqlite3
import sys
import types
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from nbflow._batch.cases import none_inputs
from nbflow._batch.save import SUFFIXES
from nbflow._core.errors import NbflowError
from nbflow._core.secrets import Secret, env, is_secret_name

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._flow.flow import Flow

__all__ = [
    "CliError",
    "assignments",
    "grid_values",
    "load_flow",
    "read_cases",
    "recall_source",
    "remember_source",
]

CASE_FORMATS = (".csv", ".jsonl", ".json", ".parquet")
RESULT_FORMATS = SUFFIXES  # (nbflow._batch.save writes them)
_SKIP_TAGS = {"nbflow-skip", "skip-execution"}


class CliError(NbflowError):
    """A usage error of the ``nbflow`` command: one line, exit code 2."""


# --- finding the flow -----------------------------------------------------------------------------
def split_target(target: str) -> tuple[str, str | None]:
    """``PATH:FLOW`` -> (PATH, FLOW); FLOW may be omitted when the source defines one Flow."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or "/" in name or os.sep in name:
        return target, None
    return path, name or None


def load_flow(target: str) -> tuple[Flow, str]:
    """The Flow named by ``PATH:FLOW`` and the absolute form of the target (to find it again on resume).

    PATH is a module (``pkg.flows``, imported with the current folder on ``sys.path``, as ``python -m``
    does), a ``.py`` file or a notebook (``.ipynb``: its code cells run in order). What the source
    prints while loading goes to stderr: stdout carries the command's result.
    """
    from nbflow._flow.flow import Flow

    path, name = split_target(target)
    is_file = path.endswith((".py", ".ipynb")) or "/" in path or os.sep in path
    with contextlib.redirect_stdout(sys.stderr), _no_exit(path):
        if is_file:
            file = Path(path).expanduser().resolve()
            if not file.is_file():
                raise CliError(f"no such file: {path!r} (give a .py file, a notebook .ipynb or a module name)")
            namespace = _run_notebook(file) if file.suffix == ".ipynb" else vars(_import_file(file))
            source = str(file)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            try:
                module = importlib.import_module(path)
            except ModuleNotFoundError as exc:
                if exc.name and path.startswith(exc.name):
                    raise CliError(
                        f"no module named {path!r} (run from the folder that holds it, or give the path of a .py "
                        f"file or a notebook)"
                    ) from None
                raise _SourceError(path, exc) from exc
            except Exception as exc:
                raise _SourceError(path, exc) from exc
            namespace = vars(module)
            source = path
    flows = {k: v for k, v in namespace.items() if isinstance(v, Flow) and not k.startswith("_")}
    if name is None:
        if len(flows) != 1:
            found = ", ".join(f"{path}:{k}" for k in flows) or "none"
            raise CliError(f"{path} defines {len(flows)} flows ({found}); name one as PATH:FLOW")
        name = next(iter(flows))
    obj: Any = namespace.get(name.split(".")[0], None)
    for part in name.split(".")[1:]:
        obj = getattr(obj, part, None)
    if not isinstance(obj, Flow):
        from nbflow._core.errors import _suggest

        what = "no such name" if obj is None else f"a {type(obj).__name__}, not an nbflow Flow"
        raise CliError(f"{path}:{name} is {what}{_suggest(name, flows)}; flows there: {', '.join(flows) or 'none'}")
    return obj, f"{source}:{name}"


class _ExitCalled(BaseException):
    """``os._exit`` called by a flow source while it loads (a BaseException: a bare ``except Exception`` in the
    source does not swallow it)."""

    def __init__(self, code: Any) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _no_exit(where: str) -> Iterator[None]:
    """A flow source that exits while it loads (``sys.exit(5)``, ``exit()``, ``os._exit(0)``) fails the command
    loudly: the process ended before, with whatever code the source gave, so a command that ran nothing could
    exit 0 and pass CI. ``os._exit`` (which ends the process at once, skipping every handler) is replaced while
    the source loads: the source's own module-level code, and what it calls then, reach the replacement through
    ``os._exit``, ``posix._exit`` or a ``from os import _exit`` made while loading. A name bound to the real
    function before nbflow started loading (another module imported earlier) still ends the process; so does a
    signal (``os.kill(os.getpid(), 9)``)."""
    import posix

    real = os._exit
    loading = [True]

    def refused(code: Any = 0) -> NoReturn:
        if not loading[0]:  # bound while loading, called later (a node): the real thing
            real(code)
        raise _ExitCalled(code)

    os._exit = posix._exit = refused  # type: ignore[assignment]
    try:
        yield
    except SystemExit as exc:
        raise CliError(
            f"loading {where} called sys.exit({exc.code!r}): a flow source must define its flows, not end the "
            f'process (put the script part under `if __name__ == "__main__":`); nothing was run'
        ) from None
    except _ExitCalled as exc:
        raise CliError(
            f"loading {where} called os._exit({exc.code!r}): a flow source must define its flows, not end the "
            f'process (put the script part under `if __name__ == "__main__":`); nothing was run'
        ) from None
    finally:
        loading[0] = False
        os._exit = posix._exit = real


class _SourceError(CliError):
    """The user's module, file or notebook raised while loading: its traceback is worth showing."""

    def __init__(self, where: str, exc: BaseException) -> None:
        import traceback

        self.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        super().__init__(f"loading {where} failed: {type(exc).__name__}: {exc}")


def _import_file(file: Path) -> types.ModuleType:
    # The file's folder goes first on sys.path, as `python file.py` does (sibling imports work), and
    # the module is registered under its stem, so pickled outputs of its classes load back.
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = file.stem if file.stem.isidentifier() and file.stem not in sys.modules else f"_nbflow_file_{abs(hash(file))}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {str(file)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise _SourceError(str(file), exc) from exc
    return module


def _run_notebook(file: Path) -> dict[str, Any]:
    """Run a notebook's code cells in one namespace (top-level ``await`` works; magics and shell lines are skipped)."""
    try:
        nb = json.loads(file.read_text(encoding="utf-8"))
        cells = [c for c in nb["cells"] if c.get("cell_type") == "code"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{str(file)!r} is not a readable notebook: {exc}") from None
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = types.ModuleType(file.stem if file.stem.isidentifier() else "notebook")
    module.__file__ = str(file)
    namespace = vars(module)
    namespace["display"] = lambda *a, **k: None  # IPython's builtin; a terminal shows nothing
    skipped = 0
    for n, cell in enumerate(cells, 1):
        if _SKIP_TAGS & set(cell.get("metadata", {}).get("tags", [])):
            continue
        src = cell.get("source", "")
        text = "".join(src) if isinstance(src, list) else str(src)
        if text.lstrip().startswith("%%"):
            skipped += 1
            continue
        lines = []
        for line in text.splitlines():
            if line.lstrip().startswith(("%", "!")):  # IPython magics and shell escapes: not Python
                skipped += 1
                line = line[: len(line) - len(line.lstrip())] + "pass"
            lines.append(line)
        try:
            code = compile("\n".join(lines), f"{file.name} cell {n}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            if code.co_flags & inspect.CO_COROUTINE:
                asyncio.run(eval(code, namespace))
            else:
                exec(code, namespace)
        except Exception as exc:
            raise _SourceError(f"{file.name} (code cell {n})", exc) from exc
    if skipped:
        print(f"nbflow: skipped {skipped} IPython magic or shell line(s) in {file.name}", file=sys.stderr)
    return namespace


# --- values from the command line -----------------------------------------------------------------
def _hint_wants_text(flow: Flow, name: str) -> bool:
    """True when the flow's nodes take input ``name`` as text (annotated str, or unannotated with no non-str default)."""
    for spec in flow.nodes.values():
        for p in spec.params:
            if p.source != name:
                continue
            ann = p.annotation
            if ann is inspect.Parameter.empty:  # unannotated: text unless its default says otherwise
                return _is_missing(p.default) or p.default is None or isinstance(p.default, str)
            if isinstance(ann, str):
                return ann.replace(" ", "") in ("str", "str|None", "None|str", "Optional[str]", "typing.Optional[str]")
            args = getattr(ann, "__args__", None)
            return ann is str or bool(args and all(a in (str, type(None)) for a in args))
    return True


def _is_missing(value: Any) -> bool:
    from nbflow._core.missing import MISSING

    return value is MISSING


def _value(flow: Flow, name: str, text: str, as_json: bool) -> Any:
    if text.startswith("@"):
        file = Path(text[1:]).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"input {name!r}: cannot read {str(file)!r}: {exc.strerror}") from None
        if not as_json and file.suffix == ".json":
            as_json = True
    if as_json:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise CliError(
                f"input {name!r}: not valid JSON ({exc}); quote text, or use {name}=... for a string"
            ) from None
    if _hint_wants_text(flow, name):
        return text
    try:
        return json.loads(text)  # numbers, booleans, lists for inputs that are not text
    except ValueError:
        return text  # pydantic converts or says what is wrong


def assignments(flow: Flow, items: Iterable[str], what: str = "--input") -> dict[str, Any]:
    """``k=v`` (text, converted for non-str inputs), ``k:=json``, ``k=@file`` -> values; secret names become nf.Secret."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.rstrip(":"):
            raise CliError(f"{what} {_safe(item)!r}: expected NAME=VALUE (or NAME:=JSON, NAME=@FILE)")
        as_json = name.endswith(":")
        name = name.rstrip(":").strip()
        out[name] = _secret(name, _value(flow, name, text, as_json))
    return out


def _safe(item: str) -> str:
    name, sep, _ = item.partition("=")
    return f"{name}=..." if sep and is_secret_name(name.rstrip(":")) else item


def _secret(name: str, value: Any) -> Any:
    if isinstance(value, str) and not isinstance(value, Secret) and is_secret_name(name):
        return Secret(value)
    return value


def inputs_file(flow: Flow, path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"--inputs: cannot read {path!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"--inputs {path!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CliError(f"--inputs {path!r} must hold a JSON object (input name -> value), got {type(data).__name__}")
    return {k: _secret(k, v) for k, v in data.items()}


def env_secrets(items: Iterable[str]) -> dict[str, Secret]:
    """``--secret NAME=ENV_VAR``: the input NAME from the environment variable, as an nf.Secret."""
    out: dict[str, Secret] = {}
    for item in items:
        name, sep, var = item.partition("=")
        var = var if sep else name
        if not name:
            raise CliError(f"--secret {item!r}: expected INPUT=ENV_VAR (the input's value is read from ENV_VAR)")
        if var not in os.environ:
            raise CliError(f"--secret {item!r}: environment variable {var!r} is not set")
        out[name] = env(var)
    return out


def grid_values(flow: Flow, items: Iterable[str]) -> dict[str, Any]:
    """``--grid k=@file.json`` (a JSON list or mapping), ``k=[json list]``, or ``k=v`` repeated (one value each)."""
    grid: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise CliError(f"--grid {item!r}: expected KEY=@values.json, KEY=[json list] or KEY=VALUE (repeatable)")
        if text.startswith("@") or text.lstrip().startswith(("[", "{")):
            values = _value(flow, key, text, as_json=True)
            if key in grid:
                raise CliError(f"--grid {key}: given twice with a list of values; give the list once")
            if isinstance(values, str) or not isinstance(values, list | dict):
                raise CliError(f"--grid {key}: {text!r} must hold a JSON list of values (or a mapping of named values)")
            grid[key] = values
        else:
            grid.setdefault(key, [])
            if not isinstance(grid[key], list):
                raise CliError(f"--grid {key}: given twice; give its values in one way")
            grid[key].append(_value(flow, key, text, as_json=False))
    return grid


def mapping(items: Iterable[str]) -> dict[str, str]:
    """``--columns col=input`` (repeatable, or comma-separated) -> {column: input}."""
    out: dict[str, str] = {}
    for item in items:
        for part in filter(None, item.split(",")):
            col, sep, target = part.partition("=")
            if not sep or not col or not target:
                raise CliError(f"--columns {part!r}: expected COLUMN=INPUT (the file's column feeds that flow input)")
            out[col.strip()] = target.strip()
    return out


# --- case and result files ------------------------------------------------------------------------
def read_cases(path: str, flow: Flow, columns: Mapping[str, str]) -> pd.DataFrame:
    """A case file as a DataFrame. CSV cells feeding text inputs stay text ("007" stays "007")."""
    import pandas as pd

    file = Path(path).expanduser()
    suffix = file.suffix.lower()
    if suffix not in CASE_FORMATS:
        raise CliError(f"cases file {path!r}: unknown format {suffix or '(none)'!r}; use {', '.join(CASE_FORMATS)}")
    if not file.is_file():
        raise CliError(f"no such cases file: {path!r}")
    try:
        if suffix == ".csv":
            frame = pd.read_csv(file)
            text = pd.read_csv(file, dtype=str, keep_default_na=False)
            blank_none = none_inputs(flow.graph)  # an empty cell feeding `str | None` is None, not ""
            for col in frame.columns:
                target = columns.get(col, col)
                if target in flow.inputs and _hint_wants_text(flow, target):
                    frame[col] = text[col].where(text[col] != "", None) if target in blank_none else text[col]
        elif suffix in (".jsonl", ".json"):
            frame = pd.read_json(file, lines=suffix == ".jsonl", dtype=False)
            # A key a record does not have is "not given" (the input's default), as in flow.batch(list of
            # dicts) -- not the NaN pandas fills in. The rows given to the batch leave it out.
            absent = [
                frozenset(c for c in frame.columns if c not in r) for r in _json_records(file, suffix == ".jsonl")
            ]
            if any(absent):
                frame.attrs["absent_keys"] = absent
        else:
            frame = pd.read_parquet(file)
    except ImportError:
        raise CliError(f"reading {path!r} needs pyarrow: pip install 'nbflow[parquet]'") from None
    except Exception as exc:
        raise CliError(f"cannot read cases file {path!r}: {type(exc).__name__}: {exc}") from None
    if len(frame) == 0:
        raise CliError(f"cases file {path!r} has no rows")
    return frame


def _json_records(file: Path, lines: bool) -> list[dict[str, Any]]:
    text = file.read_text(encoding="utf-8")
    records = [json.loads(ln) for ln in text.splitlines() if ln.strip()] if lines else json.loads(text)
    return [r if isinstance(r, dict) else {} for r in records]


def batch_rows(frame: pd.DataFrame) -> pd.DataFrame | list[dict[str, Any]]:
    """What ``flow.batch`` gets for a cases frame: the frame, or (JSON records with absent keys) its
    rows as dicts without those keys, so the inputs they feed take their defaults."""
    absent = frame.attrs.get("absent_keys")
    if not absent:
        return frame
    return [
        {str(k): v for k, v in rec.items() if k not in gone}
        for rec, gone in zip(frame.to_dict("records"), absent, strict=True)
    ]


# --- where a stored flow came from ----------------------------------------------------------------
# The command writes one row per flow name into the store's shared key-value table, so
# `nbflow resume runs.db RUN_ID` can load the flow without being told where it is. Loading a flow
# imports a module or runs a file: the row is tagged with this user's store key (nbflow/_store/trust.py)
# and a row without a valid tag (a file someone else wrote, or an older nbflow's) is ignored - the
# command then asks for --flow instead of running code a file named.
def _source_tag(flow_name: str, source: str) -> str:
    from nbflow._store import trust

    return trust.sign(f"cli_source\0{flow_name}\0{source}".encode()).hex()


def remember_source(store: str, flow_name: str, source: str) -> None:
    value = json.dumps({"source": source, "tag": _source_tag(flow_name, source)})
    try:
        with contextlib.closing(sqlite3.connect(store, timeout=5.0)) as db, db:
            db.execute("CREATE TABLE IF NOT EXISTS nbflow_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("INSERT OR REPLACE INTO nbflow_meta VALUES (?, ?)", (f"cli_source:{flow_name}", value))
    except sqlite3.Error:
        pass  # only a convenience: resume then asks for --flow


def recall_source(store: str, flow_name: str) -> str | None:
    try:
        uri = Path(store).resolve().as_uri() + "?mode=ro"  # read only: never creates or changes the file
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5.0)) as db:
            row = db.execute("SELECT value FROM nbflow_meta WHERE key = ?", (f"cli_source:{flow_name}",)).fetchone()
    except sqlite3.Error:
        return None
    if row is None:
        return None
    try:
        found = json.loads(row[0])
        source, tag = str(found["source"]), str(found["tag"])
    except (ValueError, TypeError, KeyError):
        return None  # untagged (another writer, or nbflow < 0.3): never run what it names
    import hmac

    return source if hmac.compare_digest(tag, _source_tag(flow_name, source)) else None
