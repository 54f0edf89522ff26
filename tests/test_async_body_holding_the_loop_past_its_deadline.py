"""An async body that holds the event loop past its call's deadline (``time.sleep``, a CPU
loop, in its first step or after an ``await``) ends as the timeout it is.

The host cannot pre-empt such a body, and the deadline's timer cannot fire while the body
holds the loop; but the result (or failure) it hands back after the deadline is refused, as a
late sync body's is (D56): ``tool.timeout.deadline``, or, when the run's deadline was the
earlier one, the same code naming the run's deadline and not retryable (D433). Before, each
was recorded ``succeeded`` and its output given to the model as if in time. Real host and
SQLite store.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec

from toolhost import Idempotency, Reason, Tool, ToolExecutionContext, ToolFailure, ToolOutput
from toolhost._model import host_reasons
from toolhost._model.invocations import InvocationState
from toolhost.testing import Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}
NOPE = "tool.not_found.nope"
#: The tools' timeout_s, and how long each body holds the loop: well past it.
TIMEOUT_S = 0.5
HELD_S = 1.0

Body = Callable[[Mapping[str, Any], ToolExecutionContext], Coroutine[Any, Any, ToolOutput]]


async def blocks_then_returns(arguments: Mapping[str, Any],
                              context: ToolExecutionContext) -> ToolOutput:
    time.sleep(HELD_S)  # holds the loop: no timer fires meanwhile
    return ToolOutput(structured={"echo": "late"}, content="late")


async def computes_then_returns(arguments: Mapping[str, Any],
                                context: ToolExecutionContext) -> ToolOutput:
    until = time.monotonic() + HELD_S
    while time.monotonic() < until:
        pass
    return ToolOutput(structured={"echo": "late"}, content="late")


async def awaits_then_blocks(arguments: Mapping[str, Any],
                             context: ToolExecutionContext) -> ToolOutput:
    await asyncio.sleep(0)
    time.sleep(HELD_S)
    return ToolOutput(structured={"echo": "late"}, content="late")


async def blocks_then_awaits(arguments: Mapping[str, Any],
                             context: ToolExecutionContext) -> ToolOutput:
    time.sleep(HELD_S)
    await asyncio.sleep(0.05)  # shorter than timeout_s: a timer armed here would not fire
    return ToolOutput(structured={"echo": "late"}, content="late")


async def blocks_then_fails(arguments: Mapping[str, Any],
                            context: ToolExecutionContext) -> ToolOutput:
    time.sleep(HELD_S)
    raise ToolFailure(NOPE)


async def in_time(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    await asyncio.sleep(0)
    return ToolOutput(structured={"echo": "ok"}, content="ok")


BODIES: dict[str, Body] = {
    "fx.blocks": blocks_then_returns,
    "fx.computes": computes_then_returns,
    "fx.awaits_then_blocks": awaits_then_blocks,
    "fx.blocks_then_awaits": blocks_then_awaits,
    "fx.blocks_then_fails": blocks_then_fails,
    "fx.in_time": in_time,
}


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    tools = [Tool(make_spec(name=name, input_schema=SCHEMA, output_schema=OUT,
                            timeout_s=TIMEOUT_S, idempotency=Idempotency.READ_ONLY),
                  call=body, reasons=(Reason(NOPE, "Nothing there."),))
             for name, body in BODIES.items()]
    with Harness.over({"fx-dist": make_plugin(tools=tools)}, data_dir=tmp_path / "data") as h:
        yield h


@pytest.mark.parametrize("name", ["fx.blocks", "fx.computes", "fx.awaits_then_blocks",
                                  "fx.blocks_then_awaits", "fx.blocks_then_fails"])
def test_an_async_body_holding_the_loop_past_its_timeout_ends_as_its_timeout(
    harness: Harness, name: str,
) -> None:
    outcome = harness.invoke(name)
    assert outcome.failure is not None, outcome.content
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (
        host_reasons.DEADLINE, True)
    assert outcome.content == host_reasons.MESSAGES[host_reasons.DEADLINE]
    row = harness.record(str(outcome.invocation_id))
    assert (row.state, row.reason_code) == (InvocationState.FAILED, host_reasons.DEADLINE)
    assert row.failure_detail == {"timeout_s": TIMEOUT_S}
    assert harness.invoke("fx.in_time").status.value == "succeeded"  # and the host goes on


def test_one_holding_the_loop_past_its_runs_earlier_deadline_names_that_deadline(
    tmp_path: Path,
) -> None:
    tools = [Tool(make_spec(name="fx.blocks", input_schema=SCHEMA, output_schema=OUT,
                            timeout_s=30, idempotency=Idempotency.READ_ONLY),
                  call=blocks_then_returns)]
    with Harness.over({"fx-dist": make_plugin(tools=tools)}, data_dir=tmp_path / "run") as h:
        run = h.start_run(timeout_s=TIMEOUT_S)
        assert run.deadline_at is not None
        outcome = h.call("fx.blocks", {}, run=run)
        assert outcome.failure is not None, outcome.content
        assert (outcome.failure.reason_code, outcome.failure.retryable) == (
            host_reasons.DEADLINE, False)
        row = h.record(str(outcome.invocation_id))
        assert row.failure_detail == {"run_deadline": run.deadline_at.isoformat()}
        h.end_run(run)


def test_an_async_body_that_returns_in_time_still_succeeds(harness: Harness) -> None:
    outcome = harness.invoke("fx.in_time")
    assert (outcome.status.value, outcome.content) == ("succeeded", "ok")


def quick_sync_write(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    time.sleep(0.2)  # on its worker thread: done well within its deadline
    return ToolOutput(structured={"echo": "done"}, content="done")


async def hogs_the_loop(arguments: Mapping[str, Any], context: ToolExecutionContext,
                        ) -> ToolOutput:
    await asyncio.sleep(0.1)  # lets the other call's worker start first
    time.sleep(3 * TIMEOUT_S)
    return ToolOutput(structured={"echo": "hog"}, content="hog")


def test_a_sync_body_done_in_time_is_not_late_because_another_body_held_the_loop(
    tmp_path: Path,
) -> None:
    # The late rule is for the body that held the loop: a sync body finished on its worker,
    # and its result only waited for the loop another call's body held.
    from toolhost._pipeline.execution import run_sync

    tools = [Tool(make_spec(name="fx.quick", input_schema=SCHEMA, output_schema=OUT,
                            timeout_s=2 * TIMEOUT_S, idempotency=Idempotency.READ_ONLY),
                  call=quick_sync_write),
             Tool(make_spec(name="fx.hog", input_schema=SCHEMA, output_schema=OUT,
                            timeout_s=30, idempotency=Idempotency.READ_ONLY),
                  call=hogs_the_loop)]
    with Harness.over({"fx-dist": make_plugin(tools=tools)}, data_dir=tmp_path / "two") as h:
        quick_run, hog_run = h.start_run(), h.start_run()

        async def both() -> list[Any]:
            quick = asyncio.ensure_future(h.host.invoke("fx.quick", {}, run=quick_run))
            await asyncio.sleep(0.02)
            hog = asyncio.ensure_future(h.host.invoke("fx.hog", {}, run=hog_run))
            return list(await asyncio.gather(quick, hog))

        quick, hog = run_sync(both())
        assert (quick.status.value, quick.content) == ("succeeded", "done"), quick.failure
        assert hog.status.value == "succeeded"  # its own 30 s were never passed
        h.end_run(quick_run)
        h.end_run(hog_run)
