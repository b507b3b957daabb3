#!/usr/bin/env bash
# Create (or top up) the virtual environment for one of the Makefile's commands. Safe to re-run: it
# installs again only when pyproject.toml changed since the last install of that profile.
#
#   scripts/bootstrap.sh demo   nbflow (editable) with its `demo` extra: the notebook extra (ipywidgets)
#                               and the demo's LLM client (openai)                          -> make demo
#   scripts/bootstrap.sh lab    demo + the `lab` group (JupyterLab, jupytext, ipykernel, matplotlib)
#                               and Graphviz's `dot`                                        -> make lab
#   scripts/bootstrap.sh docs   nbflow + the `docs` group (MkDocs Material, mkdocstrings, mkdocs-jupyter)
#   scripts/bootstrap.sh test   every extra and every group (`dev`); Graphviz's `dot`, and Chromium
#                               when NEED_BROWSER=1                                         -> make test
#
# Environment: VENV (default .venv), PYTHON (default python3, must be >= 3.11), NEED_BROWSER (0/1).
# Packages come from the package index through uv (installed once into .tools/, outside the project's
# environment, so `make demo` stays lean); uv never downloads a Python here (UV_PYTHON_DOWNLOADS=never).
# System packages are installed with apt-get when missing and we may (root or sudo); otherwise the
# one-line fix is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${1:-test}
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
NEED_BROWSER=${NEED_BROWSER:-0}
TOOLS=${NBFLOW_TOOLS:-.tools}
export UV_PYTHON_DOWNLOADS=never

case "$PROFILE" in
  demo) SPEC='.[demo]'; DEP_GROUPS=() ;;
  lab) SPEC='.[demo]'; DEP_GROUPS=(lab) ;;
  docs) SPEC='.'; DEP_GROUPS=(docs) ;;
  test) SPEC='.[demo,dask]'; DEP_GROUPS=(dev) ;;
  *) echo "usage: $0 demo|lab|docs|test" >&2; exit 2 ;;
esac

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "nbflow needs Python >= 3.11 (found: $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi

apt_install() {  # apt_install CMD PKG: install PKG when CMD is missing, if we can
  command -v "$1" >/dev/null 2>&1 && return 0
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo=none; fi
  fi
  if [ "$sudo" != none ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing $2 (for '$1') with apt-get..."
    $sudo apt-get update -qq >/dev/null || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$2" >/dev/null
  else
    echo "note: '$1' is missing; install it with: sudo apt-get install $2  (macOS: brew install $2)" >&2
  fi
}

case "$PROFILE" in
  lab | test) apt_install dot graphviz ;;
esac
if [ "$PROFILE" = test ] && [ "$NEED_BROWSER" = 1 ]; then apt_install chromium chromium; fi

# uv: the one on PATH, else ours in .tools/ (a small virtual environment of its own).
if command -v uv >/dev/null 2>&1; then
  UV=$(command -v uv)
else
  UV=$TOOLS/bin/uv
  if [ ! -x "$UV" ]; then
    echo "installing uv into $TOOLS/ ..."
    "$PYTHON" -m venv "$TOOLS"
    if ! "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check uv >"$TOOLS/install.log" 2>&1; then
      cat "$TOOLS/install.log" >&2
      exit 1
    fi
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  # uv creates it in a fraction of the time `python -m venv` takes; --seed adds pip, as venv would.
  "$UV" venv -q --seed --python "$("$PYTHON" -c 'import sys; print(sys.executable)')" "$VENV"
fi
stamp="$VENV/.nbflow-$PROFILE"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  args=(-e "$SPEC")
  for group in "${DEP_GROUPS[@]}"; do args+=(--group "$group"); done
  echo "installing nbflow ($PROFILE) into $VENV ..."
  "$UV" pip install -q --python "$VENV/bin/python" "${args[@]}"
  if "$VENV/bin/python" -c 'import ipykernel' 2>/dev/null; then
    # The kernel the notebooks name (python3) is this environment's Python.
    "$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 >/dev/null
  fi
  touch "$stamp"
fi
