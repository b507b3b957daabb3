#!/usr/bin/env bash
# Create .venv with everything nbflow's demo and tests need. Safe to re-run.
# System packages (Graphviz's `dot`, Chromium for the browser test) are installed with apt-get
# when missing and we may (root or sudo); otherwise the one-line fix is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
NEED_BROWSER=${NEED_BROWSER:-0}

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

apt_install dot graphviz
if [ "$NEED_BROWSER" = 1 ]; then apt_install chromium chromium; fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.nbflow-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # uv installs the stack in seconds; plain pip is the fallback.
  if command -v uv >/dev/null 2>&1; then
    UV=(uv)
  else
    "$VENV/bin/python" -m pip --version >/dev/null 2>&1 || "$VENV/bin/python" -m ensurepip -q >/dev/null 2>&1 || true
    "$VENV/bin/python" -m uv --version >/dev/null 2>&1 || "$VENV/bin/python" -m pip install -q uv >/dev/null 2>&1 || true
    UV=("$VENV/bin/python" -m uv)
  fi
  if "${UV[@]}" --version >/dev/null 2>&1; then
    "${UV[@]}" pip install -q --python "$VENV/bin/python" -e '.[dev,browser]'
  else
    "$VENV/bin/python" -m pip install -q -e '.[dev,browser]'
  fi
  "$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 >/dev/null
  touch "$stamp"
fi
