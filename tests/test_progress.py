"""``context.progress``: what the host's reporter lets through (checked, at most one update per
0.1 s of a call, the completing one always, ``done`` only growing), that a bad argument or a
failing listener never reaches the body, that a call's updates reach the listener its caller
named (from a sync body's worker thread and from an async body) and nobody else, that nothing
of it is recorded on the row, and how the MCP server's pump hands updates from any thread to
the request's client in order (the SDK end to end: tests/journeys/test_progress.py).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pytest
import structlog
from conftest import Closes, make_plugin, make_spec, make_tool

from toolhost import ToolExecutionContext, ToolOutput
from toolhost._mcp.progress import _Pump, request_progress
from toolhost._pipeline import progress
from toolhost._pipeline.progress import MAX_MESSAGE, Progress, ProgressReporter, checked, reporting
from toolhost.testing import CancellationEvent, host_for


class FakeClock:
    """A monotonic clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _reporter(clock: FakeClock) -> tuple[ProgressReporter, list[Progress]]:
    sent: list[Progress] = []
    return ProgressReporter(sent.append, clock), sent


# ------------------------------------------------------------------ the arguments


def test_good_arguments_make_an_update() -> None:
    assert checked(0) == Progress(0.0, None, None)
    assert checked(5, 10, "half") == Progress(5.0, 10.0, "half")
    assert checked(2.5, 2.5) == Progress(2.5, 2.5, None)


@pytest.mark.parametrize(("args", "problem"), [
    ((True,), "done is bool, not a finite number"),
    (("3",), "done is str, not a finite number"),
    ((None,), "done is NoneType, not a finite number"),
    ((math.nan,), "done is float, not a finite number"),
    ((math.inf,), "done is float, not a finite number"),
    ((-1,), "done is negative"),
    ((1, "10"), "total is str, not a finite number or None"),
    ((1, math.inf), "total is float, not a finite number or None"),
    ((1, False), "total is bool, not a finite number or None"),
    ((5, 4), "done is more than total"),
    ((1, 2, 3), "message is int, not a string or None"),
    ((1, 2, b"x"), "message is bytes, not a string or None"),
])
def test_bad_arguments_say_what_is_wrong(args: tuple[Any, ...], problem: str) -> None:
    assert checked(*args) == problem


def test_a_message_loses_its_control_characters_and_is_cut() -> None:
    update = checked(1, None, "a\x1b[31mb\r\nc\x7f\x9bd")
    assert isinstance(update, Progress)
    assert update.message == "a [31mb c d"
    # A direction mark would reorder the rest of a terminal's line: it is not printable either.
    reordered = checked(1, None, "done \u202egnp.exe")
    assert isinstance(reordered, Progress) and reordered.message == "done gnp.exe"
    long = checked(1, None, "x" * 1000)
    assert isinstance(long, Progress) and long.message is not None
    assert len(long.message) == MAX_MESSAGE and long.message.endswith("…")


# ------------------------------------------------------------------ the rate limit


def test_at_most_one_update_per_interval_and_the_completing_one_always() -> None:
    clock = FakeClock()
    report, sent = _reporter(clock)
    report(1, 10, "first")            # the first always goes
    clock.now += 0.05
    report(2, 10, "too soon")         # inside 0.1 s of the last one sent: dropped
    clock.now += 0.06
    report(3, 10, "on time")          # 0.1 s after the last one sent (and a little)
    clock.now += 0.01
    report(4, 10)                     # too soon again
    report(10, 10, "done")            # the completing one goes however soon
    assert [(u.done, u.message) for u in sent] == [
        (1.0, "first"), (3.0, "on time"), (10.0, "done")]
    assert sent[-1].complete


def test_a_dropped_update_does_not_move_the_interval() -> None:
    clock = FakeClock()
    report, sent = _reporter(clock)
    report(1)
    for step in range(1, 10):         # nine updates 0.01 s apart: all inside the interval
        clock.now += 0.01
        report(1 + step)
    clock.now += 0.02                 # 0.1 s after the first one sent (and a little)
    report(20)
    assert [u.done for u in sent] == [1.0, 20.0]


def test_done_must_grow(capsys: pytest.CaptureFixture[str]) -> None:
    clock = FakeClock()
    report, sent = _reporter(clock)
    with structlog.testing.capture_logs() as logs:
        report(5, None, "five")
        clock.now += 1
        report(5, None, "five again")  # no further: dropped quietly (MCP: progress increases)
        clock.now += 1
        report(4)                      # backwards: dropped, and said once
        clock.now += 1
        report(3)
        clock.now += 1
        report(6)
    assert [u.done for u in sent] == [5.0, 6.0]
    assert [(e["event"], e["problem"]) for e in logs] == [
        ("tool.progress_invalid", "done went backwards")]


def test_a_bad_argument_is_dropped_never_raised_and_logged_once() -> None:
    clock = FakeClock()
    report, sent = _reporter(clock)
    with structlog.testing.capture_logs() as logs:
        report("half")   # each returns, nothing is raised into the body
        report(-1)
        report(1, 0.5)
        report(1, None, 42)
        report(1, 2, "good")
    assert sent == [Progress(1.0, 2.0, "good")]
    assert [(e["event"], e["problem"], e["log_level"]) for e in logs] == [
        ("tool.progress_invalid", "done is str, not a finite number", "warning")]


def test_a_failing_listener_never_reaches_the_body() -> None:
    calls: list[Progress] = []

    def broken(update: Progress) -> None:
        calls.append(update)
        raise BrokenPipeError("the client went away")

    clock = FakeClock()
    report = ProgressReporter(broken, clock)
    with structlog.testing.capture_logs() as logs:
        report(1)
        clock.now += 1
        report(2)
    assert [u.done for u in calls] == [1.0, 2.0]
    assert [(e["event"], e["error"]) for e in logs] == [
        ("tool.progress_not_sent", "BrokenPipeError")]


def test_updates_from_many_threads_reach_the_listener_in_growing_order() -> None:
    sent: list[Progress] = []
    report = ProgressReporter(sent.append, lambda: 0.0, min_interval=0.0)
    counter = iter(range(1, 20001))
    lock = threading.Lock()

    def work() -> None:
        for _ in range(2000):
            with lock:
                value = next(counter)
            report(value)  # threads race between taking a value and reporting it

    threads = [threading.Thread(target=work) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [u.done for u in sent]
    assert done and all(a < b for a, b in itertools.pairwise(done))


# ------------------------------------------------------------------ through the pipeline

MARK = "progress-marker-7f3c"


def _body_sync(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    context.progress(1, 3, f"{MARK} one")
    context.progress(2, 3)
    context.progress(3, 3, f"{MARK} all")
    return ToolOutput(structured={"echo": threading.current_thread().name}, content="ok")


async def _body_async(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    context.progress(1, 3, f"{MARK} one")
    await asyncio.sleep(0)
    context.progress(3, 3, f"{MARK} all")
    return ToolOutput(structured={"echo": threading.current_thread().name}, content="ok")


def _bad_body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    context.progress("half")  # type: ignore[arg-type]  # what a careless plugin does
    context.progress(2, 1)
    return ToolOutput(structured={"echo": "still ran"}, content="still ran")


def _host(closes: Closes, body: Callable[..., Any], idempotency: str = "READ_ONLY") -> Any:
    from toolhost import Idempotency

    spec = make_spec(idempotency=Idempotency[idempotency],
                     allow_parallel=idempotency == "READ_ONLY")
    return closes(host_for({"fx-dist": make_plugin(tools=[make_tool(spec, call=body)])}))


@pytest.mark.parametrize("body", [_body_sync, _body_async], ids=["sync", "async"])
def test_a_calls_updates_reach_the_listener_its_caller_named(
        closes: Closes, body: Callable[..., Any]) -> None:
    host = _host(closes, body)
    heard: list[tuple[Progress, str]] = []
    with reporting(lambda u: heard.append((u, threading.current_thread().name))):
        outcome = host.invoke_sync("fx.echo", {"x": "a"})
    assert outcome.ok, outcome
    updates = [u for u, _ in heard]
    # The first and the completing one always go; the middle one only if 0.1 s had passed.
    assert updates[0] == Progress(1.0, 3.0, f"{MARK} one")
    assert updates[-1] == Progress(3.0, 3.0, f"{MARK} all")
    # Handed on from the thread the body reported on: a sync body's worker thread.
    body_thread = outcome.structured["echo"]
    assert {name for _, name in heard} == {body_thread}
    if body is _body_sync:
        assert body_thread != threading.current_thread().name


def test_nobody_listening_costs_nothing_and_hears_nothing(closes: Closes) -> None:
    host = _host(closes, _body_sync)
    assert progress._SINK.get() is None
    outcome = host.invoke_sync("fx.echo", {"x": "a"})
    assert outcome.ok
    run = host.local_run()
    context = host.pipeline.context_for(run, deadline=0.0, cancellation=CancellationEvent())
    host.end_run(run)
    assert context.progress(1, 2, "nobody") is None  # the no-op default


def test_a_listener_hears_only_its_own_calls(closes: Closes) -> None:
    host = _host(closes, _body_sync)
    heard: list[Progress] = []
    with reporting(heard.append):
        host.invoke_sync("fx.echo", {"x": "a"})
    host.invoke_sync("fx.echo", {"x": "b"})  # outside the block: not this listener's
    assert [u.done for u in heard] == [1.0, 3.0] or [u.done for u in heard] == [1.0, 2.0, 3.0]


def test_bad_progress_arguments_never_fail_the_call(closes: Closes) -> None:
    host = _host(closes, _bad_body)
    heard: list[Progress] = []
    with reporting(heard.append), structlog.testing.capture_logs() as logs:
        outcome = host.invoke_sync("fx.echo", {"x": "a"})
    assert outcome.ok and outcome.content == "still ran"
    assert heard == []
    assert [e["event"] for e in logs if e["event"].startswith("tool.progress")] == [
        "tool.progress_invalid"]


def test_progress_is_never_recorded_on_the_row(closes: Closes) -> None:
    host = _host(closes, _body_sync, idempotency="NON_IDEMPOTENT")  # a row written twice
    with reporting(lambda u: None):
        outcome = host.invoke_sync("fx.echo", {"x": "a"})
    row = host.pipeline.row(str(outcome.invocation_id))
    assert MARK not in json.dumps(attrs.asdict(row), default=str)


def test_a_plugins_test_may_give_the_context_its_own_reporter(closes: Closes) -> None:
    host = _host(closes, _body_sync)
    seen: list[tuple[float, float | None, str | None]] = []
    run = host.local_run()
    context = attrs.evolve(
        host.pipeline.context_for(run, deadline=0.0, cancellation=CancellationEvent()),
        reporter=lambda done, total, message: seen.append((done, total, message)))
    _body_sync({}, context)
    host.end_run(run)
    assert seen == [(1, 3, f"{MARK} one"), (2, 3, None), (3, 3, f"{MARK} all")]


# ------------------------------------------------------------------ the MCP server's pump


def test_the_pump_sends_in_order_from_any_thread_and_nothing_after_the_answer() -> None:
    sent: list[tuple[float, float | None, str | None]] = []

    async def send(done: float, total: float | None, message: str | None) -> None:
        await asyncio.sleep(0.001)  # a write to the client's stream takes a while
        sent.append((done, total, message))

    async def scenario() -> None:
        pump = _Pump(send, asyncio.get_running_loop())
        pump(Progress(1.0))                                  # the loop's own thread
        worker = threading.Thread(target=lambda: [pump(Progress(float(n))) for n in (2, 3, 4)])
        worker.start()
        await asyncio.to_thread(worker.join)
        pump(Progress(5.0, 5.0, "end"))
        await pump.flush()                                   # before the answer
        pump(Progress(6.0))                                  # after it: dropped
        await asyncio.sleep(0.01)
        pump.cancel()

    asyncio.run(scenario())
    assert sent == [(1.0, None, None), (2.0, None, None), (3.0, None, None),
                    (4.0, None, None), (5.0, 5.0, "end")]


def test_a_request_without_a_progress_token_sets_no_listener() -> None:
    reports: list[Any] = []

    async def report_progress(*args: Any) -> None:
        reports.append(args)

    def ctx(meta: Any) -> Any:
        return types.SimpleNamespace(
            meta=meta, session=types.SimpleNamespace(report_progress=report_progress))

    async def scenario() -> tuple[object, object, object]:
        async with request_progress(ctx(None)):
            none = progress._SINK.get()
        async with request_progress(ctx({"other": 1})):
            other = progress._SINK.get()
        async with request_progress(ctx({"progress_token": "t1"})):
            asked = progress._SINK.get()
            assert asked is not None
            asked(Progress(1.0, 2.0, "x"))  # type: ignore[operator]
        return none, other, asked

    none, other, asked = asyncio.run(scenario())
    assert (none, other) == (None, None) and asked is not None
    assert reports == [(1.0, 2.0, "x")]
    assert progress._SINK.get() is None
