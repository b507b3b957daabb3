"""OpenTelemetry traces: the span tree, attributes, error status, GenAI usage and redaction (SDK in-memory
exporter), and end to end against a real OTLP/HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import nbflow as nf

SECRET = "sk-live-7f3a9c1e"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    yield p
    p.shutdown()


def by_name(spans: Any) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s)
    return out


def one(spans: dict[str, list[ReadableSpan]], name: str) -> ReadableSpan:
    assert len(spans[name]) == 1, spans[name]
    return spans[name][0]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def everything_said(span: ReadableSpan) -> str:
    """Every text a span carries: name, attributes, event attributes, status description."""
    parts = [span.name, span.status.description or "", *map(str, (span.attributes or {}).values())]
    for ev in span.events:
        parts.extend(map(str, (ev.attributes or {}).values()))
    return "\n".join(parts)


def test_one_span_per_run_and_per_node_with_sub_flows_nested(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    inner = nf.Flow("inner")

    @inner.node
    def double(x: int) -> int:
        return 2 * x

    flow = nf.Flow("outer")

    @flow.node
    def start(n: int) -> int:
        return n + 1

    flow.add(inner, name="sub", inputs={"x": "start"}, output="double")

    @flow.node
    def end(sub: int) -> int:
        return sub + 1

    run = flow.run(n=1, trace=provider)
    assert run["end"] == 5
    spans = by_name(exporter.get_finished_spans())
    root = one(spans, "flow outer")
    assert root.parent is None
    assert root.attributes["nbflow.flow"] == "outer"
    assert root.attributes["nbflow.run_id"] == run.run_id
    assert root.attributes["nbflow.status"] == "succeeded"
    assert root.status.status_code is StatusCode.UNSET
    for name in ("start", "sub", "end"):
        span = one(spans, f"node {name}")
        assert parent_id(span) == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
        assert span.attributes["nbflow.node"] == name
        assert span.attributes["nbflow.attempt"] == 1
        assert span.attributes["nbflow.status"] == "succeeded"
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
    nested = one(spans, "node sub.double")
    assert parent_id(nested) == one(spans, "node sub").context.span_id
    assert one(spans, "node start").end_time <= one(spans, "node sub").start_time


def test_retries_are_one_span_per_attempt_and_failures_set_error_status(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    flow = nf.Flow("flaky", retry=nf.Retry(attempts=3, backoff=0.01), clock=nf.FakeClock())
    calls = {"n": 0}

    @flow.node
    def fetch(q: str) -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError(f"reset #{calls['n']}")
        return q

    @flow.node(retry=False)
    def parse(fetch: str) -> int:
        return int(fetch)

    run = flow.run(q="not a number", trace=provider)
    assert run.status is nf.RunStatus.FAILED
    spans = by_name(exporter.get_finished_spans())
    attempts = sorted(spans["node fetch"], key=lambda s: s.attributes["nbflow.attempt"])
    assert [s.attributes["nbflow.attempt"] for s in attempts] == [1, 2, 3]
    for s in attempts[:2]:
        assert s.status.status_code is StatusCode.ERROR
        assert s.attributes["error.type"] == "ConnectionError"
        assert s.attributes["nbflow.retry.delay"] > 0
        assert s.events[0].name == "exception"
    assert attempts[0].status.description == "ConnectionError: reset #1"
    assert attempts[2].status.status_code is StatusCode.UNSET
    assert attempts[2].attributes["nbflow.status"] == "succeeded"
    failed = one(spans, "node parse")
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "ValueError"
    assert "invalid literal for int()" in failed.events[0].attributes["exception.message"]
    assert "in parse" in failed.events[0].attributes["exception.stacktrace"]  # the user's frame
    root = one(spans, "flow flaky")
    assert root.status.status_code is StatusCode.ERROR
    assert root.status.description == "node 'parse' failed"
    assert root.attributes["error.type"] == "ValueError"


def test_skipped_cached_and_paused_nodes(
    provider: TracerProvider, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    flow = nf.Flow("routes", cache=True)

    @flow.router
    def route(kind: str) -> str:
        return kind

    @flow.node(branch="route.a")
    def handle_a(kind: str) -> str:
        return "A"

    @flow.node(branch="route.b")
    def handle_b(kind: str) -> str:
        return "B"

    flow.run(kind="a", trace=provider)
    exporter.clear()
    flow.run(kind="a", trace=provider)
    spans = by_name(exporter.get_finished_spans())
    skipped = one(spans, "node handle_b")
    assert skipped.attributes["nbflow.status"] == "skipped"
    assert skipped.attributes["nbflow.skip_reason"] == "branch 'b' of 'route' not taken"
    assert skipped.start_time == skipped.end_time
    cached = one(spans, "node handle_a")
    assert cached.attributes["nbflow.cached"] is True
    assert cached.attributes["nbflow.status"] == "succeeded"

    ask = nf.Flow("asking")

    @ask.node
    async def review(draft: str) -> str:
        return await nf.ask("Publish?", options=["yes", "no"])

    exporter.clear()
    run = ask.run(draft="d", trace=provider, store=tmp_path / "runs.db")
    assert run.status is nf.RunStatus.PAUSED
    spans = by_name(exporter.get_finished_spans())
    paused = one(spans, "node review")
    assert paused.attributes["nbflow.status"] == "paused"
    assert paused.attributes["nbflow.question"] == "Publish?"
    assert one(spans, "flow asking").attributes["nbflow.status"] == "paused"

    # Resumed after a "restart" (loaded from the store) with tracing on globally: a new run span.
    exporter.clear()
    loaded = nf.load_run(tmp_path / "runs.db", run.run_id)
    nf.config.trace = provider
    try:
        loaded.resume("yes")
    finally:
        nf.config.trace = None
    spans = by_name(exporter.get_finished_spans())
    again = one(spans, "flow asking")
    assert again.attributes["nbflow.resumed"] is True
    assert again.attributes["nbflow.run_id"] == run.run_id
    assert one(spans, "node review").attributes["nbflow.status"] == "succeeded"


def test_usage_follows_the_genai_conventions(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    flow = nf.Flow("llm")

    @flow.node
    async def chat(q: str) -> str:
        response = SimpleNamespace(model="gpt-4o-mini", usage=SimpleNamespace(prompt_tokens=12, completion_tokens=5))
        nf.usage(response)
        nf.usage(input_tokens=3, output_tokens=1, cost=0.002)  # a second call in the same node: summed
        return "ok"

    @flow.node
    def judge(chat: str) -> bool:  # a sync node in a worker thread
        nf.usage({"input_tokens": 7, "output_tokens": 2}, model="judge-1")
        return True

    @flow.map(over="items")
    async def per_item(items: list[int]) -> int:
        nf.usage(model="small", input_tokens=items, output_tokens=1)
        return items

    run = flow.run(q="hi", items=[1, 2, 3], trace=provider)
    assert run.status is nf.RunStatus.SUCCEEDED
    spans = by_name(exporter.get_finished_spans())
    chat_span = one(spans, "node chat")
    assert chat_span.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat_span.attributes["gen_ai.usage.input_tokens"] == 15
    assert chat_span.attributes["gen_ai.usage.output_tokens"] == 6
    assert chat_span.attributes["nbflow.usage.cost"] == pytest.approx(0.002)
    judge_span = one(spans, "node judge")
    assert judge_span.attributes["gen_ai.request.model"] == "judge-1"
    assert judge_span.attributes["gen_ai.usage.input_tokens"] == 7
    mapped = one(spans, "node per_item")
    assert mapped.attributes["gen_ai.usage.input_tokens"] == 6
    assert mapped.attributes["gen_ai.usage.output_tokens"] == 3


def test_usage_events_and_bad_usage() -> None:
    flow = nf.Flow("u")
    seen: list[nf.NodeUsage] = []

    @flow.node
    async def a(x: int) -> int:
        nf.usage(model="m", input_tokens=x)
        return x

    flow.run(x=4, on_event=lambda e: seen.append(e) if isinstance(e, nf.NodeUsage) else None)
    assert [(e.node, e.model, e.input_tokens, e.output_tokens, e.attempt) for e in seen] == [("a", "m", 4, None, 1)]
    with pytest.raises(nf.RunnerError, match="works inside a node"):
        nf.usage(input_tokens=1)

    @flow.node
    async def b(a: int) -> int:
        nf.usage(input_tokens=-1)
        return a

    run = flow.run(x=1)
    assert "nf.usage(input_tokens=...) is a number of tokens (an int >= 0), got -1" in str(run.nodes["b"].error)


def test_the_node_span_is_current_inside_the_node(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    flow = nf.Flow("ctx")
    other = provider.get_tracer("client-library")

    @flow.node
    async def call(q: str) -> str:
        with other.start_as_current_span("http POST"):
            await asyncio.sleep(0)
        return q

    @flow.node
    def sync_call(call: str) -> str:  # runs in a worker thread
        with other.start_as_current_span("db query"):
            pass
        return call

    outer = provider.get_tracer("app")
    with outer.start_as_current_span("request") as request:
        flow.run(q="x", trace=provider)
    spans = by_name(exporter.get_finished_spans())
    assert parent_id(one(spans, "http POST")) == one(spans, "node call").context.span_id
    assert parent_id(one(spans, "db query")) == one(spans, "node sync_call").context.span_id
    assert parent_id(one(spans, "flow ctx")) == request.get_span_context().span_id
    # Nothing is left current after the run.
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_secrets_never_reach_an_attribute(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    flow = nf.Flow("leaky")

    @flow.node
    def login(client: str, api_key: str) -> str:
        return f"Bearer {client}"

    @flow.node
    def call(login: str) -> str:
        raise PermissionError(f"token rejected: {login}")

    @flow.node
    async def confirm(api_key: str) -> str:
        return await nf.ask(f"use key {api_key}?", options=["yes"])

    flow.run(client=nf.Secret(SECRET), api_key="plain-but-named-secret", trace=provider)
    spans = exporter.get_finished_spans()
    said = "\n".join(everything_said(s) for s in spans)
    assert SECRET not in said
    assert "plain-but-named-secret" not in said
    assert "token rejected: Bearer [REDACTED]" in said
    assert "use key [REDACTED]?" in said

    exporter.clear()
    rows = [{"client": nf.Secret(SECRET), "api_key": "k-1234", "note": nf.Secret("carried-5678")}]
    flow.batch(
        rows,
        grid={"auth_token": ["tok-5678"], "label": [nf.Secret("variant-9012")]},
        labels=["auth_token", "label"],  # grid keys that feed no input are declared labels
        trace=provider,
        progress=False,
    )
    said = "\n".join(everything_said(s) for s in exporter.get_finished_spans())
    assert SECRET not in said and "k-1234" not in said and "tok-5678" not in said
    assert "variant-9012" not in said and "label=[REDACTED]" in said
    assert "nbflow.batch.variant.auth_token" in {k for s in exporter.get_finished_spans() for k in s.attributes}


def test_batch_rows_carry_batch_id_row_and_variant(
    provider: TracerProvider, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    flow = nf.Flow("evals")

    @flow.node
    def answer(question: str, prompt: str) -> str:
        return f"{prompt}: {question}"

    rows = [{"question": "a"}, {"question": "b"}]
    frame = flow.batch(
        rows, grid={"prompt": ["terse", "steps"]}, trace=provider, store=tmp_path / "b.db", progress=False
    )
    spans = by_name(exporter.get_finished_spans())
    roots = spans["flow evals"]
    assert len(roots) == 4
    assert len({s.context.trace_id for s in roots}) == 4  # one trace per row
    assert {s.attributes["nbflow.batch.id"] for s in roots} == {frame.attrs["batch_id"]}
    assert sorted(s.attributes["nbflow.batch.row"] for s in roots) == [0, 1, 2, 3]
    got = {(s.attributes["nbflow.batch.row"], s.attributes["nbflow.batch.variant"]) for s in spans["node answer"]}
    assert got == {(0, "prompt=terse"), (1, "prompt=steps"), (2, "prompt=terse"), (3, "prompt=steps")}
    assert {s.attributes["nbflow.run_id"] for s in roots} == set(frame["run_id"])

    exporter.clear()
    flow.batch(rows, grid={"prompt": ["x"]}, trace=False, progress=False)
    assert exporter.get_finished_spans() == ()


def test_config_trace_otel_uses_the_global_provider(exporter: InMemorySpanExporter) -> None:
    global_provider = TracerProvider()
    global_provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(global_provider)  # once per process: this is the only test that sets it
    flow = nf.Flow("global")

    @flow.node
    def a(x: int) -> int:
        return x

    nf.config.trace = "otel"
    try:
        flow.run(x=1)
        assert {s.name for s in exporter.get_finished_spans()} == {"flow global", "node a"}
        exporter.clear()
        flow.run(x=1, trace=False)  # off for one call
        assert exporter.get_finished_spans() == ()
    finally:
        nf.config.trace = None
    flow.run(x=1)
    assert exporter.get_finished_spans() == ()


def test_bad_trace_options_are_refused() -> None:
    flow = nf.Flow("bad")

    @flow.node
    def a(x: int) -> int:
        return x

    with pytest.raises(nf.ConfigError, match=r'nbflow.config.trace must be "otel"'):
        nf.config.trace = "jaeger"
    assert nf.config.trace is None
    with pytest.raises(nf.ConfigError, match="flow 'bad': trace= must be"):
        flow.run(x=1, trace=42)
    with pytest.raises(nf.BatchError, match="trace= cannot follow rows to Dask workers"):
        flow.batch([{"x": 1}], trace="otel", executor=object())


def test_tracing_off_imports_nothing() -> None:
    code = (
        "import sys, nbflow as nf\n"
        "flow = nf.Flow('f')\n"
        "@flow.node\n"
        "def a(x: int) -> int:\n"
        "    nf.usage(input_tokens=1)\n"
        "    return x\n"
        "flow.run(x=1); flow.batch([{'x': 1}, {'x': 2}], progress=False)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'nbflow.otel'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


# --- end to end: a real OTLP/HTTP receiver ----------------------------------------------------------
class _Receiver(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[bytes] = []
        self.got = threading.Condition()

    def spans(self) -> list[tuple[Any, dict[str, Any], str]]:
        """(span, attributes, service name) of every span received so far."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out = []
        for body in list(self.requests):
            req = ExportTraceServiceRequest.FromString(body)
            for rs in req.resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        attrs = {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}
                        out.append((span, attrs, service))
        return out


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_response(404)
            self.end_headers()
            return
        with self.server.got:
            self.server.requests.append(body)
            self.server.got.notify_all()
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_spans_reach_a_real_otlp_http_receiver(receiver: _Receiver) -> None:
    from nbflow.otel import otlp_provider

    flow = nf.Flow("e2e")

    @flow.node
    async def chat(q: str, api_key: str) -> str:
        nf.usage(model="m-1", input_tokens=10, output_tokens=4)
        raise RuntimeError(f"quota exceeded for {api_key}")

    provider = otlp_provider(f"http://127.0.0.1:{receiver.server_port}")
    run = flow.run(q="hi", api_key=SECRET, trace=provider)
    provider.shutdown()  # flushes the batch processor
    assert run.status is nf.RunStatus.FAILED
    spans = {s.name: (s, a, svc) for s, a, svc in receiver.spans()}
    assert set(spans) == {"flow e2e", "node chat"}
    span, attrs, service = spans["node chat"]
    assert service == "nbflow"
    assert attrs["gen_ai.request.model"] == "m-1"
    assert attrs["gen_ai.usage.input_tokens"] == 10
    assert attrs["error.type"] == "RuntimeError"
    assert span.status.code == span.status.STATUS_CODE_ERROR
    assert span.status.message == "RuntimeError: quota exceeded for [REDACTED]"
    assert span.parent_span_id == spans["flow e2e"][0].span_id
    assert all(SECRET.encode() not in body for body in receiver.requests)


def test_the_cli_sends_traces_of_a_run_and_a_batch(receiver: _Receiver, tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(
        "import nbflow as nf\n"
        "flow = nf.Flow('cli')\n"
        "@flow.node\n"
        "def answer(question: str, api_key: str) -> str:\n"
        "    nf.usage(model='m', input_tokens=len(question), output_tokens=1)\n"
        "    return question.upper()\n"
    )
    (tmp_path / "cases.jsonl").write_text('{"question": "a"}\n{"question": "bb"}\n')
    env = {**os.environ, "NBFLOW_KEY": SECRET}
    endpoint = f"http://127.0.0.1:{receiver.server_port}"
    base = [sys.executable, "-m", "nbflow"]
    run = subprocess.run(
        [*base, "run", "flows:flow", "-i", "question=hello", "--secret", "api_key=NBFLOW_KEY", "--otlp-endpoint", endpoint],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint + "/v1/traces"
    batch = subprocess.run(
        [*base, "batch", "flows:flow", "cases.jsonl", "--secret", "api_key=NBFLOW_KEY", "--trace", "--batch-id", "b1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert batch.returncode == 0, batch.stderr
    spans = receiver.spans()
    single = [a for s, a, _ in spans if s.name == "node answer" and "nbflow.batch.id" not in a]
    assert [a["gen_ai.usage.input_tokens"] for a in single] == [5]
    rows = sorted(
        (a["nbflow.batch.row"], a["gen_ai.usage.input_tokens"])
        for s, a, _ in spans
        if a.get("nbflow.batch.id") == "b1" and s.name == "node answer"
    )
    assert rows == [(0, 1), (1, 2)]
    assert all(SECRET.encode() not in body for body in receiver.requests)
