"""What the docs promise holds: the API reference covers the public API, the notebooks match their
jupytext sources, the docs site's static run views render, the changelog keeps its format, the
version is written in one place, and the README opens with its two set-up commands."""

from __future__ import annotations

import difflib
import importlib.metadata
import importlib.util
import itertools
import re
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import jupytext
import nbformat
import pytest
from jupytext.config import load_jupytext_config

import nbflow as nf

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the API reference ----------------------------------------------------------------------------


def test_api_reference_documents_every_public_name_through_the_package():
    text = (ROOT / "docs" / "api.md").read_text()
    directives = re.findall(r"^:::\s*(\S+)", text, re.M)
    private = [d for d in directives if not re.fullmatch(r"nbflow\.\w+", d)]
    assert not private, f"document public names through the package (`::: nbflow.Name`), not {private}"
    documented = [d.removeprefix("nbflow.") for d in directives]
    missing = sorted(set(nf.__all__) - set(documented))
    unknown = sorted(set(documented) - set(nf.__all__))
    assert not missing, f"public names missing from docs/api.md (add `::: nbflow.<name>` lines): {missing}"
    assert not unknown, f"docs/api.md documents names nbflow does not export: {unknown}"
    assert len(documented) == len(set(documented)), "a name is documented twice in docs/api.md"


# --- notebooks and their jupytext sources -------------------------------------------------------------


def notebook_names() -> list[str]:
    return sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))


def test_every_notebook_has_a_source_and_every_source_a_notebook():
    sources = sorted(p.stem for p in (NOTEBOOKS / "src").glob("*.py"))
    assert notebook_names() == sources, "pair each notebooks/NAME.ipynb with notebooks/src/NAME.py"
    assert len(sources) >= 7


@pytest.mark.parametrize("name", notebook_names())
def test_notebook_matches_its_source(name: str):
    """The executed .ipynb has exactly the cells of its source: nbval tests what the source says."""
    source = jupytext.read(NOTEBOOKS / "src" / f"{name}.py", fmt="py:percent")
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    want = [(c.cell_type, c.source) for c in source.cells]
    got = [(c.cell_type, c.source) for c in notebook.cells]
    assert got == want, f"notebooks/{name}.ipynb is stale: run `make notebooks-build NB={name}`"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), f"notebooks/{name}.ipynb was not executed"


def test_saving_either_side_of_a_pair_in_jupyterlab_updates_the_other(tmp_path: Path):
    """What `make lab` promises: JupyterLab's jupytext contents manager keeps a pair in step."""
    import shutil

    from jupytext import TextFileContentsManager

    root = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    cm = TextFileContentsManager(root_dir=str(root))
    config = load_jupytext_config(str(root))
    assert config is not None

    # Edit the source opened as a notebook: the .ipynb follows and keeps its outputs.
    model = cm.get("src/07_caching.py")
    assert model["type"] == "notebook"
    model["content"].cells[0].source += "\n\nEdited as a script."
    cm.save({"type": "notebook", "format": "json", "content": model["content"]}, "src/07_caching.py")
    nb = nbformat.read(root / "07_caching.ipynb", as_version=4)
    assert nb.cells[0].source.endswith("Edited as a script.")
    before = nbformat.read(NOTEBOOKS / "07_caching.ipynb", as_version=4)
    assert [c.get("outputs") for c in nb.cells] == [c.get("outputs") for c in before.cells]

    # Edit the notebook: the source follows, and only by the edited line.
    model = cm.get("07_caching.ipynb")
    code = next(c for c in model["content"].cells if c.cell_type == "code")
    code.source += "\nprint('edited in the notebook')"
    cm.save({"type": "notebook", "format": "json", "content": model["content"]}, "07_caching.ipynb")
    new_src = [line for line in (root / "src" / "07_caching.py").read_text().splitlines() if line]
    old_src = [line for line in (NOTEBOOKS / "src" / "07_caching.py").read_text().splitlines() if line]
    ops = difflib.SequenceMatcher(None, old_src, new_src, autojunk=False).get_opcodes()
    added = [line for tag, _, _, j1, j2 in ops if tag in ("insert", "replace") for line in new_src[j1:j2]]
    removed = [line for tag, i1, i2, _, _ in ops if tag in ("delete", "replace") for line in old_src[i1:i2]]
    assert added == ["#", "# Edited as a script.", "print('edited in the notebook')"] and not removed


# --- static run views on the docs site ------------------------------------------------------------------

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_outputs(name: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    views = [
        (out["data"][WIDGET_VIEW]["model_id"], "".join(out["data"].get("text/plain", "")))
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if WIDGET_VIEW in out.get("data", {})
    ]
    return state, views


def snapshots_beside_views(name: str) -> dict[str, str]:
    """model id -> the static snapshot the run view displayed beside itself (the anywidget run view)."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    found = {}
    for cell in nb.cells:
        outs = cell.get("outputs", [])
        for before, out in itertools.pairwise(outs):
            html = "".join(before.get("data", {}).get("text/html", ""))
            if WIDGET_VIEW in out.get("data", {}) and "nbflow-snap" in html:
                found[out["data"][WIDGET_VIEW]["model_id"]] = html
    return found


def test_docs_show_every_saved_widget_of_the_notebooks_as_a_static_snapshot():
    render = hooks().static_widget_html
    run_views = batches = 0
    for name in notebook_names():
        state, views = widget_outputs(name)
        beside = snapshots_beside_views(name)
        for model_id, text in views:
            # the run view (an anywidget) displays its own static snapshot beside itself, every time it is shown
            snapshot = render(state, model_id) or beside.get(model_id)
            assert snapshot, f"{name}: no static snapshot for {text}"
            assert not re.search(r"\son[a-z]+=", snapshot), "a snapshot must not carry event handlers"
            if text.startswith("<nbflow run view"):
                run_views += 1
                assert "nbflow-runview" in snapshot or "nbflow-snap" in snapshot, f"{name}: {text} is not a run view"
                # its graph, or (a background run saved before its first update) the "starting" line
                # the graph: inline SVG, or (the anywidget's snapshot) an SVG data: image
                assert "<svg" in snapshot or "data:image/svg" in snapshot or "starting" in snapshot, (
                    f"{name}: {text} lost its graph"
                )
                flow = re.search(r"flow '([^']+)'", text)
                assert flow and flow.group(1) in snapshot
            elif text.startswith("<batch progress"):
                batches += 1
                assert re.search(r"width: \d+(\.\d)?%", snapshot) and "rows" in snapshot
    assert run_views >= 20 and batches >= 1, (run_views, batches)


def test_static_snapshot_leaves_hidden_widgets_out_and_refuses_unknown_ones():
    render = hooks().static_widget_html

    def model(name: str, module: str = "@jupyter-widgets/controls", **state: Any) -> dict[str, Any]:
        return {"model_name": name, "model_module": module, "state": state}

    state = {
        "box": model("VBoxModel", children=["IPY_MODEL_shown", "IPY_MODEL_hidden"], layout="IPY_MODEL_l0"),
        "shown": model("HTMLModel", value="<b onclick='x()'>done</b>", layout="IPY_MODEL_l0"),
        "hidden": model("ButtonModel", description="Cancel", layout="IPY_MODEL_l1"),
        "l0": model("LayoutModel", "@jupyter-widgets/base"),
        "l1": model("LayoutModel", "@jupyter-widgets/base", display="none"),
        "custom": model("AnyModel", "anywidget"),
        "box2": model("HBoxModel", children=["IPY_MODEL_shown", "IPY_MODEL_custom"]),
    }
    html = render(state, "box")
    assert html is not None and "<b>done</b>" in html and "Cancel" not in html
    assert render(state, "custom") is None
    assert render(state, "box2") is None  # one unknown child: no half-drawn snapshot
    assert render(state, "nowhere") is None


def test_static_notebook_drops_the_widget_state_and_the_test_markers_but_keeps_the_code():
    module = hooks()
    nb = module.static_notebook(nbformat.read(NOTEBOOKS / "01_quickstart.ipynb", as_version=4))
    assert "widgets" not in nb.metadata
    outputs = [out for cell in nb.cells for out in cell.get("outputs", [])]
    assert not any(WIDGET_VIEW in out.get("data", {}) for out in outputs)
    html = [str(out.get("data", {}).get("text/html", "")) for out in outputs]
    assert sum("nbflow-static" in h or "nbflow-snap" in h for h in html) >= 4
    sources = "\n".join(cell.source for cell in nb.cells)
    assert "NBVAL_CHECK_OUTPUT" not in sources and "await flow.arun(" in sources


def test_fence_options_for_the_tests_are_dropped_for_the_site_only():
    strip = hooks().strip_test_options
    text = '```python continuation\nx = 1\n```\n~~~py notest\ny\n~~~\n```python title="a.py" fixture:tmp_path\n```\n'
    assert strip(text) == '```python\nx = 1\n```\n~~~py\ny\n~~~\n```python title="a.py"\n```\n'
    assert strip("```bash\nmake demo\n```") == "```bash\nmake demo\n```"


# --- README, version, changelog -----------------------------------------------------------------------------


def test_readme_opens_with_the_two_set_up_commands():
    text = (ROOT / "README.md").read_text()
    first = re.match(r"```bash\n(.*?)```", text, re.S)
    assert first, "README.md must start with its set-up commands in a bash block"
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["make demo", "make test"]


def test_version_is_written_in_one_place():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "nbflow/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", nf.__version__)
    assert importlib.metadata.version("nbflow") == nf.__version__


_SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_changelog_follows_keep_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert "keepachangelog.com" in text and "semver.org" in text
    releases = re.findall(r"^## (.*)$", text, re.M)
    assert releases and releases[0] == "[Unreleased]", "the first section is ## [Unreleased]"
    versions = []
    for heading in releases[1:]:
        m = re.fullmatch(r"\[(\d+)\.(\d+)\.(\d+)\] - \d{4}-\d{2}-\d{2}", heading)
        assert m, f"a release heading is '## [X.Y.Z] - YYYY-MM-DD', not {heading!r}"
        versions.append(tuple(int(x) for x in m.groups()))
    assert versions == sorted(versions, reverse=True), "releases go newest first"
    kinds = re.findall(r"^### (.*)$", text, re.M)
    assert kinds and set(kinds) <= _SECTIONS, f"change types are {sorted(_SECTIONS)}, not {set(kinds) - _SECTIONS}"
    current = tuple(int(x) for x in nf.__version__.split(".")[:3] if x.isdigit())
    assert not versions or current >= versions[0], "__version__ is the last release or the next one"


def test_lists_that_follow_text_render_as_lists_on_the_site():
    fix = hooks().lists_may_follow_text
    text = "Text:\n- a\n  more\n- b\n```python\n- x\n```\n- c\n"
    assert fix(text) == "Text:\n\n- a\n  more\n- b\n```python\n- x\n```\n\n- c\n"
    assert fix("para\n\n- a\n") == "para\n\n- a\n"
