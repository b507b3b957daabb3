"""Test LLM flows offline: an OpenAI-compatible chat-completions server on 127.0.0.1.

``ChatServer`` is a real HTTP/1.1 server with keep-alive connections (as real APIs use: a server
that closes every connection hides the loop-binding bugs of SDK clients, docs/notebooks.md). Point
the real ``openai`` SDK (or ``httpx``) at ``server.base_url``::

    from nbflow.testing import ChatServer
    with ChatServer(latency=0.05, rate_limit_every=10) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key)

It answers ``POST /v1/chat/completions``, ``POST /v1/responses`` (the responses API: ``input`` and
``instructions`` read as messages) and ``GET /v1/models`` with the last user message echoed
(``echo:`` prefix), or with ``answers``: a dict from the last user message to the answer, or a
function of the messages. An answer that is a dict ``{"tool_calls": [{"name": ..., "arguments": ...}]}``
is answered as tool calls (``finish_reason`` ``"tool_calls"``). ``stream=True`` is answered with
server-sent events, one chunk per word, ``stream_delay`` seconds apart (chat: ``chat.completion.chunk``
events, the usage last with ``stream_options={"include_usage": True}``; responses: ``response.output_text.delta``
events, then ``response.completed``). ``gzip=True`` compresses answers for a client that accepts it (as
real APIs do; streams too, each event flushed). Faults for resilience tests: ``latency`` seconds per request (a number or
``(low, high)``), ``error_rate`` (a share of 500 responses, seeded), ``rate_limit_every=n`` (every
n-th request gets 429 with ``Retry-After: retry_after``), ``malformed_every=n`` (every n-th gets a
200 with broken JSON). ``api_key`` is required as ``Authorization: Bearer ...`` (401 otherwise).
Counters: ``requests``, ``completions``, ``connections`` (TCP connections accepted: keep-alive reuses
them), ``max_in_flight``, ``streamed`` (requests answered as a stream).

Run one for a notebook: ``python -m nbflow.testing --port 8000``.

For pytest: ``run_flow(flow, inputs, overrides=..., clock=FakeClock())`` runs a flow and fails the
test with the failed node's error and traceback; ``assert_outputs(run, {"node": expected, ...})``
compares outputs with a diff per node (DataFrames through ``pandas.testing``, floats approximately).
The ``chat_server`` and ``fake_clock`` fixtures come with nbflow's pytest plugin (``nbflow.pytest_plugin``,
loaded by pytest on its own). See docs/testing.md.
"""

from __future__ import annotations

import gzip
import json
import random
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from nbflow._core.clock import FakeClock

if TYPE_CHECKING:
    from nbflow._flow.flow import Flow
    from nbflow._record.run import Run

__all__ = ["ChatServer", "FakeClock", "assert_outputs", "run_flow"]

Answer = str | dict[str, Any]
Answers = Mapping[str, Answer] | Callable[[list[dict[str, Any]]], Answer] | None


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
        stream_delay: float = 0.0,
        gzip: bool = False,
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
        self.stream_delay = stream_delay
        self.gzip = gzip
        self.streamed = 0
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

    def _answer(self, messages: list[dict[str, Any]]) -> Answer:
        last = next((m.get("content") for m in reversed(messages) if m.get("role", "user") == "user"), "")
        if not isinstance(last, str):  # content parts: join their text
            last = " ".join(p.get("text", "") for p in last or [] if isinstance(p, dict))
        if callable(self.answers):
            found = self.answers(messages)
            return found if isinstance(found, dict) else str(found)
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

    def _gzip(self) -> bool:
        """Compress this answer (``ChatServer(gzip=True)`` and a client that accepts it, as real APIs do)."""
        return self.server.chat.gzip and "gzip" in (self.headers.get("Accept-Encoding") or "")

    def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        if self._gzip():
            body = gzip.compress(body)
            headers = {**(headers or {}), "Content-Encoding": "gzip"}
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
        path = self.path.rstrip("/")
        api = "chat" if path.endswith("/chat/completions") else "responses" if path.endswith("/responses") else None
        if api is None:
            self._error(404, f"no route {self.path}", "invalid_request_error")
            return
        try:
            payload = json.loads(raw or b"{}")
            messages = payload["messages"] if api == "chat" else _input_messages(payload)
        except (ValueError, KeyError, TypeError):
            need = "a 'messages' list" if api == "chat" else "an 'input' (a string or a list of messages)"
            self._error(400, f"the body must be JSON with {need}", "invalid_request_error")
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
        answer = chat._answer(messages)
        with chat._lock:
            chat.completions += 1
        model = payload.get("model", chat.model)
        tools = answer.get("tool_calls") if isinstance(answer, dict) else None
        content = None if tools else str(answer)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        out_tokens = (
            len(content.split()) if content else sum(len(str(t.get("arguments", ""))) // 4 for t in tools or ())
        )
        if payload.get("stream"):
            with chat._lock:
                chat.streamed += 1
            events = (
                _chat_events(model, content, tools, prompt_tokens, out_tokens, payload)
                if api == "chat"
                else _response_events(model, content, tools, prompt_tokens, out_tokens)
            )
            self._stream(events, chat.stream_delay)
            return
        if api == "responses":
            body = _response_body(model, content, tools, prompt_tokens, out_tokens)
        else:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if tools:
                message["tool_calls"] = _chat_tool_calls(tools)
            body = {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if tools else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": out_tokens,
                    "total_tokens": prompt_tokens + out_tokens,
                },
            }
        self._send(200, json.dumps(body).encode())

    def _stream(self, events: list[dict[str, Any] | str], delay: float) -> None:
        """Send ``events`` as server-sent events (chunked), ``delay`` seconds apart."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS) if self._gzip() else None
        if packer is not None:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        for n, event in enumerate(events):
            if n and delay > 0:
                time.sleep(delay)
            data = event if isinstance(event, str) else json.dumps(event)
            kind = "" if isinstance(event, str) or "type" not in event else f"event: {event['type']}\n"
            piece = f"{kind}data: {data}\n\n".encode()
            if packer is not None:  # each event flushed: the client can read it at once
                piece = packer.compress(piece) + packer.flush(zlib.Z_SYNC_FLUSH)
                if n == len(events) - 1:
                    piece += packer.flush()
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.server.chat._count(200)


def _input_messages(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The responses API's ``instructions`` and ``input`` as chat messages."""
    given = payload["input"]
    messages = (
        [{"role": "user", "content": given}] if isinstance(given, str) else [m for m in given if isinstance(m, dict)]
    )
    if not isinstance(given, str | list):
        raise TypeError("input")
    if payload.get("instructions"):
        messages.insert(0, {"role": "system", "content": payload["instructions"]})
    return messages


def _chat_tool_calls(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:8]}",
            "type": "function",
            "function": {"name": t["name"], "arguments": _arguments(t)},
        }
        for t in tools
    ]


def _arguments(tool: Mapping[str, Any]) -> str:
    args = tool.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)


def _words(content: str) -> list[str]:
    words = content.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def _chat_events(
    model: str,
    content: str | None,
    tools: list[dict[str, Any]] | None,
    n_in: int,
    n_out: int,
    payload: Mapping[str, Any],
) -> list[dict[str, Any] | str]:
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    events: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": ""})]
    if tools:
        for i, call in enumerate(_chat_tool_calls(tools)):
            fn = call["function"]
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]}))
    else:
        events.extend(chunk({"content": w}) for w in _words(content or ""))
    events.append(chunk({}, "tool_calls" if tools else "stop"))
    if (payload.get("stream_options") or {}).get("include_usage"):
        used = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
        events.append(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": used,
            }
        )
    events.append("[DONE]")
    return events


def _response_body(
    model: str, content: str | None, tools: list[dict[str, Any]] | None, n_in: int, n_out: int
) -> dict[str, Any]:
    output: list[dict[str, Any]]
    if tools:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:8]}",
                "call_id": f"call_{uuid.uuid4().hex[:8]}",
                "name": t["name"],
                "arguments": _arguments(t),
                "status": "completed",
            }
            for t in tools
        ]
    else:
        output = [
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": content, "annotations": []}],
            }
        ]
    return {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": n_in,
            "output_tokens": n_out,
            "total_tokens": n_in + n_out,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _response_events(
    model: str, content: str | None, tools: list[dict[str, Any]] | None, n_in: int, n_out: int
) -> list[dict[str, Any] | str]:
    body = _response_body(model, content, tools, n_in, n_out)
    started = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any] | str] = [{"type": "response.created", "response": started}]
    item_id = body["output"][0]["id"]
    if not tools:
        events.extend(
            {
                "type": "response.output_text.delta",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "delta": w,
                "logprobs": [],
            }
            for w in _words(content or "")
        )
    events.append({"type": "response.completed", "response": body})
    for n, event in enumerate(events):
        if isinstance(event, dict):
            event["sequence_number"] = n
    return events


# --- pytest helpers -----------------------------------------------------------------------------
def run_flow(
    flow: Flow,
    inputs: Mapping[str, Any] | None = None,
    /,
    *,
    overrides: Mapping[str, Any] | None = None,
    targets: Any = None,
    clock: Any = None,
    raise_on_failure: bool = True,
    **kw: Any,
) -> Run:
    """Run ``flow`` for a test: ``flow.run(...)`` without a display, failing the test on a failed run.

    ``overrides`` gives nodes' outputs instead of running them (stub a model call), ``targets`` runs
    only what those nodes need, ``clock`` (an ``nbflow.testing.FakeClock``) is what retry delays and
    the batch's cool-downs sleep on for this run only: a test of "retry after 30 s" takes no time.
    With ``raise_on_failure`` (default) a run that did not succeed raises ``AssertionError`` naming
    each failed node with its error and traceback; other keywords go to ``flow.run``.
    """
    previous = flow.clock
    if clock is not None:
        flow.clock = clock
    try:
        run = flow.run(inputs, overrides=overrides, targets=targets, show=False, **kw)
    finally:
        if clock is not None:
            flow.clock = previous
    if raise_on_failure and run.status.value != "succeeded":
        raise AssertionError(_failure_text(run))
    return run


def _failure_text(run: Run) -> str:
    from nbflow._core.secrets import Redactor

    redact = Redactor.for_inputs(run.inputs)
    lines = [f"run {run.run_id} of flow {run.flow!r} {run.status.value}" + (f": {run.reason}" if run.reason else "")]
    for path, rec in run.walk():
        if rec.status.value == "failed" and rec.error is not None and rec.subrun is None:
            lines.append(f"node {path!r} failed: {rec.error_type}: {rec.error}")
            if rec.traceback:
                lines.append(rec.traceback.rstrip())
        elif rec.status.value in ("skipped", "cancelled", "paused"):
            lines.append(f"node {path!r} {rec.status.value}" + (f": {rec.skip_reason}" if rec.skip_reason else ""))
    return redact("\n".join(lines))


def assert_outputs(run: Run, expected: Mapping[str, Any], *, rel: float = 1e-9, abs: float = 0.0) -> None:
    """Assert that each node in ``expected`` produced that output; every mismatch is reported, with a diff.

    DataFrames and Series are compared with ``pandas.testing`` (its message says which column and
    row), numpy arrays and floats with a tolerance (``rel``, ``abs``, as ``pytest.approx``), anything
    else with ``==`` (a unified diff of the two ``pprint`` forms when they differ). A node that did not
    succeed is reported with its state and error.
    """
    import math

    problems = []
    for node, want in expected.items():
        try:
            rec = run.record(node)
        except Exception as exc:
            problems.append(f"node {node!r}: {exc}")
            continue
        if rec.status.value != "succeeded":
            why = f": {rec.error_type}: {rec.error}" if rec.error is not None else ""
            problems.append(f"node {node!r} {rec.status.value}{why}")
            continue
        got = rec.output
        diff = _difference(got, want, rel, abs, math)
        if diff:
            problems.append(f"node {node!r}: {diff}")
    if problems:
        raise AssertionError(f"{len(problems)} of {len(expected)} outputs differ:\n" + "\n\n".join(problems))


def _difference(got: Any, want: Any, rel: float, abs_: float, math: Any) -> str | None:
    kind = type(want).__module__.partition(".")[0]
    if kind == "pandas":
        import pandas.testing as pdt

        check = pdt.assert_frame_equal if type(want).__name__ == "DataFrame" else pdt.assert_series_equal
        if type(got) is not type(want):
            return f"expected a {type(want).__name__}, got {type(got).__name__}: {got!r:.200}"
        try:
            check(got, want, rtol=rel, atol=abs_)
        except AssertionError as exc:
            return str(exc)
        return None
    if kind == "numpy" and type(want).__name__ == "ndarray":
        import numpy.testing as npt

        try:
            npt.assert_allclose(got, want, rtol=rel, atol=abs_)
        except (AssertionError, TypeError, ValueError) as exc:
            return str(exc).strip()
        return None
    if isinstance(want, float) and isinstance(got, int | float) and not isinstance(got, bool):
        if math.isclose(got, want, rel_tol=rel, abs_tol=abs_) or (math.isnan(got) and math.isnan(want)):
            return None
        return f"expected {want!r}, got {got!r} (off by {got - want:+.6g})"
    try:
        same = bool(got == want)
    except Exception as exc:  # an == that cannot answer (arrays inside containers)
        return f"cannot compare with ==: {type(exc).__name__}: {exc}"
    if same:
        return None
    import difflib
    import pprint

    a, b = pprint.pformat(want, width=88).splitlines(), pprint.pformat(got, width=88).splitlines()
    if len(a) == 1 and len(b) == 1:
        return f"expected {a[0]}, got {b[0]}"
    return "\n".join(difflib.unified_diff(a, b, "expected", "got", lineterm=""))


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
