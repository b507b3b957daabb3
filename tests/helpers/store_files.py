"""What a store put on disk: the database file and its write-ahead log (a secret must be in neither), and
which batch rows are committed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path


def written_bytes(db: Path) -> bytes:
    """The bytes of ``db`` and of its ``-wal`` file, if any (rows not yet folded into the database live there)."""
    wal = db.with_name(db.name + "-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def rows_on_disk(path: str) -> set[int]:
    """The row indexes committed to the batch store at ``path`` (read-only; none before its table exists)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {i for (i,) in db.execute("SELECT row_index FROM batch_rows")}
    except sqlite3.OperationalError:  # the table is not there yet
        return set()
    finally:
        db.close()


def after_restart(db: Path, code: str) -> str:
    """Run ``code`` in a new process (a kernel restart) with ``frame``, the store's one batch read back from ``db``
    (as a notebook would: pandas imported first, the frame naming its store); its output."""
    script = textwrap.dedent(
        f"""
        import pandas  # before nbflow, as in most notebooks: DataFrame.nbflow is there at once
        import nbflow as nf
        with nf.BatchStore({str(db)!r}) as store:
            (info,) = store.batches()
            frame = store.load(info["batch_id"])
        frame.attrs["store"] = {str(db)!r}
        """
    ) + textwrap.dedent(code)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def hold_lock(db: Path | str, seconds: float) -> threading.Thread:
    """Another connection holds ``db`` locked (``BEGIN EXCLUSIVE``) for ``seconds`` from now, in a thread: returns
    once the lock is taken (join the thread to wait for its release)."""
    started = threading.Event()

    def hold() -> None:
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        started.set()
        time.sleep(seconds)
        other.execute("ROLLBACK")
        other.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    started.wait()
    return thread
