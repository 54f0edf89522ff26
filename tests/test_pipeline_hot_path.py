"""The per-call fast paths keep the pipeline's behaviour (issue #11).

An async body runs its first step inline, without a task or a timer, and only a body that
suspends gets a task of its own; a call's logger binds only when a line is written; the final
row is one constructor call, canonical JSON reuses a C encoder, a call's cancellation makes
its threading.Event only when waited on. Each test pins what the slower form did (ids:
tests/test_ids.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import io
import json
import threading
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
import structlog
from conftest import make_plugin, make_spec

from toolhost import Idempotency, Tool, ToolExecutionContext, ToolOutput
from toolhost._model import host_reasons
from toolhost._model.digest import canonical_text
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.runs import CancellationEvent
from toolhost._pipeline.log import configure_logging, get_logger
from toolhost._pipeline.pipeline import _finished
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT, Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}

#: Set by the bodies below: a body's context is its own, as a task's is.
SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("SEEN", default="caller's")


def harness(body: Any, timeout_s: float = 30.0) -> Harness:
    spec = make_spec(name="fx.body", input_schema=SCHEMA, output_schema=OUT,
                     timeout_s=timeout_s, idempotency=Idempotency.READ_ONLY)
    return Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=body)])})


async def finishes_at_once(arguments: Mapping[str, Any],
                           context: ToolExecutionContext) -> ToolOutput:
    SEEN.set("body's")
    return ToolOutput(structured={"echo": SEEN.get()}, content="at once")


async def suspends(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    SEEN.set("body's")
    for _ in range(3):
        await asyncio.sleep(0)
    later = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(later.set_result, "after suspending")
    return ToolOutput(structured={"echo": SEEN.get()}, content=await later)


async def suspends_then_fails(arguments: Mapping[str, Any],
                              context: ToolExecutionContext) -> ToolOutput:
    await asyncio.sleep(0)
    raise RuntimeError("boom")


async def cancels_its_own_call(arguments: Mapping[str, Any],
                               context: ToolExecutionContext) -> ToolOutput:
    context.cancellation.cancel()
    return ToolOutput(structured={"echo": "too late"}, content="too late")


async def sleeps(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    await asyncio.sleep(60)
    return ToolOutput(structured={"echo": "never"}, content="never")


def invoke_in_caller_context(h: Harness) -> tuple[str, str, str]:
    """The outcome's content and echo, and the caller's view of SEEN afterwards."""

    async def call() -> tuple[str, str, str]:
        outcome = await h.host.invoke("fx.body", {}, run=h.host.start_run())
        assert outcome.structured is not None, outcome
        return outcome.content, outcome.structured["echo"], SEEN.get()

    return asyncio.run(call())


def test_a_body_that_finishes_without_suspending_runs_in_a_context_of_its_own() -> None:
    with harness(finishes_at_once) as h:
        assert invoke_in_caller_context(h) == ("at once", "body's", "caller's")


def test_a_body_that_suspends_runs_on_and_its_context_stays_its_own() -> None:
    with harness(suspends) as h:
        assert invoke_in_caller_context(h) == ("after suspending", "body's", "caller's")


def test_a_body_that_fails_after_suspending_fails_the_call() -> None:
    with harness(suspends_then_fails) as h:
        outcome = h.invoke("fx.body")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == host_reasons.INTERNAL_UNEXPECTED


def test_a_result_that_comes_after_the_calls_cancellation_is_discarded() -> None:
    # The body finishes in its first step, but its call was cancelled meanwhile: as a late
    # result on the waiting path, it is not the outcome.
    with harness(cancels_its_own_call) as h:
        outcome = h.invoke("fx.body")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == host_reasons.DEADLINE


def test_a_body_that_suspends_past_its_deadline_is_stopped() -> None:
    with harness(sleeps, timeout_s=0.05) as h:
        outcome = h.invoke("fx.body")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == host_reasons.DEADLINE


def test_a_finished_record_is_what_attrs_evolve_made() -> None:
    # Every field set to a value unlike its default, so a field _finished forgot shows.
    values: dict[str, Any] = {}
    for field in attrs.fields(InvocationRecord):
        values[field.name] = f"{field.name}-value"
    values.update(state=InvocationState.RUNNING, scopes=("a", "b"),
                  created_at=DEFAULT_INSTANT, started_at=DEFAULT_INSTANT,
                  decided_at=DEFAULT_INSTANT, retryable=False, artifact_refs=({"id": "x"},))
    record = InvocationRecord(**values)
    later = DEFAULT_INSTANT + dt.timedelta(seconds=1)
    endings: list[tuple[InvocationState, dict[str, Any]]] = [
        (InvocationState.SUCCEEDED, dict(result_structured={"v": 1}, result_content="391",
                                         output_trust="internal_tool", artifact_refs=())),
        (InvocationState.FAILED, dict(failure_kind="k", reason_code="r", retryable=True,
                                      failure_detail={"d": 1}, artifact_refs=())),
        (InvocationState.FAILED, {}),
    ]
    for state, fields in endings:
        assert _finished(record, state, later, fields) == attrs.evolve(
            record, state=state, finished_at=later, **fields)


def test_canonical_text_is_the_encoders_text_and_recovers_from_a_failed_encode() -> None:
    reference = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    shared: dict[str, Any] = {"z": [1, 2.5, None, True], "a": "é\u2028\"", "m": {}}
    for value in [shared, "text\n", 1, 2.5, [], {}, [shared, shared]]:
        assert canonical_text(value) == reference.encode(value)
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError, match="Circular reference detected"):
        canonical_text(cyclic)
    with pytest.raises(TypeError, match="not JSON serializable"):
        canonical_text({"a": [shared, object()]})
    # The failed encodes left nothing behind: the same objects encode again.
    assert canonical_text([shared, shared]) == reference.encode([shared, shared])
    cyclic["self"] = "no longer"
    assert canonical_text(cyclic) == '{"self":"no longer"}'
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(canonical_text(shared)))
    thread.start()
    thread.join()
    assert seen == [reference.encode(shared)]


def test_a_cancellation_waited_on_before_or_after_it_is_set() -> None:
    early = CancellationEvent()
    assert (early.cancelled, early.wait(0)) == (False, False)
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(early.wait(30)))
    waiter.start()
    early.cancel()
    waiter.join()
    assert (woke, early.cancelled, early.wait(0)) == ([True], True, True)
    late = CancellationEvent()
    fired: list[str] = []
    late.add_callback(lambda: fired.append("before"))
    late.cancel()
    late.cancel()
    late.add_callback(lambda: fired.append("after"))
    assert (late.cancelled, late.wait(), fired) == (True, True, ["before", "after"])


def test_a_calls_logger_writes_at_the_level_configured_when_it_logs() -> None:
    out = io.StringIO()
    try:
        configure_logging(FixedClock(DEFAULT_INSTANT), level="warning", stream=out, json=True)
        log = get_logger(invocation_id="i1")
        log.info("dropped", step=1)
        assert out.getvalue() == ""
        configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True)
        log.info("kept", step=2)
        log.warning("also kept")
    finally:
        structlog.reset_defaults()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["event"], e["invocation_id"], e.get("step")) for e in lines] == [
        ("kept", "i1", 2), ("also kept", "i1", None)]
