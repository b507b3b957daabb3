"""Tracebacks in the run view as IPython shows them: ``Cell In[5], line 12`` instead of temporary file names.

IPython compiles each cell under a temporary file name (``/tmp/ipykernel_123/456.py``) and keeps the map
from those names to execution counts (``get_ipython().compile._filename_map``). Frames from installed
libraries (``site-packages``) and from Python itself are dimmed, so the user's own frames stand out, and
named from their package (``nbflow/_engine/policy.py``, ``asyncio/tasks.py``): where a library is installed
says nothing about the error, and a saved notebook should not carry the paths of the machine that ran it.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig

from nbflow.widgets.style import esc

__all__ = ["cell_names", "traceback_html"]

_FRAME = re.compile(r'^(\s*)File "(?P<file>[^"]+)", line (?P<line>\d+)(?P<rest>.*)$')
_LIBS = tuple(p for p in {sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("stdlib"), sys.prefix} if p)
# Where a library frame's name starts: the folder holding nbflow itself (an editable install too), then the
# installed packages and the standard library; the longest match wins.
_ROOTS = sorted(
    {
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep,
        *(p + os.sep for key in ("purelib", "platlib", "stdlib") if (p := sysconfig.get_paths().get(key))),
    },
    key=len,
    reverse=True,
)


def short_file(file: str) -> str:
    """A library frame's file named from its package (``nbflow/_engine/policy.py``); any other file as given."""
    for root in _ROOTS:
        if file.startswith(root):
            return file[len(root) :]
    return file


def cell_names() -> dict[str, int]:
    """Temporary cell file name -> execution count, from the running IPython (empty outside one)."""
    ip_mod = sys.modules.get("IPython")
    if ip_mod is None:
        return {}
    try:
        ip = ip_mod.get_ipython()
        found = getattr(getattr(ip, "compile", None), "_filename_map", None)
    except Exception:
        return {}
    return dict(found) if isinstance(found, dict) else {}


def traceback_html(text: str, cells: dict[str, int] | None = None) -> str:
    """``text`` (a formatted traceback, already redacted) as HTML: cell frames renamed, library frames dimmed."""
    cells = cell_names() if cells is None else cells
    out: list[str] = []
    dim = False
    for line in text.splitlines():
        m = _FRAME.match(line)
        if m is not None:
            file = m.group("file")
            count = cells.get(file)
            dim = count is None and (file.startswith(_LIBS) or "site-packages" in file or file.startswith("<frozen"))
            file = short_file(file)
            if count is not None:
                where = f'{m.group(1)}<span class="nbflow-tb-cell">Cell In[{count}], line {m.group("line")}</span>'
            else:
                where = f'{m.group(1)}File <span class="nbflow-tb-file">"{esc(file)}"</span>, line {m.group("line")}'
            out.append(
                f'<span class="nbflow-tb-frame{" nbflow-tb-lib" if dim else ""}">{where}{esc(m.group("rest"))}</span>'
            )
        elif dim and line.startswith("    "):
            out.append(f'<span class="nbflow-tb-lib">{esc(line)}</span>')
        else:
            if not line.startswith("    "):
                dim = False
            out.append(esc(line))
    return '<pre class="nbflow-tb">' + "\n".join(out) + "</pre>"
