#!/usr/bin/env bash
# Print "3.X /path/to/python" for each CPython >= 3.11 already on this machine, one per minor version:
# python3.X on PATH, the distribution's /usr/bin/python3.X, /usr/local/bin, and pyenv's versions.
# Nothing is downloaded: a Python that is not on disk is not tested (install it from the distribution's
# packages, e.g. `apt-get install python3.12-venv`, and it is picked up).
set -euo pipefail

candidates=()
for minor in $(seq 11 20); do
  candidates+=("python3.$minor" "/usr/bin/python3.$minor" "/usr/local/bin/python3.$minor")
done
candidates+=(/usr/bin/python3)
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root)
  for exe in "$root"/versions/*/bin/python3.[0-9]*; do
    case "$exe" in *-config | *.py) continue ;; esac
    candidates+=("$exe")
  done
fi

declare -A seen=()
for exe in "${candidates[@]}"; do
  # A pyenv shim for a version that is not active exits non-zero: skipped like a missing one.
  out=$("$exe" -c 'import sys, venv, ensurepip
if sys.implementation.name == "cpython" and sys.version_info >= (3, 11):
    print("%d.%d" % sys.version_info[:2], sys.executable)' 2>/dev/null) || continue
  [ -n "$out" ] || continue
  ver=${out%% *}
  [ -n "${seen[$ver]:-}" ] && continue
  seen[$ver]=1
  echo "$out"
done | sort -V
