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
        status, body = _get(f"{base}/row?id=0:nope&index=0", headers=h)
        assert status == 400 and "no experiment" in json.loads(body)["error"]
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


def test_the_command_refuses_a_missing_store(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nbflow", "view", str(tmp_path / "nope.db"), "--no-browser"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "no store at" in done.stderr
