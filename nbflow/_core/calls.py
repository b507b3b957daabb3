"""Transcripts: every model call a node makes, recorded on the node's attempt (``Attempt.calls``).

A ``Call`` holds what the model was sent (model, messages, tools, parameters) and what it answered
(text, tool calls, finish reason), its tokens and cost, latency, the client's retry number and any
error. Calls get here two ways: ``nf.record_call(...)`` (any client; this module), or an ``openai``
client whose HTTP transport nbflow watches (``nf.recorded(client)``, or any client a ``@flow.resource``
returns: ``nbflow/_engine/transcript_hook.py``). Both add the tokens to the attempt's usage through
``nbflow._core.usage`` (one place counts usage), and both put a ``NodeCall`` event on the run when
something subscribes (tracing: ``nbflow/otel.py`` exports it as an OpenTelemetry GenAI span).

Secrets: the text of every ``nf.Secret`` made in this process (and the client's API key) is replaced by
``[REDACTED]`` in a call's texts when it is recorded, so a transcript holds none in memory, in a store or
on screen; request headers (where the API key travels) are never recorded.

``nf.stream(chunk)`` (also here) shows a node's output growing while it runs: the chunks go to the
attempt's ``stream`` and the live run view redraws (throttled).
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import field, fields
from typing import Any

from nbflow._core.errors import NbflowError, RunnerError
from nbflow._core.events import NodeCall
from nbflow._core.records import record
from nbflow._core.secrets import _MARKED, Redactor
from nbflow._core.usage import CURRENT_NODE, ROW, UsageError, add_usage, check_cost

__all__ = [
    "CALL_COLUMNS",
    "Call",
    "CallError",
    "NodeStream",
    "RequestInfo",
    "add_call",
    "call_dict",
    "call_rows",
    "parse_request",
    "parse_response",
    "record_call",
    "scrubber",
    "stream",
    "streaming_node",
    "where_now",
]

CALL_COLUMNS = (
    "node",
    "attempt",
    "call",
    "api",
    "model",
    "messages",
    "tools",
    "params",
    "content",
    "tool_calls",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "cost",
    "latency_s",
    "retry",
    "status_code",
    "error",
    "streamed",
    "response_id",
    "started_at",
)


class CallError(NbflowError, ValueError):
    """``nf.record_call(...)`` got something it cannot record (a message list that is not one, ...)."""


@record()
class Call:
    """One model call of a node attempt (see the module doc). Times in seconds; ``retry``: 0 for a first
    request, n for the client's n-th retry of it; ``status_code``: the HTTP status (None: no HTTP)."""

    api: str = "chat"
    model: str | None = None
    messages: list[Any] = field(default_factory=list)
    tools: list[Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    content: str | None = None
    tool_calls: list[Any] | None = None
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    latency: float | None = None
    started_at: float = 0.0
    retry: int = 0
    status_code: int | None = None
    error: str | None = None
    streamed: bool = False
    response_id: str | None = None
    reported: bool = False
    """``nf.usage`` was given this call too (it counted once)."""

    def __setstate__(self, state: Any) -> None:
        for f in fields(self):  # a call stored by an older nbflow lacks the fields added since
            default = f.default_factory() if callable(f.default_factory) else f.default
            object.__setattr__(self, f.name, default)
        for f, value in zip(fields(self), state, strict=False):
            object.__setattr__(self, f.name, value)

    def __getstate__(self) -> list[Any]:
        return [getattr(self, f.name) for f in fields(self)]


def call_dict(call: Call) -> dict[str, Any]:
    """``call`` as a dict of built-in data (how a store keeps it; ``Call(**d)`` makes it again)."""
    return {f.name: getattr(call, f.name) for f in fields(call)}


# --- reading what an OpenAI-style API was sent and answered (dicts, as JSON gives them) -----------------


@record()
class RequestInfo:
    """A request body read as a call's request fields."""

    api: str
    model: str | None
    messages: list[Any]
    tools: list[Any] | None
    params: dict[str, Any]
    stream: bool


_REQUEST_KEYS = frozenset({"model", "messages", "tools", "input", "instructions", "stream", "stream_options"})


def parse_request(api: str, body: Mapping[str, Any]) -> RequestInfo:
    """The model, messages, tools and other parameters of a chat-completions or responses request body."""
    if api == "responses":
        given = body.get("input")
        messages: list[Any] = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
        if body.get("instructions"):
            messages.insert(0, {"role": "system", "content": body["instructions"]})
    else:
        messages = list(body.get("messages") or [])
    params = {k: v for k, v in body.items() if k not in _REQUEST_KEYS}
    model = body.get("model")
    return RequestInfo(
        api, model if isinstance(model, str) else None, messages, body.get("tools"), params, bool(body.get("stream"))
    )


def _text_of(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts ({"type": "text"|"output_text", "text": ...})
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


def parse_response(api: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A response body's text, tool calls, finish reason, tokens, model and id (the keys of ``Call``)."""
    out: dict[str, Any] = {"response_id": body.get("id")}
    if isinstance(body.get("model"), str):
        out["model"] = body["model"]
    if api == "responses":
        texts: list[str] = []
        calls: list[Any] = []
        for item in body.get("output") or []:
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "message":
                texts.append(_text_of(item.get("content")) or "")
            elif item.get("type") == "function_call":
                calls.append({"id": item.get("call_id"), "name": item.get("name"), "arguments": item.get("arguments")})
        out["content"] = "".join(texts) if texts or not calls else None
        out["tool_calls"] = calls or None
        out["finish_reason"] = body.get("status")
    else:
        choices = body.get("choices") or [{}]
        first = choices[0] if isinstance(choices[0], Mapping) else {}
        message = first.get("message") or {}
        out["content"] = _text_of(message.get("content"))
        calls = [
            {
                "id": c.get("id"),
                "name": (c.get("function") or {}).get("name"),
                "arguments": (c.get("function") or {}).get("arguments"),
            }
            for c in message.get("tool_calls") or []
            if isinstance(c, Mapping)
        ]
        out["tool_calls"] = calls or None
        out["finish_reason"] = first.get("finish_reason")
    used = body.get("usage")
    if isinstance(used, Mapping):
        out["input_tokens"] = used.get("input_tokens", used.get("prompt_tokens"))
        out["output_tokens"] = used.get("output_tokens", used.get("completion_tokens"))
    return out


# --- recording ----------------------------------------------------------------------------------------


def where_now() -> tuple[Any, Any, Any, Any] | None:
    """The node being run here, for a call about to start: (where, record, attempt, batch row), or None."""
    where = CURRENT_NODE.get()
    rec = None if where is None else where.node
    if rec is None:
        return None
    attempts = rec.attempts
    if not attempts:
        return None
    return where, rec, attempts[-1], ROW.get()


_SCRUBBERS: dict[tuple[int, tuple[str, ...]], Redactor | None] = {}


def scrubber(extra: tuple[str, ...] = (), *raw: bytes | str) -> Redactor | None:
    """What removes secrets' texts from a call: every ``nf.Secret`` made so far, and ``extra`` (an API key).

    ``raw``: the call's texts as they came (request and response bodies): None when no secret's text is in
    them (the common case: nothing to copy). A secret JSON would write escaped is always looked for.
    """
    key = (len(_MARKED), extra)  # (the set of marked secrets only grows)
    if key in _SCRUBBERS:
        scrub = _SCRUBBERS[key]
    else:
        texts = [*_MARKED, *(s for s in extra if isinstance(s, str))]
        scrub = Redactor(texts) if texts else None
        if len(_SCRUBBERS) > 64:
            _SCRUBBERS.clear()
        _SCRUBBERS[key] = scrub
    if scrub is None or not raw:
        return scrub
    if any(not t.isascii() or not t.isprintable() or '"' in t or "\\" in t for t in scrub._ordered):
        return scrub
    return scrub if any(scrub.found_in(r) for r in raw) else None


def add_call(at: tuple[Any, Any, Any, Any], call: Call, scrub: Redactor | None) -> Call:
    """Put ``call`` on the attempt of ``at`` (see ``where_now``): texts scrubbed, usage counted, event sent."""
    where, rec, attempt, row = at
    if scrub is not None:
        call.messages = scrub.scrub(call.messages)
        call.tools = scrub.scrub(call.tools)
        call.params = scrub.scrub(call.params)
        call.tool_calls = scrub.scrub(call.tool_calls)
        call.content = scrub.scrub(call.content)
        call.error = scrub.scrub(call.error)
    if attempt.calls is None:
        attempt.calls = []
    attempt.calls.append(call)
    if call.input_tokens is not None or call.output_tokens is not None or call.cost is not None:
        add_usage(where, rec, attempt, row, call.input_tokens, call.output_tokens, call.cost, call.model)
    run = where.run
    root = run._root if run is not None else None
    if root is not None and root._subscribers:  # tracing (nbflow.otel) exports it as a GenAI span
        root._emit(
            NodeCall(
                run_id=root.run_id,
                time=call.started_at + (call.latency or 0.0),
                node=run._path + rec.name,
                call=call,
                attempt=attempt.number,
            )
        )
    return call


def _plain(value: Any) -> Any:
    """A response object (pydantic model, dataclass-like) as plain data."""
    if value is None or isinstance(value, str | int | float | bool | Mapping | list):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return json.loads(json.dumps(value, default=lambda o: getattr(o, "__dict__", str(o))))


def record_call(
    *,
    model: str | None = None,
    messages: Any = None,
    response: Any = None,
    content: str | None = None,
    tool_calls: list[Any] | None = None,
    finish_reason: str | None = None,
    tools: list[Any] | None = None,
    params: Mapping[str, Any] | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cost: float | None = None,
    latency: float | None = None,
    error: BaseException | str | None = None,
    retry: int = 0,
    api: str = "chat",
) -> Call:
    """Record one model call made inside this node in its transcript (``run.calls(node)``), for any client.

    Give what the model was sent (``model``, ``messages``: a list of ``{"role", "content"}`` dicts or one
    string, ``tools``, other ``params``) and what it answered: ``response`` (an OpenAI-style response object
    or dict: its text, tool calls, finish reason, tokens, model and id are read from it) and/or ``content``,
    ``tool_calls``, ``finish_reason``, ``input_tokens``, ``output_tokens``; ``cost`` in your currency,
    ``latency`` in seconds, ``error`` for a call that failed, ``retry`` (0: first try). The tokens and cost
    count as ``nf.usage`` would (so do not also call ``nf.usage`` for this call). Secrets' texts are redacted.
    Returns the recorded ``Call``. Raises CallError for bad values, RunnerError outside a running node.
    """
    at = where_now()
    if at is None:
        raise RunnerError(
            "nf.record_call() records a model call in a node's transcript, so it works inside a node of a "
            "running flow (call it in a function decorated with @flow.node)"
        )
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    elif messages is not None and not isinstance(messages, list | tuple):
        raise CallError(
            f"nf.record_call(messages=...) takes a list of {{'role': ..., 'content': ...}} dicts or one string, "
            f"got {type(messages).__name__}"
        )
    if not isinstance(retry, int) or isinstance(retry, bool) or retry < 0:
        raise CallError(f"nf.record_call(retry=...) is the retry number (0: first try), an int >= 0; got {retry!r}")
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, int | float) or latency < 0):
        raise CallError(f"nf.record_call(latency=...) is seconds, a number >= 0; got {latency!r}")
    try:
        check_cost(cost, "nf.record_call")
    except UsageError as exc:
        raise CallError(str(exc)) from None
    found: dict[str, Any] = {}
    if response is not None:
        body = _plain(response)
        if not isinstance(body, Mapping):
            raise CallError(
                f"nf.record_call(response=...) takes an OpenAI-style response (object or dict), got "
                f"{type(response).__name__}; give content=... instead"
            )
        found = parse_response("responses" if api == "responses" or "output" in body else "chat", body)
    call = Call(
        api=api,
        model=model if model is not None else found.get("model"),
        messages=[_plain(m) for m in messages or ()],
        tools=[_plain(t) for t in tools] if tools is not None else None,
        params=dict(params or {}),
        content=content if content is not None else found.get("content"),
        tool_calls=tool_calls if tool_calls is not None else found.get("tool_calls"),
        finish_reason=finish_reason if finish_reason is not None else found.get("finish_reason"),
        input_tokens=input_tokens if input_tokens is not None else found.get("input_tokens"),
        output_tokens=output_tokens if output_tokens is not None else found.get("output_tokens"),
        cost=None if cost is None else float(cost),
        latency=None if latency is None else float(latency),
        started_at=time.time() - (latency or 0.0),
        retry=retry,
        error=None if error is None else (error if isinstance(error, str) else f"{type(error).__name__}: {error}"),
        response_id=found.get("response_id"),
    )
    for name in ("input_tokens", "output_tokens"):
        value = getattr(call, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise CallError(f"nf.record_call({name}=...) is a number of tokens (an int >= 0), got {value!r}")
    return add_call(at, call, scrubber())


def call_rows(node: str, attempts: list[Any]) -> list[dict[str, Any]]:
    """The rows of ``run.calls()`` for one node's attempts (the keys of ``CALL_COLUMNS``)."""
    rows = []
    for a in attempts:
        for n, c in enumerate(getattr(a, "calls", None) or ()):
            rows.append(
                {
                    "node": node,
                    "attempt": a.number,
                    "call": n + 1,
                    "api": c.api,
                    "model": c.model,
                    "messages": c.messages,
                    "tools": c.tools,
                    "params": c.params,
                    "content": c.content,
                    "tool_calls": c.tool_calls,
                    "finish_reason": c.finish_reason,
                    "input_tokens": c.input_tokens,
                    "output_tokens": c.output_tokens,
                    "cost": c.cost,
                    "latency_s": c.latency,
                    "retry": c.retry,
                    "status_code": c.status_code,
                    "error": c.error,
                    "streamed": c.streamed,
                    "response_id": c.response_id,
                    "started_at": c.started_at,
                }
            )
    return rows


# --- streaming ------------------------------------------------------------------------------------------


def stream(chunk: Any) -> None:
    """Show ``chunk`` (text) as part of this node's output while it runs: the live run view shows the text
    growing (redrawn at most once per ``nf.config.redraw_interval``). The node's output is still what it
    returns. Cheap where nothing watches (a batch row). Raises RunnerError outside a running node."""
    where, attempt = _stream_target("nf.stream()")
    if attempt.stream is None:
        attempt.stream = []
    attempt.stream.append(chunk if isinstance(chunk, str) else str(chunk))
    notice(where)


def _stream_target(who: str) -> tuple[Any, Any]:
    where = CURRENT_NODE.get()
    rec = None if where is None else where.node
    if rec is None or not rec.attempts:
        raise RunnerError(
            f"{who} shows a running node's output as it grows, so it works inside a node of a running flow "
            f"(call it in a function decorated with @flow.node)"
        )
    return where, rec.attempts[-1]


_STREAM_OF = re.compile(r"^\s*(?:typing\.|collections\.abc\.)?Async(?:Iterator|Iterable|Generator)\[\s*str\s*[\],]")


class NodeStream(list[str]):
    """An attempt's ``stream`` while an async generator node runs: it shows what the node yields."""

    __slots__ = ()


def streaming_node(func: Callable[..., AsyncGenerator[Any, Any]]) -> Callable[..., Any]:
    """An ``async def`` node with ``yield`` as a node function: each yielded chunk is streamed
    (``nf.stream``) as it comes; the output is the chunks joined when all are text, else their list.

    The return hint ``AsyncIterator[str]`` (or ``AsyncGenerator[str, ...]``) becomes ``str`` for the
    output's validation; another one is not checked (the output is then a list).
    """

    @functools.wraps(func)
    async def run_streaming(*args: Any, **kwargs: Any) -> Any:
        chunks: list[Any] = []
        gen = func(*args, **kwargs)
        where, attempt = _stream_target(f"the streaming node {func.__name__!r}")
        # What the node yields is what it shows: a recorded client's stream inside it is not shown twice.
        attempt.stream = NodeStream(attempt.stream or ())
        shown = attempt.stream.append
        run = where.run
        root = run._root if run is not None else run
        try:
            async for chunk in gen:
                chunks.append(chunk)
                shown(chunk if type(chunk) is str else str(chunk))
                if root is not None and root._armed:  # a live view watches: it redraws (throttled)
                    notice(where)
        finally:
            attempt.stream = list(attempt.stream)
            await gen.aclose()
        if all(type(c) is str or isinstance(c, str) for c in chunks):
            return "".join(chunks)
        return chunks

    hints = {k: v for k, v in getattr(func, "__annotations__", {}).items() if k != "return"}
    returns = getattr(func, "__annotations__", {}).get("return")
    if _STREAM_OF.match(returns) if isinstance(returns, str) else getattr(returns, "__args__", (None,))[0] is str:
        hints["return"] = str
    run_streaming.__annotations__ = hints
    return run_streaming


def notice(where: Any) -> None:
    """Tell the live view (if one watches the run) that a node's streamed text grew; from any thread."""
    run = where.run
    root = run._root if run is not None else None
    if root is None or not root._armed:
        return
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a worker thread (a sync node): the view lives on the run's loop
        task = getattr(where, "task", None)
        if task is not None:
            task.get_loop().call_soon_threadsafe(_notice_if_armed, root)
        return
    root._notice()


def _notice_if_armed(root: Any) -> None:
    if root._armed:
        root._notice()
