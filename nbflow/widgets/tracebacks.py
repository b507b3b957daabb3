"""Tracebacks in the run view as IPython shows them: ``Cell In[5], line 12`` instead of temporary file names.

IPython compiles each cell under a temporary file name (``/tmp/ipykernel_123/456.py``) and keeps the map
from those names to execution counts (``get_ipython().compile._filename_map``). Frames from installed
libraries (``site-packages``) and from Python itself are dimmed, so the user's own frames stand out.
"""

from __future__ import annotations

import re
import sys
import sysconfig

from nbflow.widgets.style import esc

__all__ = ["cell_names", "traceback_html"]

_FRAME = re.compile(r'^(\s*)File "(?P<file>[^"]+)", line (?P<line>\d+)(?P<rest>.*)$')
_LIBS = tuple(p for p in {sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("stdlib"), sys.prefix} if p)


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
