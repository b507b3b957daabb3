"""MkDocs hooks of the nbflow docs site (mkdocs.yml: ``hooks:``).

* Code fences: the options pytest-markdown-docs reads after the language (``continuation``,
  ``notest``, ``fixture:name``, ...) are for the tests; Python-Markdown would take such a fence for
  text, so they are dropped before the page is rendered. The files keep them.
* Notebooks: ``notebooks/*.ipynb`` (executed, with their outputs) become pages under ``examples/``
  (rendered by mkdocs-jupyter), each listed in the nav (a new one at the end of "Notebooks"). A live run view is an ipywidgets output, which a static page could
  only show by loading the widget manager's JavaScript from elsewhere; each one is replaced by a
  static snapshot of what it showed when the notebook was executed, rendered here from the widget
  state the notebook saved (``static_widget_html``).
"""

from __future__ import annotations

import html
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EXAMPLES = "examples"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

_TEST_OPTION = re.compile(r"^(continuation|notest|(fixture|runner|retry):\S+)$")
_FENCE = re.compile(r"^(?P<head>[ \t]*(?:`{3,}|~{3,})(?:python3?|py))[ \t]+(?P<opts>[^`\n]*?)[ \t]*$", re.M)
_ONCLICK = re.compile(r"""\son[a-z]+="[^"]*"|\son[a-z]+='[^']*'""")


def strip_test_options(markdown: str) -> str:
    """Drop pytest-markdown-docs' options from the info strings of Python fences (keep any other)."""

    def fix(match: re.Match[str]) -> str:
        kept = [opt for opt in match["opts"].split() if not _TEST_OPTION.match(opt)]
        return " ".join([match["head"], *kept])

    return _FENCE.sub(fix, markdown)


_LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])[ \t]")
_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def lists_may_follow_text(markdown: str) -> str:
    """Put a blank line before a list that directly follows text or a code block.

    The guides are written for CommonMark (GitHub), where a list may interrupt a paragraph;
    Python-Markdown needs the blank line, or the list becomes part of the paragraph.
    """
    out: list[str] = []
    fence = ""
    for line in markdown.split("\n"):
        opened = _FENCE_LINE.match(line)
        if fence:
            if opened and opened.group(1).startswith(fence):
                fence = ""
            out.append(line)
            continue
        prev = out[-1] if out else ""
        if _LIST_ITEM.match(line) and prev.strip() and not prev[0].isspace() and not _LIST_ITEM.match(prev):
            out.append("")
        out.append(line)
        if opened:
            fence = opened.group(1)
    return "\n".join(out)


# --- static snapshots of saved ipywidgets -------------------------------------------------------------

_LAYOUT_CSS = {
    "width": "width",
    "height": "height",
    "max_width": "max-width",
    "max_height": "max-height",
    "min_width": "min-width",
    "overflow": "overflow",
    "margin": "margin",
    "padding": "padding",
    "border": "border",
    "align_items": "align-items",
    "justify_content": "justify-content",
    "flex": "flex",
}
_BAR_COLORS = {"success": "#4caf50", "info": "#2196f3", "warning": "#ff9800", "danger": "#f44336"}


def static_widget_html(state: dict[str, Any], model_id: str) -> str | None:
    """Static HTML for the saved widget ``model_id`` and its children, or None if one is unknown.

    ``state`` is a notebook's ``metadata.widgets[WIDGET_STATE]["state"]``. The standard controls a
    run view and a batch progress bar are built from are rendered as they looked (boxes, HTML,
    labels, buttons, drop-downs, text, progress bars, output areas); hidden ones are left out.
    """
    try:
        return _render(state, model_id)
    except _Unknown:
        return None


class _Unknown(Exception):
    pass


def _ref(value: Any) -> str:
    return str(value).removeprefix("IPY_MODEL_")


def _style(state: dict[str, Any], s: dict[str, Any], extra: str = "") -> str | None:
    """The inline style of a widget's layout; None when the layout hides it."""
    layout = state.get(_ref(s.get("layout", "")), {}).get("state", {})
    if layout.get("display") == "none" or layout.get("visibility") == "hidden":
        return None
    css = [extra] if extra else []
    css += [f"{prop}: {layout[key]}" for key, prop in _LAYOUT_CSS.items() if layout.get(key)]
    return "; ".join(css)


def _render(state: dict[str, Any], model_id: str) -> str:
    model = state.get(model_id)
    if model is None:
        raise _Unknown(model_id)
    name, s = model["model_name"], model["state"]
    if model.get("model_module") == "anywidget" and {"rows", "columns", "range_text"} <= set(s):
        return _explorer_table(s)  # the results explorer the batch widget shows when it ends
    if model.get("model_module") not in ("@jupyter-widgets/controls", "@jupyter-widgets/output"):
        raise _Unknown(name)
    flex = {"VBoxModel": "display: flex; flex-direction: column", "HBoxModel": "display: flex; gap: 4px"}
    style = _style(state, s, flex.get(name, ""))
    if style is None:
        return ""
    classes = " ".join(s.get("_dom_classes", []))
    attrs = f' class="{html.escape(classes)}" style="{html.escape(style)}"'
    desc = html.escape(str(s.get("description") or ""))
    label = f"<label>{desc}</label> " if desc else ""
    if name in ("VBoxModel", "HBoxModel", "BoxModel"):
        return f"<div{attrs}>" + "".join(_render(state, _ref(c)) for c in s.get("children", [])) + "</div>"
    if name in ("HTMLModel", "HTMLMathModel"):
        return f"<div{attrs}>{label}{_ONCLICK.sub('', str(s.get('value', '')))}</div>"
    if name == "LabelModel":
        return f"<span{attrs}>{html.escape(str(s.get('value', '')))}</span>"
    if name == "ButtonModel":
        return f"<button{attrs} disabled>{desc}</button>"
    if name in ("DropdownModel", "SelectModel"):
        labels = list(s.get("_options_labels", []))
        index = s.get("index")
        chosen = labels[index] if isinstance(index, int) and 0 <= index < len(labels) else ""
        return f"<span{attrs}>{label}<select disabled><option>{html.escape(str(chosen))}</option></select></span>"
    if name in ("TextModel", "TextareaModel"):
        value = str(s.get("value", ""))
        return f"<span{attrs}>{label}<input disabled value='{html.escape(value)}'></span>" if value else ""
    if name == "CheckboxModel":
        checked = " checked" if s.get("value") else ""
        return f"<span{attrs}><input type='checkbox' disabled{checked}> {desc}</span>"
    if name in ("IntProgressModel", "FloatProgressModel"):
        color = _BAR_COLORS.get(str(s.get("bar_style") or ""), "#2196f3")
        low, high, value = float(s.get("min", 0)), float(s.get("max", 100)), float(s.get("value", 0))
        percent = 0.0 if high <= low else max(0.0, min(100.0, 100 * (value - low) / (high - low)))
        bar = (
            "<div style='width: 240px; height: 14px; background: #e0e0e0; display: inline-block'>"
            f"<div style='width: {percent:.1f}%; height: 100%; background: {color}'></div></div>"
        )
        return f"<span{attrs}>{label}{bar}</span>"
    if name == "OutputModel":
        return f"<div{attrs}>" + "".join(_output_html(out) for out in s.get("outputs", [])) + "</div>"
    raise _Unknown(name)


def _explorer_table(s: dict[str, Any], limit: int = 10) -> str:
    """The explorer's first rows as a plain table (its state holds them, already redacted), and its range."""
    columns = [str(c) for c in s.get("columns", [])]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(row.get(c, '')))}</td>" for c in columns) + "</tr>"
        for row in list(s.get("rows", []))[:limit]
    )
    note = html.escape(f"rows {s.get('range_text', '')} (static copy: the first {limit})")
    return f"<div><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><small>{note}</small></div>"


def _output_html(out: dict[str, Any]) -> str:
    if out.get("output_type") == "stream":
        return f"<pre>{html.escape(str(out.get('text', '')))}</pre>"
    data = out.get("data", {})
    for mime in ("text/html", "image/svg+xml"):
        if mime in data:
            return "".join(data[mime]) if isinstance(data[mime], list) else str(data[mime])
    if "text/plain" in data:
        text = data["text/plain"]
        return f"<pre>{html.escape(''.join(text) if isinstance(text, list) else str(text))}</pre>"
    raise _Unknown(out.get("output_type"))


_NBVAL_MARKER = re.compile(r"^# NBVAL_\w+[ \t]*\n?", re.M)


def static_notebook(nb: Any) -> Any:
    """The notebook for a page: every widget output replaced by its static snapshot, no widget state,
    and no ``# NBVAL_...`` lines (they tell the tests what to compare, not the reader anything)."""
    widgets = nb.metadata.get("widgets", {})
    state = widgets.get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = _NBVAL_MARKER.sub("", cell.source)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            snapshot = static_widget_html(state, data[WIDGET_VIEW]["model_id"])
            del data[WIDGET_VIEW]
            if snapshot:
                data["text/html"] = f'<div class="nbflow-static">{snapshot}</div>'
    nb.metadata.pop("widgets", None)
    return nb


# --- the hooks ------------------------------------------------------------------------------------

_build_dirs: list[Path] = []


def on_config(config: Any) -> Any:
    """Every notebook gets a page in the nav's "Notebooks" section: the ones mkdocs.yml does not
    list yet (a new notebook) are added at the end, titled by their first heading."""
    section = next((item for item in config["nav"] or [] if isinstance(item, dict) and "Notebooks" in item), None)
    if section is None:
        return config
    entries = section["Notebooks"]
    listed = {next(iter(e.values())) if isinstance(e, dict) else e for e in entries}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        uri = f"{EXAMPLES}/{path.name}"
        if uri not in listed:
            entries.append(uri)
    return config


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return lists_may_follow_text(strip_test_options(markdown))


def _on_files(files: Any, config: Any) -> Any:
    import nbformat
    from mkdocs.structure.files import File

    out = Path(tempfile.mkdtemp(prefix="nbflow-docs-"))
    _build_dirs.append(out)
    (out / EXAMPLES).mkdir()
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = static_notebook(nbformat.read(path, as_version=4))
        nbformat.write(nb, out / EXAMPLES / path.name)
        files.append(File(f"{EXAMPLES}/{path.name}", str(out), config["site_dir"], config["use_directory_urls"]))
    return files


try:  # mkdocs is only installed with the docs group; the functions above are tested without it
    from mkdocs.plugins import event_priority

    # Before mkdocs-jupyter (default priority) wraps the .ipynb files as pages.
    on_files = event_priority(100)(_on_files)
except ImportError:  # pragma: no cover
    on_files = _on_files


def on_post_build(**kwargs: Any) -> None:
    while _build_dirs:
        shutil.rmtree(_build_dirs.pop(), ignore_errors=True)


def on_serve(server: Any, **kwargs: Any) -> Any:
    server.watch(str(NOTEBOOKS))
    return server
