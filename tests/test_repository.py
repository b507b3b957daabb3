"""The repository's own files name no place of the machine they were made on: a reader of the docs, a test's
stored fixture or a notebook's output finds what it needs in the project itself, not in a folder beside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The workplace's folders (the project's worktrees and the notes beside it): any file that names them was
# written with a path of that machine in it (a traceback kept in a fixture store, a link to a note).
MACHINE = (b"/work" + b"/", b"../" + b"shared/")  # (split: this file names neither)
NOT_OURS = {".git", ".venv", ".tools", "site", "build", "dist", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def _files() -> list[Path]:
    """The tracked files (``git ls-files``); in a copy without git, every file outside tools' folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [p for p in ROOT.rglob("*") if p.is_file() and not NOT_OURS.intersection(p.relative_to(ROOT).parts[:1])]
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_file_names_a_path_of_the_machine_it_was_made_on() -> None:
    files = [p for p in _files() if p.is_file()]
    assert len(files) > 100  # (the repository's files, not an empty listing)
    found = []
    for path in files:
        data = path.read_bytes()
        for text in MACHINE:
            at = data.find(text)
            if at >= 0:
                found.append(f"{path.relative_to(ROOT)}: {data[max(0, at - 40) : at + 60]!r}")
    assert not found, "files that name a path of the machine they were written on:\n" + "\n".join(found)
