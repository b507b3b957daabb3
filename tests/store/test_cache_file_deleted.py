"""A cache file deleted (or replaced) while a flow has it open is opened again at its path: entries are neither
read from nor written into the deleted file (deleting the file is how a user empties a cache)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import nbflow as nf


def _entries(path: Path) -> int:
    with closing(sqlite3.connect(path)) as con:
        return int(con.execute("SELECT COUNT(*) FROM node_cache").fetchone()[0])


def test_a_cache_file_deleted_while_open_is_opened_again(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    calls: list[int] = []
    flow = nf.Flow("cache_deleted", cache=str(path))

    @flow.node(cache=True)
    def slow(x: int) -> int:
        calls.append(x)
        return x * 2

    assert flow.run(x=1, show=False)["slow"] == 2
    assert flow.run(x=1, show=False)["slow"] == 2
    assert calls == [1]  # (a hit)
    for f in tmp_path.iterdir():
        f.unlink()  # the user empties the cache
    assert flow.run(x=1, show=False)["slow"] == 2
    assert calls == [1, 1]  # not read from the deleted file
    assert path.exists() and _entries(path) == 1  # written where anyone can read it
    assert flow.run(x=1, show=False)["slow"] == 2 and calls == [1, 1]  # and hit from there


def test_a_cache_file_replaced_while_open_is_read_from_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    cache = nf.NodeCache(path)
    flow = nf.Flow("cache_replaced", cache=cache)

    @flow.node(cache=True)
    def value(x: int) -> int:
        return x + 1

    flow.run(x=1, show=False)
    assert len(cache) == 1
    path.unlink()
    with closing(sqlite3.connect(path)) as con:  # another file at the path: an empty cache
        con.execute("CREATE TABLE unrelated (a)")
    assert len(cache) == 0
    flow.run(x=2, show=False)
    assert _entries(path) == 1
