"""What a store put on disk: the database file and its write-ahead log (a secret must be in neither)."""

from __future__ import annotations

from pathlib import Path


def written_bytes(db: Path) -> bytes:
    """The bytes of ``db`` and of its ``-wal`` file, if any (rows not yet folded into the database live there)."""
    wal = db.with_name(db.name + "-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
