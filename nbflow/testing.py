"""Test LLM flows offline: an OpenAI-compatible chat-completions server on 127.0.0.1.

``ChatServer`` is a real HTTP/1.1 server with keep-alive connections (as real APIs use: a server
that closes every connection hides the loop-binding bugs of SDK clients, docs/notebooks.md). Point
the real ``openai`` SDK (or ``httpx``) at ``server.base_url``::

    from nbflow.testing import ChatServer
    with ChatServer(latency=0.05, rate_limit_every=10) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key)

It answers ``POST /v1/chat/completions`` (and ``GET /v1/models``) with the last user message echoed
(``echo:`` prefix), or with ``answers``: a dict from the last user message to the answer, or a
function of the messages. Faults for resilience tests: ``latency`` seconds per request (a number or
``(low, high)``), ``error_rate`` (a share of 500 responses, seeded), ``rate_limit_every=n`` (every
n-th request gets 429 with ``Retry-After: retry_after``), ``malformed_every=n`` (every n-th gets a
200 with broken JSON). ``api_key`` is required as ``Authorization: Bearer ...`` (401 otherwise).
Counters: ``requests``, ``completions``, ``connections`` (TCP connections accepted: keep-alive reuses
them), ``max_in_flight``. Streaming (``stream=True``) is not implemented (refused with 400).

Run one for a notebook: ``python -m nbflow.testing --port 8000``.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer"]

Answers = Mapping[str, str] | Callable[[list[dict[str, Any]]], str] | None


class ChatServer:
    """An OpenAI-compatible chat-completions server in a background thread (see the module doc)."""

    def __init__(
        self,
        *,
        answers: Answers = None,
        latency: float | tuple[float, float] = 0.0,
        error_rate: float = 0.0,
        rate_limit_every: int = 0,
        retry_after: float = 0.1,
        malformed_every: int = 0,
        api_key: str = "sk-test-nbflow",
        model: str = "nbflow-test",
        port: int = 0,
        seed: int = 0,
    ) -> None:
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"ChatServer(error_rate={error_rate!r}): a share between 0 and 1")
        for name, n in (("rate_limit_every", rate_limit_every), ("malformed_every", malformed_every)):
            if not isinstance(n, int) or n < 0:
                raise ValueError(f"ChatServer({name}={n!r}): every n-th request, an int >= 0 (0: never)")
        self.answers = answers
        self.latency = latency
        self.error_rate = error_rate
        self.rate_limit_every = rate_limit_every
        self.retry_after = retry_after
        self.malformed_every = malformed_every
        self.api_key = api_key
        self.model = model
        self.requests = 0
        self.completions = 0
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.statuses: dict[int, int] = {}
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.chat = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What ``openai.OpenAI(base_url=...)`` takes: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ChatServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, name="nbflow-chat-server", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(10)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what one request gets --------------------------------------------------------------
    def _decide(self) -> tuple[str, float]:
        with self._lock:
            self.requests += 1
            n = self.requests
            lat = self.latency
            delay = self._rng.uniform(*lat) if isinstance(lat, tuple) else float(lat)
            if self.rate_limit_every and n % self.rate_limit_every == 0:
                return "429", delay
            if self.malformed_every and n % self.malformed_every == 0:
                return "malformed", delay
            if self.error_rate and self._rng.random() < self.error_rate:
                return "500", delay
            return "ok", delay

    def _answer(self, messages: list[dict[str, Any]]) -> str:
        last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
        if not isinstance(last, str):  # content parts: join their text
            last = " ".join(p.get("text", "") for p in last or [] if isinstance(p, dict))
        if callable(self.answers):
            return str(self.answers(messages))
        if self.answers is not None and last in self.answers:
            return self.answers[last]
        return f"echo: {last}"

    def _count(self, status: int) -> None:
        with self._lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1

    def __repr__(self) -> str:
        return f"<ChatServer {self.base_url} requests={self.requests}>"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # (socketserver's default listen backlog is 5: a batch opening more connections at once saw some refused)
    request_queue_size = 128
    chat: ChatServer

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.chat._lock:
            self.chat.connections += 1
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real APIs
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.server.chat._count(status)

    def _error(self, status: int, message: str, kind: str, headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()
        self._send(status, body, headers)

    def _authorized(self) -> bool:
        chat = self.server.chat
        if self.headers.get("Authorization") == f"Bearer {chat.api_key}":
            return True
        self._error(401, "Incorrect API key provided.", "invalid_request_error")
        return False

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/").endswith("/models"):
            chat = self.server.chat
            model = {"id": chat.model, "object": "model", "created": 0, "owned_by": "nbflow"}
            self._send(200, json.dumps({"object": "list", "data": [model]}).encode())
        else:
            self._error(404, f"no route {self.path}", "invalid_request_error")

    def do_POST(self) -> None:
        chat = self.server.chat
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorized():
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, f"no route {self.path}", "invalid_request_error")
            return
        try:
            payload = json.loads(raw or b"{}")
            messages = payload["messages"]
        except (ValueError, KeyError):
            self._error(400, "the body must be JSON with a 'messages' list", "invalid_request_error")
            return
        if payload.get("stream"):
            self._error(
                400, "nbflow.testing.ChatServer does not stream; call without stream=True", "invalid_request_error"
            )
            return
        outcome, delay = chat._decide()
        with chat._lock:
            chat.in_flight += 1
            chat.max_in_flight = max(chat.max_in_flight, chat.in_flight)
        try:
            if delay > 0:
                time.sleep(delay)
        finally:
            with chat._lock:
                chat.in_flight -= 1
        if outcome == "429":
            self._error(429, "Rate limit reached.", "rate_limit_error", {"Retry-After": f"{chat.retry_after:g}"})
            return
        if outcome == "500":
            self._error(500, "The server had an error while processing your request.", "server_error")
            return
        if outcome == "malformed":
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [')
            return
        content = chat._answer(messages)
        with chat._lock:
            chat.completions += 1
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        body = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model", chat.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(content.split()),
                "total_tokens": prompt_tokens + len(content.split()),
            },
        }
        self._send(200, json.dumps(body).encode())


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="nbflow's OpenAI-compatible test server (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--error-rate", type=float, default=0.0)
    parser.add_argument("--api-key", default="sk-test-nbflow")
    args = parser.parse_args(argv)
    server = ChatServer(port=args.port, latency=args.latency, error_rate=args.error_rate, api_key=args.api_key)
    print(f"serving on {server.base_url} (api key {args.api_key!r}); Ctrl-C stops", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()
