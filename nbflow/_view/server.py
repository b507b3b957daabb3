"""``nbflow view RUNS.db [more stores]``: a local, read-only web viewer over batch stores.

Served by the standard library (``http.server.ThreadingHTTPServer``), not an ASGI stack: the viewer answers
a handful of GET requests from one person's browser on 127.0.0.1 (one page, then small JSON pages of paged
SQL queries), which a threaded stdlib server does well, and nbflow then needs no web framework, no extra to
install and no event loop of its own. What it does:

- binds 127.0.0.1 on a free port; ``--host ::1`` (IPv6 loopback) works too; a ``--host`` that is not a
  loopback address warns (the store's contents are then served to the network, behind the token only);
- a token per start (``secrets.token_urlsafe``), printed in the URL as Jupyter does: every request without it
  (``?token=`` or the ``X-Nbflow-Token`` header) gets 403; compared in constant time;
- read-only: stores are opened ``mode=ro`` (``nbflow/_view/data.py``); GET and HEAD only (others: 405);
- the page sends no request elsewhere (Content-Security-Policy ``default-src 'none'``, ``connect-src 'self'``),
  and every answer carries ``X-Content-Type-Options: nosniff`` and ``Cache-Control: no-store``;
- errors come back as JSON ``{"error": ...}`` naming what was wrong (never a traceback); what is not written yet
  (a store file no batch has made, an experiment or a row a running batch has not reached) is a 404 with
  ``"waiting": true``: the page says so and shows it once written (``api/version`` changes then, a missing
  file's included). A store file need not exist when the viewer starts (its folder must): viewing never
  creates it.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import sys
import threading
import warnings
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from nbflow._core.errors import NbflowError, NbflowWarning

__all__ = ["Viewer", "is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only reaches this machine: ``localhost``, or a loopback address (127.0.0.0/8, ``::1``)."""
    import ipaddress

    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return False


def _server_class(host: str) -> type[ThreadingHTTPServer]:
    """The threaded HTTP server for ``host``: IPv6 for an IPv6 address (the stdlib's binds IPv4 only)."""
    if ":" not in host:
        return ThreadingHTTPServer
    import socket

    class Server6(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    return Server6


class Viewer:
    """A running viewer: ``url`` (with its token), ``stop()``. Made by ``serve``."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]], host: str = "127.0.0.1", port: int = 0) -> None:
        from nbflow._front import asset, page
        from nbflow._view.data import StoreSource

        self.source = StoreSource(paths, wait=True)
        self.token = secrets.token_urlsafe(24)
        self.lock = threading.Lock()  # one SQLite connection per store, used by one request at a time
        self.html = page("nbflow view", asset("server.js")).encode("utf-8")
        viewer = self

        class Handler(_Handler):
            pass

        Handler.viewer = viewer
        host = host.strip("[]")  # "[::1]", as a URL writes it
        try:
            self.httpd = _server_class(host)((host, port), Handler)
        except OSError:
            self.source.close()
            raise
        self.httpd.daemon_threads = True
        self.host, self.port = host, int(self.httpd.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/?token={self.token}"
        self._thread: threading.Thread | None = None

    def start(self) -> Viewer:
        """Serve in a background thread (tests, ``nf``-side use); ``serve_forever()`` for the command."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="nbflow-view", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        try:
            self.httpd.serve_forever()
        finally:
            self.stop()

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        self.httpd.server_close()
        self.source.close()

    def answer(self, path: str, query: dict[str, str]) -> Any:
        """The JSON of an API page (``path`` after ``/api/``)."""
        src = self.source
        with self.lock:
            if path == "experiments":
                return src.experiments()
            if path == "experiment":
                return src.experiment(_need(query, "id"), query)
            if path == "compare":
                if query.get("va") and query.get("vb"):
                    return src.compare(_need(query, "a"), "", [query["va"], query["vb"]])
                return src.compare(_need(query, "a"), _need(query, "b"))
            if path == "row":
                try:
                    index = int(_need(query, "index"))
                except ValueError:
                    raise _BadRequest("index must be a row number") from None
                return src.row(_need(query, "id"), index)
            if path == "version":
                return src.version()
        raise _NotFound(f"no page api/{path}")


class _BadRequest(Exception):
    pass


class _NotFound(Exception):
    pass


def _need(query: dict[str, str], name: str) -> str:
    value = query.get(name)
    if not value:
        raise _BadRequest(f"give {name}=")
    return value


class _Handler(BaseHTTPRequestHandler):
    viewer: Viewer
    server_version = "nbflow-view"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal shows the URL, not every request
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the page moved on before its answer came
                pass

    def _json(self, status: int, data: Any) -> None:
        body = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _authorized(self, query: dict[str, str]) -> bool:
        given = query.get("token") or self.headers.get("X-Nbflow-Token") or ""
        return hmac.compare_digest(given.encode(), self.viewer.token.encode())

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        if not self._authorized(query):
            self._json(403, {"error": "forbidden: open the URL nbflow view printed (it holds the token)"})
            return
        if parts.path in ("/", "/index.html"):
            self._send(200, self.viewer.html, "text/html; charset=utf-8")
            return
        if not parts.path.startswith("/api/"):
            self._json(404, {"error": f"no page {parts.path}"})
            return
        from nbflow._view.data import NotYet

        try:
            data = self.viewer.answer(parts.path[len("/api/") :], query)
        except NotYet as exc:  # not written yet: the page says so and asks again as the store changes
            self._json(404, {"error": str(exc), "waiting": True})
        except _BadRequest as exc:
            self._json(400, {"error": str(exc)})
        except _NotFound as exc:
            self._json(404, {"error": str(exc)})
        except NbflowError as exc:
            self._json(400, {"error": str(exc)})
        except Exception as exc:  # never a traceback to the page; the terminal gets the type
            print(f"nbflow view: {self.path.split('?')[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._json(500, {"error": f"{type(exc).__name__} while reading the store"})
        else:
            self._json(200, data)

    do_HEAD = do_GET

    def _refuse(self) -> None:
        self._json(405, {"error": "nbflow view is read-only"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse


def serve(
    paths: Sequence[str | os.PathLike[str]], *, host: str = "127.0.0.1", port: int = 0, browser: bool = True
) -> Viewer:
    """Start a viewer over ``paths`` (``nbflow view``): prints the URL, opens the browser unless told not to."""
    if not is_loopback(host):
        warnings.warn(
            f"nbflow view: serving on {host!r}, not only this machine: anyone who can reach it and has the URL's "
            f"token can read these stores",
            NbflowWarning,
            stacklevel=2,
        )
    viewer = Viewer(paths, host, port)
    print(f"nbflow view: {len(viewer.source.paths)} store(s) at {viewer.url}", flush=True)
    print("(read-only; Ctrl-C stops it)", flush=True)
    for path, store in zip(viewer.source.paths, viewer.source.stores, strict=True):
        if store is None:  # (served all the same: a page waits for it, e.g. opened before the batch starts)
            state = "holds no batch yet" if os.path.isfile(path) else "does not exist yet"
            print(f"nbflow view: {path} {state}: waiting for a batch to write it", flush=True)
    if browser:
        import webbrowser

        webbrowser.open(viewer.url)
    return viewer
