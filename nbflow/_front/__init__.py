"""nbflow's one front end: the components every host shows (JS and CSS written once, no build step, no network).

- ``components.js`` / ``components.css``: the shared components (state chips with symbols, per-variant bars,
  the rows table, the summary with intervals, the comparison, one row's graph and node details);
- ``app.js``: the pages of ``nbflow view`` and ``nbflow report`` (experiments, one experiment, compare, one row);
- ``report.js``: a report's data source (its data inline); the viewer's is ``nbflow/_view/server.py``'s API.

Hosts: the notebook explorer (``nbflow/widgets/explorer.py``: anywidget takes ``components.js`` + its own
render as an ES module), ``nbflow view`` (served by ``nbflow/_view/server.py``) and ``nbflow report``
(``page()``: one HTML file with everything inline). The data they render is made by ``nbflow/_view/data.py``.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

__all__ = ["asset", "look_js", "page", "script_json"]


@functools.cache
def asset(name: str) -> str:
    """The text of a front-end file of this package (``components.js``, ``app.js``, ...)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def look_js() -> str:
    """``const NBX_LOOK = {...}``: the state colours, symbols and bar segments (``nbflow._show.draw``) the
    components use."""
    from nbflow._core.states import NodeStatus
    from nbflow._show.draw import SEGMENTS, STATE_COLORS, SYMBOLS

    look = {
        "colors": {s.value: list(c) for s, c in STATE_COLORS.items() if isinstance(s, NodeStatus)},
        "symbols": SYMBOLS,
        "segments": SEGMENTS,
    }
    return f"const NBX_LOOK = {json.dumps(look)};\n"


def script_json(data: Any) -> str:
    """``data`` as JSON text safe inside ``<script type="application/json">`` (no ``</script>`` can end it)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'">
<meta name="referrer" content="no-referrer">
<title>{title}</title>
<style>{css}
body {{ margin: 16px 24px; background: #fff; }}
h1 {{ font-size: 20px; margin: 8px 0; }} h2 {{ font-size: 16px; margin: 14px 0 6px; }}
.nbx-nav {{ margin-bottom: 8px; }} .nbx-nav a, a.nbx-open {{ color: #1864ab; }}
.nbx-sort {{ background: none; border: none; font: inherit; font-weight: 600; cursor: pointer; padding: 0; color: inherit; }}
.nbx-verdict {{ font-size: 15px; font-weight: 600; }}
/* the system's dark mode: JupyterLab's dark-theme attribute is set on <body>, so the components' dark rules
   (written once, in components.css) apply, with the page's own colours here */
body[data-jp-theme-light="false"] {{ background: #1e1e1e; color-scheme: dark; --jp-ui-font-color1: #e9ecef;
  --jp-ui-font-color2: #ced4da; --jp-layout-color2: #2c2f33; --jp-border-color2: #495057; --jp-brand-color1: #74c0fc; }}
body[data-jp-theme-light="false"] .nbx-nav a, body[data-jp-theme-light="false"] a.nbx-open {{ color: #74c0fc; }}
body[data-jp-theme-light="false"] .nbx-graph g.edge text, body[data-jp-theme-light="false"] .nbx-graph g.cluster text {{ fill: #ced4da; }}
</style></head>
<body class="nbx"><main id="nbx-app" aria-live="polite">loading…</main>
{data}<script>
if (window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches) document.body.setAttribute("data-jp-theme-light", "false");
{look}{components}
{source}
{app}
</script></body></html>
"""


def page(title: str, source_js: str, data: Any = None) -> str:
    """One HTML page with every script and style inline: the components, ``app.js`` and a data source."""
    import html

    block = f'<script type="application/json" id="nbx-data">{script_json(data)}</script>\n' if data is not None else ""
    return _PAGE.format(
        title=html.escape(title),
        css=asset("components.css"),
        data=block,
        look=look_js(),
        components=asset("components.js"),
        source=source_js,
        app=asset("app.js"),
    )
