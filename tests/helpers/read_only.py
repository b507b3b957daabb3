"""Run a subprocess that sees a folder read-only: a read-only bind mount as root, file modes otherwise."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

__all__ = ["run_read_only"]


def run_read_only(folder: Path, command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` run with ``folder`` read-only for it (its files too); the folder is writable again after.

    Root ignores file modes, so as root the command runs in a private mount namespace where ``folder``
    is bind-mounted read-only (``unshare -m``); it exits 9 printing WRITABLE if the mount did not hold.
    """
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.fail("running as root needs unshare(1) to make a read-only mount for this test")
        shell = (
            f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} && "
            f'touch {folder}/probe 2>/dev/null && echo WRITABLE && exit 9; exec "$@"'
        )
        command = ["unshare", "-m", "sh", "-c", shell, "sh", *command]
    else:
        for f in folder.iterdir():
            f.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        folder.chmod(0o555)
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    finally:
        folder.chmod(0o755)
