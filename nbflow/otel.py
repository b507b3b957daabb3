"""OpenTelemetry traces of runs: one span per run and one per node attempt (optional extra ``nbflow[otel]``).

Turned on with ``nf.config.trace = "otel"`` (OpenTelemetry's global tracer provider) or per call
with ``flow.run(..., trace=provider)``; ``trace=False`` turns it off for one call. Built only on the
events the engine emits: a ``RunTracer`` is one more subscriber of the run. With tracing off no
subscriber exists and the engine does not even build its events, so it costs nothing (measured in
``benchmarks/tracing_overhead.py``). See docs/tracing.md for the span tree and every attribute.

While a node attempt runs, its span is OpenTelemetry's current span in the node's task (and in its
worker thread), so spans that instrumented client libraries start inside the node (an HTTP call,
an LLM SDK) become its children.

Secrets never reach an attribute: values under secret-looking names are replaced by ``[REDACTED]``, and
the text of every secret of the run (``nf.Secret`` inputs, secret-named inputs and batch columns)
is replaced by ``[REDACTED]`` in every string (error messages, tracebacks, questions, variants).
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import threading
import traceback
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nbflow._core.config import check_trace
from nbflow._core.errors import ConfigError
from nbflow._core.events import (
    Event,
    NodeCall,
    NodeCancelled,
    NodeEvent,
    NodeFailed,
    NodePaused,
    NodeRetrying,
    NodeSkipped,
    NodeStarted,
    NodeSucceeded,
    NodeUsage,
    RunFinished,
    RunPaused,
    RunStarted,
)
from nbflow._core.secrets import REDACTED_TEXT, Redactor, is_secret_name, secret_texts

if TYPE_CHECKING:
    from nbflow._record.run import Run

__all__ = ["RunTracer", "attach", "check_trace", "otlp_provider", "row_attacher", "tracer_for"]

_INSTALL = "install it with: pip install 'nbflow[otel]'"
_MAX_TEXT = 4096  # longest string attribute; backends truncate or drop longer ones anyway
_ITEM = re.compile(r"\[\d+\]|@\d+")  # "node[3]" (map item), "node@2" (loop iteration) -> "node"


def _api() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        raise ConfigError(f"tracing needs the OpenTelemetry SDK, which is not installed; {_INSTALL}") from None
    return trace


_TRACERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=1)
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nbflow")
    except PackageNotFoundError:  # running from a source tree
        return "0"


def tracer_for(option: Any) -> Any:
    """The Tracer that a trace option names (one per provider, reused by every run)."""
    if option == "otel":
        return _api().get_tracer("nbflow", _version())  # a proxy: follows the global provider
    if callable(getattr(option, "get_tracer", None)):
        try:
            tracer = _TRACERS.get(option)
            if tracer is None:
                tracer = _TRACERS[option] = option.get_tracer("nbflow", _version())
            return tracer
        except TypeError:  # a provider that cannot be weakly referenced
            return option.get_tracer("nbflow", _version())
    return option


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    """An attribute key whose last part looks secret (``nbflow.batch.variant.api_key``)."""
    return is_secret_name(key.rpartition(".")[2])


def _resolve(trace: Any, where: str) -> Any:
    """The trace option in force: the call's, else ``nf.config.trace``; None when off."""
    if trace is None:
        from nbflow._core.config import config

        trace = config.trace
    else:
        check_trace(trace, where)
    return None if trace is None or trace is False else trace


def attach(run: Run, trace: Any = None, *, where: str = "trace=") -> RunTracer | None:
    """Trace ``run`` (a fresh one, or one about to be resumed) if ``trace`` or ``nf.config.trace`` says so."""
    option = _resolve(trace, where)
    if option is None or any(isinstance(s, RunTracer) for s in run._subscribers):  # a resumed run keeps its own
        return None
    tracer = RunTracer(tracer_for(option), run)
    run.subscribe(tracer)
    return tracer


def row_attacher(
    trace: Any, batch_id: str | None, grid_keys: Sequence[str], secret_columns: Iterable[str]
) -> Callable[[Run, Any], None] | None:
    """For a batch: a function tracing one row's run with the batch id, row and variant on every span (None: off)."""
    option = _resolve(trace, "flow.batch(trace=...)")
    if option is None:
        return None
    tracer = tracer_for(option)
    secret = set(secret_columns)

    def attach_row(run: Run, case: Any) -> None:
        row = case.row
        texts = secret_texts(row) + tuple(str(row[k]) for k in secret if isinstance(row.get(k), str))
        variant = {k: (REDACTED_TEXT if k in secret or is_secret_name(k) else row.get(k)) for k in grid_keys}
        extra: dict[str, Any] = {"nbflow.batch.row": case.index}
        if batch_id is not None:
            extra["nbflow.batch.id"] = batch_id
        if variant:
            extra["nbflow.batch.variant"] = ", ".join(f"{k}={_short(v)}" for k, v in variant.items())
            for k, v in variant.items():
                extra[f"nbflow.batch.variant.{k}"] = _short(v)
        run.subscribe(RunTracer(tracer, run, extra=extra, secrets=texts))

    return attach_row


def otlp_provider(endpoint: str | None = None, *, service_name: str = "nbflow") -> Any:
    """A TracerProvider exporting to an OTLP/HTTP endpoint (default: the ``OTEL_EXPORTER_OTLP_*`` variables).

    Spans are batched and sent in the background; call ``provider.shutdown()`` before the process
    ends to send the last ones.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigError(f"exporting traces needs the OpenTelemetry SDK and OTLP exporter; {_INSTALL}") from None
    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


class _Open:
    """A span still open, and how to make it current and stop being current."""

    __slots__ = ("owner", "span", "token", "usage")

    def __init__(self, span: Any, token: Any, owner: Any) -> None:
        self.span = span
        self.token = token
        self.owner = owner
        self.usage: list[Any] = [0, 0, 0.0, False]  # input tokens, output tokens, cost, any reported


def _owner() -> Any:
    """Who may detach a context token: the running task, or the thread outside any loop."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return threading.get_ident()


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class RunTracer:
    """A run's subscriber that turns its events into OpenTelemetry spans (see the module docstring)."""

    def __init__(
        self, tracer: Any, run: Run, *, extra: Mapping[str, Any] | None = None, secrets: Iterable[str] = ()
    ) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import Status, StatusCode

        self._trace, self._context, self._Status, self._StatusCode = trace, context, Status, StatusCode
        self.tracer = tracer
        self.run = run
        self.redact = Redactor((*secret_texts(run.inputs), *secrets))
        self.common: dict[str, Any] = {"nbflow.flow": run.flow, "nbflow.run_id": run.run_id}
        self.common.update(self._clean(dict(extra or {})))
        self.run_span: _Open | None = None
        self.nodes: dict[str, _Open] = {}
        self.versions: dict[str, str | None] = {}  # node -> its output's data version (lineage)

    # --- lineage (nbflow._engine.lineage: the same versions a run's lineage holds) --------------
    def _environment(self) -> dict[str, Any]:
        graph = self.run.graph
        if graph is None:
            return {}
        from nbflow._engine.lineage import environment

        env = environment(graph)
        git = env.get("git") or {}
        return {
            "nbflow.version": env["nbflow"],
            "nbflow.python.version": env["python"],
            "nbflow.git.commit": git.get("commit"),
            "nbflow.git.dirty": git.get("dirty"),
        }

    def _code(self) -> Mapping[str, str | None]:
        graph = self.run.graph
        if graph is None:
            return {}
        from nbflow._engine.lineage import code_versions

        return code_versions(graph, bool(getattr(self.run._flow, "validate", True)))

    def _inputs(self, path: str) -> dict[str, Any]:
        """A top-level node's code version and resolved inputs, defaulted parameters included, as its run's
        lineage has them (``node_inputs``): ``nbflow.input.<parameter>`` (a short repr, redacted; none for
        an upstream node's output), ``.kind`` (node / input / default), ``.source`` and ``.version``."""
        graph = self.run.graph
        if graph is None or path not in graph.nodes:
            return {}
        from nbflow._engine.lineage import node_inputs

        attrs: dict[str, Any] = {"nbflow.code_version": self._code().get(path)}
        params = node_inputs(graph, path, self.run.inputs, self.versions, self.redact)
        for param, source, kind, value, version in params:
            key = f"nbflow.input.{param}"
            attrs[key] = value
            attrs[f"{key}.kind"] = kind
            attrs[f"{key}.source"] = source
            attrs[f"{key}.version"] = version
        return attrs

    def _output_version(self, path: str) -> dict[str, Any]:
        """A top-level node's output data version (kept: its dependents' input versions)."""
        graph = self.run.graph
        rec = self.run.nodes.get(path)
        if graph is None or path not in graph.nodes or rec is None:
            return {}
        from nbflow._engine.caching import data_version

        version = rec._cache_id if isinstance(rec._cache_id, str) else data_version(rec.output)
        self.versions[path] = version
        return {"nbflow.output_version": version}

    # --- helpers -------------------------------------------------------------------------------
    def _text(self, text: str) -> str:
        text = self.redact(text)
        return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."

    def _clean(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Attributes safe to send: secret-named keys masked, secret texts scrubbed, None dropped."""
        out: dict[str, Any] = {}
        for k, v in attrs.items():
            if v is None:
                continue
            if _secret_key(k):
                v = REDACTED_TEXT
            elif isinstance(v, str):
                v = self._text(v)
            elif not isinstance(v, bool | int | float):
                v = self._text(_short(v))
            out[k] = v
        return out

    def _start(self, name: str, start: float, attrs: dict[str, Any], parent: Any) -> Any:
        ctx = self._trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(
            name, context=ctx, start_time=_ns(start), attributes={**self.common, **self._clean(attrs)}
        )

    def _parent(self, path: str) -> Any:
        """The span of the sub-flow node containing ``path``, else the run's span."""
        head = path.rpartition(".")[0]
        while head:
            found = self.nodes.get(head)
            if found is not None:
                return found.span
            head = head.rpartition(".")[0]
        return None if self.run_span is None else self.run_span.span

    def _current(self, span: Any) -> _Open:
        """Make ``span`` current in this task: spans started inside the node become its children."""
        token = self._context.attach(self._trace.set_span_in_context(span))
        return _Open(span, token, _owner())

    def _release(self, held: _Open) -> None:
        # A token may only be detached where it was attached; elsewhere its task's context ends with it.
        if held.token is not None and held.owner is _owner():
            self._context.detach(held.token)
            held.token = None

    def _end(self, held: _Open, end: float, attrs: dict[str, Any], error: tuple[str, str, str] | None = None) -> None:
        span = held.span
        span.set_attributes(self._clean(attrs))
        if error is not None:
            type_name, message, stack = error
            span.set_attribute("error.type", type_name)
            span.add_event(
                "exception",
                {"exception.type": type_name, "exception.message": message, "exception.stacktrace": stack},
                timestamp=_ns(end),
            )
            span.set_status(self._Status(self._StatusCode.ERROR, f"{type_name}: {message}"))
        self._release(held)
        span.end(end_time=_ns(end))

    def _error(self, exc: BaseException, node: str | None = None) -> tuple[str, str, str]:
        stack = None
        if node is not None:
            try:
                stack = self.run.record(node).traceback
            except Exception:
                stack = None
        if not stack:
            stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return type(exc).__name__, self._text(str(exc)), self._text(stack)

    def _instant(self, path: str, at: float, attrs: dict[str, Any]) -> None:
        """A node that finished without running (skipped, cancelled before starting, cached, overridden)."""
        span = self._start(f"node {path}", at, {"nbflow.node": path, **attrs}, self._parent(path))
        span.end(end_time=_ns(at))

    # --- the subscriber ------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        if isinstance(event, NodeEvent):
            self._node(event)
        elif isinstance(event, RunStarted):
            attrs: dict[str, Any] = {"nbflow.nodes": len(event.nodes), "openinference.span.kind": "CHAIN"}
            if self.run.pause_version:
                attrs["nbflow.resumed"] = True
                attrs["nbflow.pause_version"] = self.run.pause_version
            attrs.update(self._environment())
            span = self._start(f"flow {self.run.flow}", event.time, attrs, None)
            self.run_span = self._current(span)
        elif isinstance(event, RunFinished | RunPaused) and self.run_span is not None:
            for path in list(self.nodes):  # none are left open unless a node ended without its event
                self._end(self.nodes.pop(path), event.time, {"nbflow.status": "unfinished"})
            held, self.run_span = self.run_span, None
            if isinstance(event, RunPaused):
                self._end(held, event.time, {"nbflow.status": "paused", "nbflow.questions": len(event.questions)})
                return
            status = event.status.value
            if status in ("failed", "cancelled"):
                failed = [n for n, r in self.run.nodes.items() if r.status.value == "failed" and r.error is not None]
                why = event.reason or (f"node {failed[0]!r} failed" if failed else status)
                held.span.set_status(self._Status(self._StatusCode.ERROR, self._text(why)))
                if failed:
                    held.span.set_attribute("error.type", type(self.run.nodes[failed[0]].error).__name__)
            self._end(held, event.time, {"nbflow.status": status, "nbflow.reason": event.reason})

    def _call(self, path: str, event: NodeCall, parent: Any) -> None:
        """A model call of the node (its transcript): a child span of the node's, as the OpenTelemetry GenAI
        conventions describe an inference (``chat {model}``), with the messages as events."""
        c = event.call
        op = "chat" if c.api in ("chat", "responses") else "text_completion" if c.api == "completions" else c.api
        params = c.params if isinstance(c.params, Mapping) else {}
        attrs: dict[str, Any] = {
            "nbflow.node": path,
            "nbflow.attempt": event.attempt,
            "openinference.span.kind": "LLM",
            "gen_ai.operation.name": op,
            "gen_ai.system": "openai",
            "gen_ai.request.model": c.model,
            "gen_ai.response.model": c.model,
            "gen_ai.response.id": c.response_id,
            "gen_ai.usage.input_tokens": c.input_tokens,
            "gen_ai.usage.output_tokens": c.output_tokens,
            "nbflow.usage.cost": c.cost,
            "nbflow.call.api": c.api,
            "nbflow.call.retry": c.retry,
            "nbflow.call.streamed": c.streamed,
            "http.response.status_code": c.status_code,
        }
        for key in ("temperature", "max_tokens", "top_p", "seed", "frequency_penalty", "presence_penalty"):
            value = params.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attrs[f"gen_ai.request.{key}"] = value
        output: dict[str, Any] = {"role": "assistant", "content": c.content}
        if c.tool_calls:
            output["tool_calls"] = c.tool_calls
        attrs["gen_ai.input.messages"] = json.dumps(c.messages, default=str)
        attrs["gen_ai.output.messages"] = json.dumps([output], default=str)
        span = self._start(f"{op} {c.model or ''}".strip(), c.started_at, attrs, parent)
        if c.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", (self._text(str(c.finish_reason)),))
        for message in c.messages if isinstance(c.messages, list) else ():
            role = message.get("role", "user") if isinstance(message, Mapping) else "user"
            content = message.get("content") if isinstance(message, Mapping) else message
            kind = role if role in ("system", "user", "assistant", "tool") else "user"
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            span.add_event(f"gen_ai.{kind}.message", self._clean({"content": text}), timestamp=_ns(c.started_at))
        end = c.started_at + (c.latency or 0.0)
        if c.error is None:
            choice = {"index": 0, "finish_reason": c.finish_reason, "message": json.dumps(output, default=str)}
            span.add_event("gen_ai.choice", self._clean(choice), timestamp=_ns(end))
        else:
            kind = f"http {c.status_code}" if c.status_code else c.error.partition(":")[0]
            span.set_attribute("error.type", self._text(kind))
            span.set_status(self._Status(self._StatusCode.ERROR, self._text(c.error)))
        span.end(end_time=_ns(end))

    def _node(self, event: NodeEvent) -> None:
        path = event.node
        attrs: dict[str, Any]
        if isinstance(event, NodeStarted):
            old = self.nodes.pop(path, None)
            if old is not None:  # an attempt that ended without its event (should not happen)
                self._end(old, event.time, {"nbflow.status": "unfinished"})
            attrs = {"nbflow.node": path, "nbflow.attempt": event.attempt, "openinference.span.kind": "CHAIN"}
            attrs.update(self._inputs(path))
            span = self._start(f"node {path}", event.time, attrs, self._parent(path))
            self.nodes[path] = self._current(span)
        elif isinstance(event, NodeUsage):
            key = _ITEM.sub("", path)
            held = self.nodes.get(key) or self.run_span
            if held is None:
                return
            total = held.usage
            total[3] = True
            attrs = {}
            if event.model is not None:
                attrs["gen_ai.request.model"] = event.model
            if event.input_tokens is not None:
                total[0] += event.input_tokens
                attrs["gen_ai.usage.input_tokens"] = total[0]
            if event.output_tokens is not None:
                total[1] += event.output_tokens
                attrs["gen_ai.usage.output_tokens"] = total[1]
            if event.cost is not None:
                total[2] += event.cost
                attrs["nbflow.usage.cost"] = total[2]
            held.span.set_attributes(self._clean(attrs))
        elif isinstance(event, NodeCall):
            held = self.nodes.get(_ITEM.sub("", path)) or self.run_span
            self._call(path, event, None if held is None else held.span)
        elif isinstance(event, NodeSucceeded):
            attrs = {"nbflow.status": "succeeded"}
            if event.cached:
                attrs["nbflow.cached"] = True
            if event.overridden:
                attrs["nbflow.overridden"] = True
            if event.recovered:
                attrs["nbflow.recovered"] = True
                try:
                    recovered_from = self.run.record(path).error
                except Exception:
                    recovered_from = None
                if recovered_from is not None:
                    attrs["error.type"] = type(recovered_from).__name__
            attrs.update(self._output_version(path))
            held = self.nodes.pop(path, None)
            if held is None:  # (it did not start: its inputs were fed, or came with its cached output)
                self._instant(path, event.time, {**self._inputs(path), **attrs, "nbflow.cached": event.cached})
            else:
                held.span.set_attribute("nbflow.cached", False)
                self._end(held, event.time, attrs)
        elif isinstance(event, NodeFailed | NodeRetrying):
            held = self.nodes.pop(path, None)
            attrs = {"nbflow.status": "failed"}
            if isinstance(event, NodeRetrying):
                attrs["nbflow.retry.delay"] = event.delay
            failure = self._error(event.error, None if isinstance(event, NodeRetrying) else path)
            if held is None:  # failed before an attempt started (should not happen): still visible
                held = self._current(self._start(f"node {path}", event.time, {"nbflow.node": path}, self._parent(path)))
            self._end(held, event.time, attrs, failure)
        elif isinstance(event, NodeSkipped):
            self._instant(path, event.time, {"nbflow.status": "skipped", "nbflow.skip_reason": event.reason})
        elif isinstance(event, NodeCancelled):
            attrs = {"nbflow.status": "cancelled", "nbflow.skip_reason": event.reason}
            held = self.nodes.pop(path, None)
            if held is None:
                self._instant(path, event.time, attrs)
            else:
                self._end(held, event.time, attrs)
        elif isinstance(event, NodePaused):
            attrs = {
                "nbflow.status": "paused",
                "nbflow.question": event.question.prompt,
                "nbflow.question.key": event.question.key,
            }
            held = self.nodes.pop(path, None)
            if held is None:
                self._instant(path, event.time, attrs)
            else:
                self._end(held, event.time, attrs)
