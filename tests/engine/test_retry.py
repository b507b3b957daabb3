"""Retries: what is retried, the delays (on a fake clock), the record of every attempt, the events."""

from __future__ import annotations

import pytest

import nbflow as nf

pytestmark = pytest.mark.anyio


class Flaky:
    """Fails ``times`` times with errors from ``make``, then returns ``value``."""

    def __init__(self, times: int, make=lambda n: ConnectionError(f"boom {n}"), value: object = "ok") -> None:
        self.times = times
        self.make = make
        self.value = value
        self.calls = 0

    async def call(self) -> object:
        self.calls += 1
        if self.calls <= self.times:
            raise self.make(self.calls)
        return self.value


class HTTPError(Exception):
    def __init__(self, status_code: int, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        if retry_after is not None:
            self.retry_after = retry_after


def flow_with(node, clock=None, **options) -> nf.Flow:
    flow = nf.Flow("f", clock=clock or nf.FakeClock())
    flow.add(node.call, name="call", **options)
    return flow


async def test_fails_twice_then_succeeds_with_exponential_delays_and_every_attempt_recorded():
    clock = nf.FakeClock()
    node = Flaky(2)
    flow = flow_with(node, clock, retry=nf.Retry(attempts=4, backoff=1, factor=2))
    events: list[nf.Event] = []

    run = await flow.arun(on_event=events.append)

    assert run.status is nf.RunStatus.SUCCEEDED
    assert run["call"] == "ok"
    rec = run.nodes["call"]
    assert [a.number for a in rec.attempts] == [1, 2, 3]
    assert [type(a.error) for a in rec.attempts] == [ConnectionError, ConnectionError, type(None)]
    assert [a.delay for a in rec.attempts] == [1.0, 2.0, None]
    assert all(a.finished_at is not None and a.finished_at >= a.started_at for a in rec.attempts)
    assert rec.attempts[0].started_at <= rec.attempts[1].started_at <= rec.attempts[2].started_at
    assert clock.sleeps == [1.0, 2.0]
    assert rec.error is None  # the node succeeded in the end
    retrying = [e for e in events if isinstance(e, nf.NodeRetrying)]
    assert [(e.node, e.attempt, e.delay, e.error_type) for e in retrying] == [
        ("call", 1, 1.0, "ConnectionError"),
        ("call", 2, 2.0, "ConnectionError"),
    ]
    starts = [e.attempt for e in events if isinstance(e, nf.NodeStarted)]
    assert starts == [1, 2, 3]


async def test_gives_up_after_the_last_attempt_and_keeps_the_last_error():
    clock = nf.FakeClock()
    node = Flaky(10)
    flow = flow_with(node, clock, retry=nf.Retry(attempts=3, backoff=0.5))

    run = await flow.arun()

    rec = run.nodes["call"]
    assert run.status is nf.RunStatus.FAILED
    assert rec.status is nf.NodeStatus.FAILED
    assert node.calls == 3
    assert str(rec.error) == "boom 3"
    assert [str(a.error) for a in rec.attempts] == ["boom 1", "boom 2", "boom 3"]
    assert [a.delay for a in rec.attempts] == [0.5, 1.0, None]
    assert clock.sleeps == [0.5, 1.0]


async def test_max_delay_caps_the_backoff():
    clock = nf.FakeClock()
    flow = flow_with(Flaky(5), clock, retry=nf.Retry(attempts=6, backoff=1, factor=3, max_delay=5))
    await flow.arun()
    assert clock.sleeps == [1, 3, 5, 5, 5]


async def test_jitter_takes_off_at_most_its_fraction():
    clock = nf.FakeClock()
    flow = flow_with(Flaky(4), clock, retry=nf.Retry(attempts=5, backoff=1, factor=2, jitter=0.5))
    await flow.arun()
    for slept, base in zip(clock.sleeps, [1, 2, 4, 8], strict=True):
        assert base * 0.5 <= slept <= base


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad prompt"),
        TypeError("wrong arg"),
        KeyError("k"),
        HTTPError(400),
        HTTPError(404),
        nf.FlowDefinitionError("misconfigured"),
    ],
    ids=lambda e: type(e).__name__ + getattr(e, "args", ("",))[0].__str__()[:10],
)
async def test_non_retryable_errors_fail_at_once(error):
    clock = nf.FakeClock()
    node = Flaky(1, make=lambda n: error)
    run = await flow_with(node, clock, retry=nf.Retry(attempts=5)).arun()
    assert run.nodes["call"].status is nf.NodeStatus.FAILED
    assert node.calls == 1
    assert len(run.nodes["call"].attempts) == 1
    assert clock.sleeps == []


class Retryable(Exception):
    retryable = True


class NotRetryable(TimeoutError):
    retryable = False


class APIConnectionError(Exception):  # named like an LLM client's error; nbflow imports no client
    pass


class Response:
    def __init__(self, status_code: int, headers: dict[str, str]) -> None:
        self.status_code = status_code
        self.headers = headers


class ClientError(Exception):
    def __init__(self, response: Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (TimeoutError(), True),
        (ConnectionResetError(), True),
        (ConnectionError(), True),
        (nf.NodeTimeoutError("n", 1.0), True),
        (HTTPError(429), True),
        (HTTPError(503), True),
        (HTTPError(500), True),
        (HTTPError(408), True),
        (HTTPError(401), False),
        (ClientError(Response(502, {})), True),
        (ClientError(Response(403, {})), False),
        (Retryable(), True),
        (NotRetryable(), False),
        (APIConnectionError(), True),
        (ValueError(), False),
        (FileNotFoundError(), False),
        (nf.TypeValidationError("n", "return", "int", "x"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_the_default_rule_retries_transient_errors_only(error, transient):
    assert nf.is_transient(error) is transient


async def test_429_retry_after_is_honoured_as_the_minimum_wait():
    clock = nf.FakeClock()
    node = Flaky(2, make=lambda n: HTTPError(429, retry_after=7 if n == 1 else 0.1))
    run = await flow_with(node, clock, retry=nf.Retry(attempts=3, backoff=1)).arun()
    assert run["call"] == "ok"
    assert clock.sleeps == [7, 2]  # max(backoff, retry_after) each time
    assert [a.delay for a in run.nodes["call"].attempts] == [7, 2, None]


async def test_retry_after_header_on_the_response_is_honoured():
    clock = nf.FakeClock()
    node = Flaky(1, make=lambda n: ClientError(Response(429, {"retry-after": "3"})))
    run = await flow_with(node, clock, retry=nf.Retry(attempts=2, backoff=1)).arun()
    assert run["call"] == "ok"
    assert clock.sleeps == [3.0]


async def test_retry_after_beyond_max_delay_fails_at_once_and_says_why():
    clock = nf.FakeClock()
    node = Flaky(1, make=lambda n: HTTPError(429, retry_after=3600))
    run = await flow_with(node, clock, retry=nf.Retry(attempts=3, max_delay=60)).arun()
    rec = run.nodes["call"]
    assert rec.status is nf.NodeStatus.FAILED
    assert node.calls == 1
    assert clock.sleeps == []
    assert "retry after 3600s" in rec.traceback and "max_delay" in rec.traceback


async def test_on_chooses_the_retried_errors_by_type_or_predicate():
    clock = nf.FakeClock()
    node = Flaky(2, make=lambda n: ValueError("malformed"))
    run = await flow_with(node, clock, retry=nf.Retry(attempts=3, backoff=0, on=ValueError)).arun()
    assert run["call"] == "ok" and node.calls == 3
    assert clock.sleeps == []  # backoff=0: no sleep at all

    node = Flaky(2, make=lambda n: ConnectionError("down"))
    run = await flow_with(node, clock, retry=nf.Retry(attempts=3, on=ValueError)).arun()
    assert run.nodes["call"].status is nf.NodeStatus.FAILED and node.calls == 1  # 'on' replaces the default

    node = Flaky(2, make=lambda n: RuntimeError("retry me" if n == 1 else "fatal"))
    run = await flow_with(node, clock, retry=nf.Retry(attempts=5, on=lambda e: "retry me" in str(e))).arun()
    assert node.calls == 2 and str(run.nodes["call"].error) == "fatal"


async def test_a_malformed_answer_can_be_retried_by_asking_for_type_validation_errors():
    clock = nf.FakeClock()
    answers = iter(["not a number", "still not", 42])
    flow = nf.Flow("f", clock=clock)

    @flow.node(retry=nf.Retry(attempts=3, backoff=0.1, on=nf.TypeValidationError))
    async def parse() -> int:
        return next(answers)  # type: ignore[return-value]

    run = await flow.arun()
    assert run["parse"] == 42
    assert [type(a.error).__name__ for a in run.nodes["parse"].attempts] == [
        "TypeValidationError",
        "TypeValidationError",
        "NoneType",
    ]


async def test_input_validation_errors_are_never_retried():
    clock = nf.FakeClock()
    flow = nf.Flow("f", clock=clock)
    calls = []
    events: list[nf.Event] = []

    @flow.node
    def source() -> str:
        return "not an int"

    @flow.node(retry=nf.Retry(attempts=5, on=Exception))
    async def consumer(source: int) -> int:
        calls.append(source)
        return source

    run = await flow.arun(on_event=events.append)
    rec = run.nodes["consumer"]
    assert rec.status is nf.NodeStatus.FAILED
    assert isinstance(rec.error, nf.TypeValidationError) and rec.error.parameter == "source"
    assert calls == [] and len(rec.attempts) == 1 and rec.attempts[0].error is rec.error
    assert clock.sleeps == []
    started = [e.attempt for e in events if isinstance(e, nf.NodeStarted) and e.node == "consumer"]
    assert started == [1]


async def test_flow_default_applies_to_every_node_and_a_node_can_opt_out_or_override():
    clock = nf.FakeClock()
    flow = nf.Flow("f", clock=clock, retry=nf.Retry(attempts=3, backoff=1))
    a, b, c = Flaky(2), Flaky(2), Flaky(2)
    flow.add(a.call, name="a")
    flow.add(b.call, name="b", retry=False)
    flow.add(c.call, name="c", retry=5)  # a number: that many attempts, default backoff
    run = await flow.arun()
    assert run.nodes["a"].status is nf.NodeStatus.SUCCEEDED and a.calls == 3
    assert run.nodes["b"].status is nf.NodeStatus.FAILED and b.calls == 1
    assert run.nodes["c"].status is nf.NodeStatus.SUCCEEDED and c.calls == 3


async def test_changing_the_flow_default_takes_effect_on_the_next_run():
    flow = nf.Flow("f", clock=nf.FakeClock())
    node = Flaky(1)
    flow.add(node.call, name="call")
    assert (await flow.arun()).status is nf.RunStatus.FAILED
    flow.retry = nf.Retry(attempts=2)
    node.calls = 0
    assert (await flow.arun()).status is nf.RunStatus.SUCCEEDED


async def test_sync_thread_nodes_are_retried_too():
    clock = nf.FakeClock()
    flow = nf.Flow("f", clock=clock)
    calls = []

    @flow.node(retry=nf.Retry(attempts=3, backoff=0.25))
    def fetch() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("slow upstream")
        return "data"

    run = await flow.arun()
    assert run["fetch"] == "data" and clock.sleeps == [0.25, 0.5]


async def test_the_real_clock_is_used_by_default(monkeypatch):
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(nf.SYSTEM_CLOCK.__class__, "sleep", lambda self, s: fake_sleep(s))
    flow = nf.Flow("f")
    flow.add(Flaky(1).call, name="call", retry=nf.Retry(attempts=2, backoff=0.01))
    run = await flow.arun()
    assert run["call"] == "ok" and slept == [0.01]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attempts": 0}, "attempts"),
        ({"attempts": 1.5}, "attempts"),
        ({"backoff": -1}, "backoff"),
        ({"factor": 0.5}, "factor"),
        ({"max_delay": -2}, "max_delay"),
        ({"jitter": 2}, "jitter"),
        ({"on": "ValueError"}, "on="),
    ],
)
def test_bad_retry_settings_are_refused_with_the_fix(kwargs, message):
    with pytest.raises(nf.FlowDefinitionError, match=message):
        nf.Retry(**kwargs)


def test_bad_retry_option_on_a_node_names_the_node():
    flow = nf.Flow("f")
    with pytest.raises(nf.FlowDefinitionError, match=r"node 'x'.*retry="):

        @flow.node(retry="3")  # type: ignore[call-overload]
        def x() -> int:
            return 1

    with pytest.raises(nf.FlowDefinitionError, match=r"flow 'g'.*retry="):
        nf.Flow("g", retry=False)  # type: ignore[arg-type]


async def test_cancelling_during_the_backoff_keeps_the_attempts_and_cancels_the_node():
    import asyncio

    flow = nf.Flow("f")  # real clock: the 30 s backoff is interrupted by the cancel
    node = Flaky(5)
    flow.add(node.call, name="call", retry=nf.Retry(attempts=3, backoff=30))

    @flow.node
    async def other() -> int:
        return 1

    handle = flow.start()
    for _ in range(100):
        await asyncio.sleep(0)
        if handle.run.nodes["call"].attempts:
            break
    handle.cancel()
    run = await handle
    assert run.status is nf.RunStatus.CANCELLED
    assert run.nodes["call"].status is nf.NodeStatus.CANCELLED
    assert len(run.nodes["call"].attempts) == 1 and run.nodes["call"].attempts[0].delay == 30
    assert run["other"] == 1


async def test_misdeclaration_errors_are_never_retried_even_when_on_says_everything():
    clock = nf.FakeClock()
    node = Flaky(3, make=lambda n: nf.FlowDefinitionError("node built a bad sub-flow"))
    run = await flow_with(node, clock, retry=nf.Retry(attempts=4, on=Exception)).arun()
    assert node.calls == 1 and run.nodes["call"].status is nf.NodeStatus.FAILED


def test_node_timeout_error_pickles_with_its_fields():
    import pickle

    err = pickle.loads(pickle.dumps(nf.NodeTimeoutError("call", 2.5, 3)))
    assert (err.node, err.timeout, err.attempt) == ("call", 2.5, 3) and "attempt 3" in str(err)


async def test_the_drawing_shows_attempts_and_recovery():
    flow = nf.Flow("f", clock=nf.FakeClock())
    flow.add(Flaky(2).call, name="call", retry=3)
    flow.add(Flaky(9).call, name="soft", on_error=nf.Default(0))
    run = await flow.arun()
    source = flow.to_dot(run).source
    assert "succeeded ×3" in source and "(recovered)" in source
