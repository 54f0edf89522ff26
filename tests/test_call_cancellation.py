"""Each call has its own deadline and cancellation (plugin API 1.0).

``context.deadline`` is min(timeout_s, the run's deadline); ``context.cancellation`` is set when
the call times out and when its run is cancelled, so a sync body (which Python cannot
interrupt) is told, and can stop or kill what it started. The tests synchronize on events the
body sets, never on sleeps racing the pipeline.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from conftest import make_plugin, make_spec

from toolhost import (
    Idempotency,
    Tool,
    ToolExecutionContext,
    ToolFailureKind,
    ToolOutput,
)
from toolhost._adapters.system_clock import monotonic
from toolhost.testing import Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}


class Observer:
    """A sync tool body that blocks on its call's cancellation and reports what it saw."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.observed = threading.Event()
        self.context: ToolExecutionContext | None = None

    def __call__(self, arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        self.context = context
        self.started.set()
        # Long enough that only a cancellation ends it within the test's own bound.
        if context.cancellation.wait(60):
            self.observed.set()
        return ToolOutput(structured={"echo": "done"}, content="done")


def harness(observer: Observer, timeout_s: float) -> Harness:
    spec = make_spec(name="fx.wait", input_schema=SCHEMA, output_schema=OUT,
                     timeout_s=timeout_s, idempotency=Idempotency.READ_ONLY)
    return Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=observer)])})


def test_a_sync_tool_past_its_timeout_observes_its_cancellation() -> None:
    observer = Observer()
    with harness(observer, timeout_s=0.2) as h:
        outcome = h.invoke("fx.wait")
        assert outcome.failure is not None
        assert outcome.failure.reason_code == "tool.timeout.deadline"
        # The pipeline set the call's cancellation before it returned: the body wakes at once.
        assert observer.observed.wait(10), "the timed-out body was never told"
        assert observer.context is not None and observer.context.cancellation.cancelled


def test_run_cancellation_reaches_the_running_call() -> None:
    observer = Observer()
    with harness(observer, timeout_s=30) as h:
        run = h.start_run()

        async def scenario() -> Any:
            task = asyncio.ensure_future(h.host.invoke("fx.wait", {}, run=run))
            # Wait for the body to start without blocking the loop the pipeline runs on.
            while not observer.started.is_set():
                await asyncio.sleep(0.005)
            run.cancellation.cancel()
            return await task

        outcome = asyncio.run(scenario())
        assert outcome.failure is not None
        assert outcome.failure.kind is ToolFailureKind.CANCELLED
        assert observer.observed.wait(10)


def test_each_call_gets_a_cancellation_of_its_own() -> None:
    seen: list[ToolExecutionContext] = []

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        seen.append(context)
        return ToolOutput(structured={"echo": "x"}, content="x")

    spec = make_spec(name="fx.look", input_schema=SCHEMA, output_schema=OUT)
    with Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=body)])}) as h:
        run = h.start_run()
        h.call("fx.look", {}, run=run)
        h.call("fx.look", {}, run=run)
    first, second = seen
    assert first.cancellation is not second.cancellation
    assert first.cancellation is not run.cancellation
    assert not first.cancellation.cancelled and not second.cancellation.cancelled


@pytest.mark.parametrize(("timeout_s", "run_timeout_s", "bound"), [(2, None, 2), (2, 60, 2),
                                                                    (60, 2, 2)])
def test_the_context_deadline_is_the_lesser_of_the_two(
    timeout_s: float, run_timeout_s: float | None, bound: float
) -> None:
    seen: list[float] = []

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        seen.append(context.deadline - monotonic())
        return ToolOutput(structured={"echo": "x"}, content="x")

    spec = make_spec(name="fx.look", input_schema=SCHEMA, output_schema=OUT, timeout_s=timeout_s)
    with Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=body)])}) as h:
        run = h.start_run(timeout_s=run_timeout_s)
        assert h.call("fx.look", {}, run=run).ok
    (left,) = seen
    assert bound - 1.0 < left <= bound


def test_an_async_body_that_ignores_its_cancellation_is_left_behind() -> None:
    # The rest of an async body runs in the pipeline's own task (httpx needs its cancel scopes
    # left in the task that entered them); one that swallows every CancelledError is closed
    # after the cleanup grace, so the call still ends, and the task is not left cancelled.
    closed = threading.Event()

    async def stubborn(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        try:
            while True:
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    continue
        finally:
            closed.set()

    spec = make_spec(name="fx.stubborn", input_schema=SCHEMA, output_schema=OUT, timeout_s=0.2,
                     idempotency=Idempotency.READ_ONLY)
    with Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=stubborn)])}) as h:
        run = h.start_run()

        async def scenario() -> tuple[Any, Any]:
            first = await h.host.invoke("fx.stubborn", {}, run=run)
            await asyncio.sleep(0.01)  # the task goes on: no stray cancellation arrives here
            return first, asyncio.current_task().cancelling()  # type: ignore[union-attr]

        outcome, cancelling = asyncio.run(scenario())
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.timeout.deadline"
    assert closed.is_set()
    assert cancelling == 0


def test_a_body_raising_cancelled_error_on_seeing_its_cancellation_ends_the_call_cancelled() -> (
    None
):
    # Regression: a run cancelled from another thread after the body's last ``await``; the
    # body sees it and raises CancelledError itself. The pipeline took that for its own task
    # being cancelled from outside: no outcome, and the row stayed running.
    async def checks_then_raises(
        arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> ToolOutput:
        await asyncio.sleep(0)  # suspends once: the rest runs in the pipeline's task
        run_cancellation.cancel()  # as another thread would, between two steps
        if context.cancellation.cancelled:
            raise asyncio.CancelledError
        return ToolOutput(structured={"echo": "done"}, content="done")

    spec = make_spec(name="fx.checks", input_schema=SCHEMA, output_schema=OUT,
                     idempotency=Idempotency.READ_ONLY)
    with Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=checks_then_raises)])}) as h:
        run = h.start_run()
        run_cancellation = run.cancellation
        outcome = h.call("fx.checks", {}, run=run)
        assert outcome.invocation_id is not None
        row = h.host.pipeline.invocations.get(outcome.invocation_id)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.cancelled.run_cancelled"
    assert row.state.value == "failed"


def test_the_operator_holds_the_scopes_a_body_checks_for_some_calls() -> None:
    # Tool.checked_scopes (media's artifact.read for references, people's email.read for a
    # source read): not required to call the tool, granted to the operator's run.
    seen: list[frozenset[str]] = []

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        seen.append(context.scopes)
        return ToolOutput(structured={"echo": "x"}, content="x")

    spec = make_spec(name="fx.look", input_schema=SCHEMA, output_schema=OUT,
                     required_scopes=("fx.read",))
    tool = Tool(spec, call=body, checked_scopes=["fx.source"])
    assert tool.checked_scopes == ("fx.source",)
    assert tool.scopes == {"fx.read", "fx.source"}
    with Harness.over({"fx-dist": make_plugin(tools=[tool])}) as h:
        assert h.invoke("fx.look").ok
        narrow = h.start_run(scopes={"fx.read"})
        assert h.call("fx.look", {}, run=narrow).ok  # not required: the call runs
    assert seen == [frozenset({"fx.read", "fx.source"}), frozenset({"fx.read"})]
    with pytest.raises(TypeError):
        Tool(spec, call=body, checked_scopes=[b"fx.source"])  # type: ignore[list-item]


def test_a_sync_call_that_ends_while_queued_for_a_worker_never_runs() -> None:
    """Every worker busy: the call waits in the queue, its deadline passes and its row says
    so; a worker freed later must not run the body after all (a review's 86 of 150
    cancelled calls did, EXTERNAL_WRITE ones included)."""
    from toolhost._pipeline import execution

    ran = threading.Event()

    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        ran.set()
        return ToolOutput(structured={"echo": "ran"}, content="ran")

    release = threading.Event()
    for _ in range(execution.MAX_WORKERS):  # each takes a worker until released
        execution._workers.submit(lambda: release.wait(60), lambda result, error: None)
    try:
        spec = make_spec(name="fx.queued", input_schema=SCHEMA, output_schema=OUT,
                         timeout_s=0.2, idempotency=Idempotency.READ_ONLY)
        with Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=body)])}) as h:
            outcome = h.invoke("fx.queued")
            assert outcome.failure is not None
            assert outcome.failure.reason_code == "tool.timeout.deadline"
    finally:
        release.set()
    # The queue is first in, first out: once a job queued after the body has run, a worker
    # has taken the body up.
    after = threading.Event()
    execution._workers.submit(after.set, lambda result, error: None)
    assert after.wait(30)
    assert not ran.wait(0.5), "a call that ended in the queue ran its body"
