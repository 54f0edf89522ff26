"""The per-call fast paths keep the pipeline's behaviour (issue #11).

An async body runs its first step inline, without a task or a timer, and only a body that
suspends gets a task of its own; ids are UUID4 hex made without a UUID object; a call's logger
binds only when a line is written. Each test pins what the slower form did.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import uuid
from collections.abc import Mapping
from typing import Any

import structlog
from conftest import make_plugin, make_spec

from toolhost import Idempotency, Tool, ToolExecutionContext, ToolOutput
from toolhost._adapters.system_clock import new_id
from toolhost._model import host_reasons
from toolhost._pipeline.log import configure_logging, get_logger
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


def test_ids_are_uuid4_in_lowercase_hex_and_distinct() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(hex=text)
        assert (len(text), parsed.hex, parsed.version, parsed.variant) == (
            32, text, 4, uuid.RFC_4122)


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
