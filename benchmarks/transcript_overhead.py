"""What transcripts and streaming cost.

1. **Capture per model call.** A node makes ``--calls`` chat-completion calls through the real ``openai``
   SDK whose HTTP transport answers in process after ``--latency`` seconds (1 ms: a fast fake model, so
   the network adds no noise). Measured in the same process, repetitions interleaved, medians:

   * ``plain``: the client as the SDK makes it (the hand-written baseline: nothing recorded);
   * ``recorded``: the same client after ``nf.recorded(client)``: every call becomes a transcript entry
     (request and response parsed, usage counted).

   Reports CPU µs per call (process time: robust to a shared machine's load) and the capture's cost as a
   share of the fake call's 1 ms latency (goal: <= 5%).

2. **Streaming batch rows.** ``flow.batch`` of ``--rows`` rows whose node reads a stream of ``--chunks``
   text chunks (an async generator, as a model's stream is): ``streamed`` is an async generator node
   re-yielding each chunk (nbflow consumes it and shows each chunk: the attempt's stream; nothing watches a
   batch row); ``returned`` (the hand-written baseline) is a plain node consuming the very same generator
   body by hand and returning the joined text. Ratio streamed / returned (goal: ~1.00).

    python benchmarks/transcript_overhead.py [--calls 300] [--latency 0.001] [--rows 2000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import openai

import nbflow as nf

# CPU time of the process, not wall time: the machine these run on is shared, and a neighbour's load
# stretches wall time by up to 3x between runs; the CPU a call costs is what capture adds. (The fake
# model's 1 ms sleep costs no CPU, so the CPU per call is the SDK's and nbflow's own work.)
_clock = time.process_time

_BODY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
    }
).encode()


def make_client(latency: float) -> Any:
    """An ``openai.OpenAI`` client whose transport answers in process after ``latency`` seconds."""
    http_mod = type(openai.DefaultHttpxClient()).__mro__[1]  # the SDK's own HTTP client class (httpx or httpx2)
    mod = __import__(http_mod.__module__.split(".")[0])

    def answer(request: Any) -> Any:
        time.sleep(latency)
        return mod.Response(200, content=_BODY, headers={"content-type": "application/json"})

    http = openai.DefaultHttpxClient(transport=mod.MockTransport(answer))
    return openai.OpenAI(base_url="http://model.invalid/v1", api_key="sk-bench", http_client=http, max_retries=0)


def calls_flow(client: Any, calls: int) -> nf.Flow:
    flow = nf.Flow("bench_calls")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say ok."}]

    @flow.node(thread=False)
    def ask(n: int) -> int:
        for _ in range(n):
            client.chat.completions.create(model="bench", messages=messages, temperature=0)
        return n

    return flow


def transport_costs(n: int, repeat: int) -> tuple[float, float]:  # blocks of n requests, repeat blocks each
    """µs per request through a bare in-process transport, without and with the recording wrapper around it
    (request built as the SDK builds it, body read and closed as the SDK does), timed inside a node."""
    from nbflow._engine.transcript_hook import _transports

    mod = __import__(type(openai.DefaultHttpxClient()).__mro__[1].__module__.split(".")[0])

    class Body(mod.SyncByteStream):  # type: ignore[misc, name-defined]
        def __iter__(self) -> Any:
            yield _BODY

    class Bare(mod.BaseTransport):  # type: ignore[misc, name-defined]
        def handle_request(self, request: Any) -> Any:
            return mod.Response(200, headers={"content-type": "application/json"}, stream=Body())

    sync_kind, _ = _transports(mod)
    bare = Bare()
    wrapped = sync_kind(Bare(), ("sk-bench",), None)
    body = json.dumps(
        {"model": "bench", "messages": [{"role": "user", "content": "Say ok."}], "temperature": 0}
    ).encode()
    headers = {"authorization": "Bearer sk-bench", "x-stainless-retry-count": "0", "content-type": "application/json"}
    url = "http://model.invalid/v1/chat/completions"
    flow = nf.Flow("bench_transport")
    results: dict[str, list[float]] = {"bare": [], "recorded": []}

    @flow.node(thread=False)
    def measure(n: int) -> int:
        for _ in range(repeat):
            for name, transport in (("bare", bare), ("recorded", wrapped)):
                t0 = _clock()
                for _ in range(n):
                    response = transport.handle_request(mod.Request("POST", url, headers=headers, content=body))
                    response.read()
                    response.close()
                results[name].append((_clock() - t0) / n)
        return n

    run = flow.run(n=n, show=False)
    assert len(run.calls("measure")) == n * repeat  # every recorded request was recorded
    # the fastest repetition of each: on a shared machine the others measure the neighbours too
    return min(results["bare"]), min(results["recorded"])


def time_calls(flow: nf.Flow, calls: int) -> float:
    t0 = _clock()
    run = flow.run(n=calls, show=False)
    took = _clock() - t0
    assert run.status is nf.RunStatus.SUCCEEDED
    return took / calls


def stream_flows(chunks: int) -> tuple[nf.Flow, nf.Flow]:
    words = [f"w{i} " for i in range(chunks)]

    async def generate() -> AsyncIterator[str]:  # the model's stream, as the node's code produces it
        for w in words:
            yield w

    async def relay() -> AsyncIterator[str]:  # the streaming node's own body (below), as a plain generator
        async for w in generate():
            yield w

    returned = nf.Flow("bench_returned")

    @returned.node
    async def text(x: int) -> str:  # the hand-written baseline: the same generator, consumed and joined by hand
        return "".join([w async for w in relay()])

    streamed = nf.Flow("bench_streamed")

    @streamed.node(name="text")
    async def text_streamed(x: int) -> AsyncIterator[str]:  # nbflow consumes it: each chunk is also shown
        async for w in generate():
            yield w

    return returned, streamed


def time_batch(flow: nf.Flow, rows: list[dict[str, int]]) -> float:
    t0 = _clock()
    df = flow.batch(rows, progress=False)
    took = _clock() - t0
    assert (df.status == "succeeded").all()
    return took / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--latency", type=float, default=0.001)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args()

    plain = calls_flow(make_client(args.latency), args.calls)
    recorded_client = nf.recorded(make_client(args.latency))
    recorded = calls_flow(recorded_client, args.calls)
    run = recorded.run(n=2, show=False)
    assert len(run.calls("ask")) == 2 and run.calls("ask").content[0] == "ok"  # it does record
    time_calls(plain, 20), time_calls(recorded, 20)  # warm up
    p_times, r_times = [], []
    for _ in range(args.repeat):
        p_times.append(time_calls(plain, args.calls))
        r_times.append(time_calls(recorded, args.calls))
    p, r = statistics.median(p_times), statistics.median(r_times)
    capture = r - p
    print(
        f"model calls through the openai SDK, fake latency {args.latency * 1e3:.1f} ms, CPU time, median of {args.repeat}:"
    )
    print(f"  plain     {p * 1e6:9.1f} µs/call")
    print(f"  recorded  {r * 1e6:9.1f} µs/call   (recorded/plain {r / p:.3f})")
    print(f"  capture   {capture * 1e6:9.1f} µs/call = {capture / args.latency:.1%} of the fake call's latency")

    bare, wrapped = transport_costs(200, 10 * args.repeat)
    own = wrapped - bare
    print(
        f"the recording transport alone (in process, no model), CPU time, fastest of {10 * args.repeat} blocks of 200:"
    )
    print(f"  bare      {bare * 1e6:9.1f} µs/request")
    print(f"  recorded  {wrapped * 1e6:9.1f} µs/request")
    print(f"  capture   {own * 1e6:9.1f} µs/request = {own / args.latency:.1%} of a {args.latency * 1e3:.0f} ms call")

    returned, streamed = stream_flows(args.chunks)
    rows = [{"x": i} for i in range(args.rows)]
    time_batch(returned, rows[:200]), time_batch(streamed, rows[:200])
    b_times, s_times = [], []
    for _ in range(args.repeat):
        b_times.append(time_batch(returned, rows))
        s_times.append(time_batch(streamed, rows))
    b, s = statistics.median(b_times), statistics.median(s_times)
    print(f"batch of {args.rows} rows, {args.chunks} chunks each, CPU time, median of {args.repeat}:")
    print(f"  returned  {b * 1e6:9.1f} µs/row")
    print(
        f"  streamed  {s * 1e6:9.1f} µs/row   (streamed/returned {s / b:.3f}, {(s - b) / args.chunks * 1e9:.0f} ns/chunk)"
    )
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(
                {
                    "plain_us": p * 1e6,
                    "recorded_us": r * 1e6,
                    "capture_us": capture * 1e6,
                    "capture_share_of_latency": capture / args.latency,
                    "transport_bare_us": bare * 1e6,
                    "transport_recorded_us": wrapped * 1e6,
                    "transport_capture_share_of_latency": own / args.latency,
                    "batch_returned_us": b * 1e6,
                    "batch_streamed_us": s * 1e6,
                    "streamed_over_returned": s / b,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
