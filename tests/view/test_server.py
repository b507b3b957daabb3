"""`nbflow view`'s server: token per start, 127.0.0.1 only, read-only, JSON pages; the command itself."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from nbflow._view.server import Viewer, serve
from tests.view.conftest import digest


def _get(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_requests_without_the_token_are_refused(runs_db: Path) -> None:
    viewer = Viewer([runs_db]).start()
    try:
        base = f"http://127.0.0.1:{viewer.port}"
        for path in ("/", "/api/experiments", "/api/row?id=0:v1&index=0", "/?token=wrong"):
            status, body = _get(base + path)
            assert status == 403, path
            assert b"v1" not in body and b"token" in body
        status, body = _get(f"{base}/api/experiments", headers={"X-Nbflow-Token": "nope"})
        assert status == 403
        status, body = _get(viewer.url)
        assert status == 200 and b'<main id="nbx-app"' in body
        status, body = _get(f"{base}/api/experiments?token={viewer.token}")
        assert status == 200 and {e["name"] for e in json.loads(body)["experiments"]} == {"v1", "v2"}
    finally:
        viewer.stop()


def test_the_api_pages_and_their_errors(runs_db: Path) -> None:
    viewer = Viewer([runs_db]).start()
    h = {"X-Nbflow-Token": viewer.token}
    base = f"http://127.0.0.1:{viewer.port}/api"
    try:
        status, body = _get(f"{base}/experiment?id=0:v1&status=failed", headers=h)
        page = json.loads(body)["page"]
        assert status == 200 and page["total"] == 1 and page["rows"][0]["status"] == "failed"
        status, body = _get(f"{base}/row?id=0:v1&index={page['rows'][0]['__index']}", headers=h)
        assert status == 200 and any(n["traceback"] for n in json.loads(body)["nodes"])
        status, body = _get(f"{base}/compare?a=0:v1&b=0:v2", headers=h)
        assert status == 200 and "v2 vs v1" in json.loads(body)["summary"]
        status, body = _get(f"{base}/compare?a=0:v1&va=terse&vb=plain", headers=h)
        assert status == 200 and "plain vs terse" in json.loads(body)["summary"]
        status, body = _get(f"{base}/row?id=0:nope&index=0", headers=h)  # (a batch may record it yet)
        assert status == 404 and "no experiment" in json.loads(body)["error"] and json.loads(body)["waiting"]
        status, body = _get(f"{base}/row?id=0:v1&index=15", headers=h)  # v1 has ended with 15 rows
        assert status == 400 and "no finished row 15" in json.loads(body)["error"] and "waiting" not in json.loads(body)
        status, body = _get(f"{base}/row?id=0:v1&index=x", headers=h)
        assert status == 400 and "row number" in json.loads(body)["error"]
        status, body = _get(f"{base}/whatever", headers=h)
        assert status == 404
        status, _ = _get(f"{base}/experiments", method="POST", headers=h)
        assert status == 405
        status, _ = _get(f"{base}/experiments", method="DELETE", headers=h)
        assert status == 405
    finally:
        viewer.stop()


def _other_address() -> str | None:
    """An address of this machine that is not loopback (None if it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            found = s.getsockname()[0]
        except OSError:
            return None
    return None if found.startswith("127.") else str(found)


def test_it_binds_to_loopback_only_and_leaves_the_store_as_it_was(runs_db: Path) -> None:
    before = digest(runs_db)
    viewer = Viewer([runs_db]).start()
    try:
        assert viewer.httpd.server_address[0] == "127.0.0.1"
        other = _other_address()
        if other is not None:
            with pytest.raises(OSError), socket.create_connection((other, viewer.port), timeout=2):
                pass
        for path in ("experiments", "experiment?id=0:v1", "row?id=0:v1&index=9", "compare?a=0:v1&b=0:v2", "version"):
            assert (
                _get(f"http://127.0.0.1:{viewer.port}/api/{path}", headers={"X-Nbflow-Token": viewer.token})[0] == 200
            )
    finally:
        viewer.stop()
    assert digest(runs_db) == before


def test_another_host_warns(runs_db: Path) -> None:
    with pytest.warns(Warning, match="not only this machine"):
        viewer = serve([runs_db], host="0.0.0.0", browser=False)
    viewer.stop()


def test_ipv6_loopback_serves_without_a_warning(runs_db: Path) -> None:
    import warnings

    try:
        socket.socket(socket.AF_INET6).close()
    except OSError:  # pragma: no cover - a machine without IPv6
        pytest.skip("no IPv6 on this machine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ::1 only reaches this machine: no warning
        viewer = serve([runs_db], host="::1", browser=False).start()
    try:
        assert viewer.url.startswith(f"http://[::1]:{viewer.port}/?token=")
        status, body = _get(f"http://[::1]:{viewer.port}/api/experiments?token={viewer.token}")
        assert status == 200 and {e["name"] for e in json.loads(body)["experiments"]} == {"v1", "v2"}
        assert _get(f"http://[::1]:{viewer.port}/api/experiments")[0] == 403  # the token still guards it
    finally:
        viewer.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.org"])
def test_only_loopback_hosts_are_quiet(host: str) -> None:
    from nbflow._view.server import is_loopback

    assert not is_loopback(host)
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"))


def test_each_start_has_its_own_token(runs_db: Path) -> None:
    a, b = Viewer([runs_db]), Viewer([runs_db])
    try:
        assert a.token != b.token and len(a.token) >= 32 and a.port != b.port
    finally:
        a.stop()
        b.stop()


def test_the_command_prints_the_url_and_serves_until_stopped(runs_db: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbflow", "view", str(runs_db), "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert "http://127.0.0.1:" in line and "token=" in line
        url = line.split(" at ", 1)[1].strip()
        deadline = time.monotonic() + 20
        while True:
            try:
                status, body = _get(url)
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert status == 200 and b"nbx-app" in body
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_command_refuses_a_store_in_a_missing_folder_or_a_garbled_file(tmp_path: Path) -> None:
    """No batch can write a store in a folder that does not exist, and a file that is not a store will not become
    one: both are refused at once (exit 2, naming the path), not waited for."""
    (tmp_path / "garbled.db").write_text("not a database, not a store")
    for path, said in ((tmp_path / "nope" / "runs.db", "no folder"), (tmp_path / "garbled.db", "not a readable")):
        done = subprocess.run(
            [sys.executable, "-m", "nbflow", "view", str(path), "--no-browser"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and path.name in done.stderr, done.stderr
    assert not (tmp_path / "nope").exists()


def _api(viewer: Viewer, page: str) -> tuple[int, dict[str, Any]]:
    status, body = _get(f"http://127.0.0.1:{viewer.port}/api/{page}", headers={"X-Nbflow-Token": viewer.token})
    return status, json.loads(body)


def _live_batch(db: Path, experiment: str = "live") -> None:
    import nbflow as nf

    flow = nf.Flow("later")

    @flow.node
    def work(x: int) -> int:
        return x

    flow.batch([{"x": i} for i in range(3)], store=db, experiment=experiment, progress=False)


def test_a_store_not_written_yet_is_waited_for_and_never_created(tmp_path: Path) -> None:
    """The viewer started before the batch: its version page answers (and changes once the batch writes the file),
    its pages say "not written yet" (404, waiting) - a file being created, with no table or no schema version yet,
    included - and show the store once written. Viewing creates no file."""
    import sqlite3

    db = tmp_path / "live.db"
    viewer = Viewer([db]).start()
    try:
        status, first = _api(viewer, "version")
        assert status == 200
        status, listed = _api(viewer, "experiments")
        assert status == 200 and listed["experiments"] == [] and "no store at 'live.db' yet" in listed["waiting"][0]
        for page in ("experiment?id=0:live", "row?id=0:live&index=0", "compare?a=0:live&b=0:live"):
            status, answer = _api(viewer, page)
            assert status == 404 and answer["waiting"] is True and "live.db" in answer["error"], answer
            assert str(tmp_path) not in answer["error"]  # only the file's name, never its folder
        assert _api(viewer, "version") == (200, first)
        assert not db.exists()

        db.touch()  # the states a batch creating its store passes through: an empty file, ...
        assert _api(viewer, "version")[1] != first
        assert "holds no experiment yet" in _api(viewer, "experiments")[1]["waiting"][0]
        with sqlite3.connect(db) as con:  # ... its first table, without the schema's version
            con.execute("CREATE TABLE nbflow_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        con.close()
        status, answer = _api(viewer, "experiment?id=0:live")
        assert status == 404 and answer["waiting"] is True and "holds no experiment yet" in answer["error"]
        before = _api(viewer, "version")[1]

        _live_batch(db)
        assert _api(viewer, "version")[1] != before
        status, listed = _api(viewer, "experiments")
        assert status == 200 and [e["name"] for e in listed["experiments"]] == ["live"] and not listed["waiting"]
        status, exp = _api(viewer, "experiment?id=0:live")
        assert status == 200 and exp["page"]["total"] == 3
        assert _api(viewer, "row?id=0:live&index=2")[0] == 200
    finally:
        viewer.stop()


def test_a_store_garbled_after_the_viewer_started_says_so(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    viewer = Viewer([db]).start()
    try:
        db.write_text("not a database, not a store")
        for page in ("experiments", "experiment?id=0:live"):
            status, answer = _api(viewer, page)
            assert status == 400 and "'live.db' is not a readable nbflow store" in answer["error"], answer
            assert "waiting" not in answer and str(tmp_path) not in answer["error"]
        assert _api(viewer, "version")[0] == 200
    finally:
        viewer.stop()


def test_the_command_on_a_store_not_written_yet_says_it_waits_and_serves(tmp_path: Path) -> None:
    """`nbflow view runs.db` before the batch runs: it says the file does not exist yet and that it waits for it,
    serves at once (it never hangs on the file), and the page lists the experiment once a batch writes it."""
    db = tmp_path / "runs.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbflow", "view", str(db), "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split(" at ", 1)[1].strip()
        proc.stdout.readline()  # (read-only; Ctrl-C stops it)
        said = proc.stdout.readline()
        assert said.strip() == f"nbflow view: {db} does not exist yet: waiting for a batch to write it", said
        base, token = url.split("/?token=")
        status, body = _get(f"{base}/api/experiments?token={token}")
        assert status == 200 and json.loads(body)["experiments"] == []
        assert not db.exists()
        _live_batch(db)
        status, body = _get(f"{base}/api/experiments?token={token}")
        assert [e["name"] for e in json.loads(body)["experiments"]] == ["live"]
    finally:
        proc.terminate()
        proc.wait(10)
