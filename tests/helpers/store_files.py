"""What a store put on disk: the database file and its write-ahead log (a secret must be in neither), and
which batch rows are committed."""

from __future__ import annotations

import sqlite3
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
