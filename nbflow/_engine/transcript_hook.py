"""The ``openai`` SDK's calls, recorded in the node's transcript by watching its HTTP transport.

``recorded(client)`` (public as ``nf.recorded``; applied by itself to every client a
``@flow.resource`` returns) wraps the transport of the client's ``httpx`` client. The transport sees
every request the SDK sends, its retries included (the SDK numbers them in the
``x-stainless-retry-count`` header), so each one becomes a ``Call`` of the node attempt running it
(``nbflow._core.calls``): chat completions and the responses API, sync and async, plain or streamed
(``stream=True``: the server-sent events are read as they pass, so the node's text grows in the live
view and the call is recorded when the SDK closes the stream). Requests made outside a node, or to
other endpoints (``/models``), pass through untouched. Headers are never read into a call: the API key
travels in one.

The SDK's HTTP library is ``httpx`` or its successor ``httpx2`` (newer ``openai`` releases): the
transports are made for whichever module the client's class comes from (same interface). Imported
only when a client is recorded.
"""

from __future__ import annotations

import codecs
import functools
import json
import sys
import time
import zlib
from collections.abc import AsyncIterator, Iterator, Mapping
from types import ModuleType
from typing import Any

from nbflow._core.calls import (
    Call,
    CallError,
    NodeStream,
    add_call,
    notice,
    parse_request,
    parse_response,
    scrubber,
    where_now,
)

__all__ = ["recorded", "wants_recording"]

# Where a request goes -> the ``api`` of its call (the path's end; other endpoints are not recorded).
_APIS = (("/chat/completions", "chat"), ("/responses", "responses"), ("/completions", "completions"))
_MAX_BODY = 8 << 20  # a response body larger than this is not parsed into the transcript (its call still is)

Prices = Mapping[str, tuple[float, float]]


def _http_module(http: Any) -> ModuleType | None:
    """The ``httpx``-like module whose ``Client``/``AsyncClient`` ``http`` is (None: not an HTTP client)."""
    for cls in type(http).__mro__:
        root = cls.__module__.split(".", 1)[0]
        if root.startswith("httpx") and cls.__name__ in ("Client", "AsyncClient") and root in sys.modules:
            return sys.modules[root]
    return None


def wants_recording(value: Any) -> bool:
    """Is ``value`` an ``openai`` SDK client (what a resource's instance is recorded for)?"""
    return (
        type(value).__module__.split(".", 1)[0] == "openai"
        and _http_module(getattr(value, "_client", None)) is not None
    )


def recorded(client: Any, *, prices: Prices | None = None) -> Any:
    """Record the model calls ``client`` makes inside nodes in their transcripts; returns ``client``.

    ``client``: an ``openai`` SDK client (``OpenAI``, ``AsyncOpenAI``, ``AzureOpenAI``...) or an ``httpx``
    client talking to an OpenAI-compatible API. ``prices``: ``{model: (input, output)}`` in your
    currency per million tokens, for each call's ``cost`` (without it cost is unknown, as for
    ``nf.usage`` without ``cost=``). Calling it again on the same client changes only its prices.
    Raises CallError for another kind of client (record its calls with ``nf.record_call``).
    """
    mod = _http_module(client)
    if mod is not None:
        http, key = client, None
    else:
        http = getattr(client, "_client", None)
        mod = _http_module(http)
        if mod is None:
            raise CallError(
                f"nf.recorded(client) records an openai SDK client (openai.OpenAI, openai.AsyncOpenAI, ...) or an "
                f"httpx client; got {type(client).__name__}. For another client, call nf.record_call(...) in the "
                f"node after each model call"
            )
        key = getattr(client, "api_key", None)
    if prices is not None:
        _check_prices(prices)
    keys = (key,) if isinstance(key, str) else ()
    sync_kind, async_kind = _transports(mod)
    wrap = async_kind if isinstance(http, mod.AsyncClient) else sync_kind
    http._transport = wrap.around(http._transport, keys, prices)
    mounts = http._mounts
    for pattern, transport in list(mounts.items()):
        if transport is not None:
            mounts[pattern] = wrap.around(transport, keys, prices)
    return client


def _check_prices(prices: Any) -> None:
    if not isinstance(prices, Mapping):
        raise CallError(
            f"nf.recorded(prices=...) maps a model name to (input, output) prices per million tokens; got {prices!r}"
        )
    for model, pair in prices.items():
        ok = isinstance(pair, tuple | list) and len(pair) == 2
        if not ok or not all(isinstance(p, int | float) and not isinstance(p, bool) and p >= 0 for p in pair):
            raise CallError(
                f"nf.recorded(prices={{{model!r}: {pair!r}}}): give (input, output) prices per million tokens, two "
                f"numbers >= 0"
            )


class _Pending:
    """One request being answered: what becomes its ``Call`` once the response ends."""

    __slots__ = (
        "at",
        "buf",
        "call",
        "done",
        "events",
        "info",
        "keys",
        "prices",
        "raw",
        "sse",
        "t0",
        "text",
        "tools",
        "unpack",
        "utf8",
    )

    def __init__(
        self, at: Any, api: str, body: Mapping[str, Any], raw: bytes, retry: int, keys: tuple[str, ...], prices: Any
    ):
        info = self.info = parse_request(api, body)
        self.at = at
        self.raw = raw  # the request body as sent: looked through for secrets' texts once, at the end
        self.keys = keys
        self.prices = prices
        self.call = Call(
            api=api,
            model=info.model,
            messages=info.messages,
            tools=info.tools,
            params=info.params,
            started_at=time.time(),
            retry=retry,
            streamed=info.stream,
        )
        self.t0 = time.perf_counter()
        self.buf = bytearray()
        self.sse = False
        self.events = ""  # an event-stream line not yet complete
        self.text: list[str] = []
        self.tools: dict[int, dict[str, Any]] = {}
        self.done = False
        self.unpack: Any = None  # decompresses the body as it passes (Content-Encoding), or None
        self.utf8 = codecs.getincrementaldecoder("utf-8")("replace")  # a character split between chunks

    # --- the response, as it passes ----------------------------------------------------------------
    def respond(self, response: Any) -> None:
        headers = response.headers
        self.call.status_code = response.status_code
        self.sse = response.status_code < 400 and "text/event-stream" in headers.get("content-type", "")
        encoding = headers.get("content-encoding", "").strip().lower()
        if encoding and encoding != "identity":
            self.unpack = _unpacker(encoding)

    def attach(self, response: Any, body: Any) -> Any:
        """Watch ``response``'s body as it is read (``body``: the sync or async wrapper); returns ``response``."""
        self.respond(response)
        content = getattr(response, "_content", None)
        if content is not None:  # a body given whole, read already (a test transport): recorded now
            self.unpack = None  # (decoded already)
            self.feed(content)
            self.finish()
        else:
            response.stream = body(response.stream, self)
        return response

    def feed(self, chunk: bytes) -> None:
        if self.unpack is not None:
            if self.unpack is False:  # an encoding nbflow cannot read: the call is recorded without its answer
                return
            try:
                chunk = self.unpack(chunk)
            except Exception:
                self.unpack = False
                return
        if not self.sse:
            if len(self.buf) <= _MAX_BODY:
                self.buf += chunk
            return
        lines = (self.events + self.utf8.decode(chunk)).split("\n")
        self.events = lines.pop()
        grew = False
        for line in lines:
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    try:
                        grew = self.event(json.loads(data)) or grew
                    except ValueError:
                        self.call.error = "a streamed event was not JSON"
        if grew:
            notice(self.at[0])

    def event(self, data: Any) -> bool:
        """One streamed event; True when the text grew."""
        if not isinstance(data, Mapping):
            return False
        call = self.call
        if self.info.api == "responses":
            kind = data.get("type")
            if kind == "response.output_text.delta":
                return self.grow(str(data.get("delta", "")))
            if kind in ("response.completed", "response.incomplete", "response.failed") and isinstance(
                data.get("response"), Mapping
            ):
                self.take(parse_response("responses", data["response"]))
            return False
        if isinstance(data.get("model"), str):
            call.model = data["model"]
        call.response_id = data.get("id", call.response_id)
        used = data.get("usage")
        if isinstance(used, Mapping):
            call.input_tokens = used.get("prompt_tokens", used.get("input_tokens"))
            call.output_tokens = used.get("completion_tokens", used.get("output_tokens"))
        grew = False
        for choice in data.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                grew = self.grow(delta["content"])
            for tc in delta.get("tool_calls") or ():
                slot = self.tools.setdefault(tc.get("index", 0), {"id": None, "name": None, "arguments": ""})
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["name"] = fn.get("name") or slot["name"]
                slot["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                call.finish_reason = choice["finish_reason"]
        return grew

    def grow(self, piece: str) -> bool:
        self.text.append(piece)
        attempt = self.at[2]
        shown = attempt.stream
        if shown is None:
            shown = attempt.stream = []
        elif type(shown) is NodeStream:  # a streaming node: it shows what it yields
            return False
        shown.append(piece)
        return True

    def take(self, found: Mapping[str, Any]) -> None:
        call = self.call
        for name, value in found.items():
            if value is not None or name in ("content", "tool_calls"):
                setattr(call, name, value)

    # --- the end ---------------------------------------------------------------------------------
    def failed(self, exc: BaseException) -> None:
        self.call.error = f"{type(exc).__name__}: {exc}"
        self.finish()

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        call = self.call
        call.latency = time.perf_counter() - self.t0
        if self.sse:
            if call.content is None and self.text:
                call.content = "".join(self.text)
            if call.tool_calls is None and self.tools:
                call.tool_calls = [self.tools[i] for i in sorted(self.tools)]
        elif self.buf and call.status_code is not None and len(self.buf) <= _MAX_BODY:
            try:
                body = json.loads(bytes(self.buf))
            except ValueError:
                body = None
            if call.status_code >= 400:
                err = body.get("error") if isinstance(body, Mapping) else None
                message = (
                    err.get("message") if isinstance(err, Mapping) else bytes(self.buf[:300]).decode("utf-8", "replace")
                )
                call.error = f"HTTP {call.status_code}: {message}"
            elif isinstance(body, Mapping):
                self.take(parse_response(call.api, body))
            else:
                call.error = "the response was not JSON (malformed)"
        elif call.status_code is not None and call.status_code >= 400:
            call.error = f"HTTP {call.status_code}"
        if call.cost is None and self.prices and call.model in self.prices:
            p_in, p_out = self.prices[call.model]
            call.cost = ((call.input_tokens or 0) * p_in + (call.output_tokens or 0) * p_out) / 1e6
        answered = repr((call.content, call.tool_calls, call.error, call.model, call.finish_reason))
        self.buf = bytearray()
        add_call(self.at, call, scrubber(self.keys, self.raw, answered))


def _unpacker(encoding: str) -> Any:
    """A function decompressing a body chunk by chunk, for a Content-Encoding (False: one nbflow cannot read)."""
    if encoding in ("gzip", "x-gzip", "deflate"):
        unzip = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding != "deflate" else zlib.MAX_WBITS)
        return unzip.decompress
    if encoding == "br":
        try:
            import brotli

            return brotli.Decompressor().process
        except ImportError:
            return False
    if encoding == "zstd":
        try:
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress
        except ImportError:
            return False
    return False


def _begin(request: Any, keys: tuple[str, ...], prices: Any) -> _Pending | None:
    """The call a request starts, or None (not in a node, not a model endpoint, no JSON body)."""
    if request.method != "POST":
        return None
    path = request.url.path.rstrip("/")
    api = next((name for end, name in _APIS if path.endswith(end)), None)
    if api is None:
        return None
    at = where_now()
    if at is None:
        return None
    try:
        body = json.loads(request.content)
    except Exception:  # a body not read yet (streamed), not JSON
        return None
    if not isinstance(body, Mapping):
        return None
    try:
        retry = int(request.headers.get("x-stainless-retry-count", 0))
    except ValueError:
        retry = 0
    return _Pending(at, api, body, request.content, retry, keys, prices)


@functools.cache
def _transports(mod: ModuleType) -> tuple[Any, Any]:
    """The recording transports (sync, async) for the HTTP module ``mod`` (``httpx`` or ``httpx2``)."""

    class _SyncBody(mod.SyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, pending: _Pending) -> None:
            self.inner = inner
            self.pending = pending

        def __iter__(self) -> Iterator[bytes]:
            feed = self.pending.feed
            for chunk in self.inner:
                feed(chunk)
                yield chunk

        def close(self) -> None:
            try:
                self.inner.close()
            finally:
                self.pending.finish()

    class _AsyncBody(mod.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, pending: _Pending) -> None:
            self.inner = inner
            self.pending = pending

        async def __aiter__(self) -> AsyncIterator[bytes]:
            feed = self.pending.feed
            async for chunk in self.inner:
                feed(chunk)
                yield chunk

        async def aclose(self) -> None:
            try:
                await self.inner.aclose()
            finally:
                self.pending.finish()

    class _Recording:
        def __init__(self, inner: Any, keys: tuple[str, ...], prices: Any) -> None:
            self.inner = inner
            self.keys = keys
            self.prices = prices

        @classmethod
        def around(cls, inner: Any, keys: tuple[str, ...], prices: Any) -> Any:
            if isinstance(inner, cls):  # recorded already: new prices only
                inner.prices = prices if prices is not None else inner.prices
                return inner
            return cls(inner, keys, prices)

    class _SyncRecording(_Recording, mod.BaseTransport):  # type: ignore[name-defined]
        def handle_request(self, request: Any) -> Any:
            pending = _begin(request, self.keys, self.prices)
            if pending is None:
                return self.inner.handle_request(request)
            try:
                response = self.inner.handle_request(request)
            except BaseException as exc:
                pending.failed(exc)
                raise
            return pending.attach(response, _SyncBody)

        def close(self) -> None:
            self.inner.close()

    class _AsyncRecording(_Recording, mod.AsyncBaseTransport):  # type: ignore[name-defined]
        async def handle_async_request(self, request: Any) -> Any:
            pending = _begin(request, self.keys, self.prices)
            if pending is None:
                return await self.inner.handle_async_request(request)
            try:
                response = await self.inner.handle_async_request(request)
            except BaseException as exc:
                pending.failed(exc)
                raise
            return pending.attach(response, _AsyncBody)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return _SyncRecording, _AsyncRecording
