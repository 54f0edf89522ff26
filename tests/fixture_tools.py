"""A fixture plugin exercising every pipeline step, before the demo plugin exists.

Every body needs no host service, so each is passed as ``call=``.

``fx.write`` is classified like demo.external_write (EXTERNAL_WRITE / HIGH / NON_IDEMPOTENT),
so approval flows run against it. Executions are appended to ``EXECUTIONS`` (and, when the
environment names one, to a file) so a test can count them across threads and processes.

What a sleeping tool does after the pipeline stopped waiting for it is observable without a
race: ``fx.asleep`` records its cancellation in ``LATE`` (the pipeline awaits a cancelled async
tool, bounded, so the entry lands before that invoke returns), and ``fx.sleep`` sets its run's
``finished(run_id)`` event when its abandoned thread wakes, so a test waits on that, bounded,
instead of sleeping and hoping the thread was faster.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from conftest import make_plugin, make_spec

from toolhost import (
    Idempotency,
    Risk,
    SideEffect,
    Tool,
    ToolOutput,
    Trust,
    WorkspaceEscape,
    WorkspaceUnavailable,
)

EXECUTIONS: list[Mapping[str, Any]] = []
_lock = threading.Lock()
#: fx.asleep's cancellations, in order.
LATE: list[str] = []
_finished: dict[str, threading.Event] = {}


def finished(run_id: str) -> threading.Event:
    """Set when an ``fx.sleep`` body of this run has slept its time. One event per run: a
    thread another test abandoned wakes into its own run's event, never into this one's."""
    with _lock:
        return _finished.setdefault(run_id, threading.Event())

STRING = {"type": "string", "maxLength": 100000}


def schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": [], "additionalProperties": False}


OUT = schema(echo={"type": "string"})


def _write(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    with _lock:
        EXECUTIONS.append(dict(arguments))
    log = os.environ.get("FX_EXECUTION_LOG")
    if log:
        with open(log, "a") as f:
            f.write(arguments["destination"] + "\n")
    return ToolOutput(structured={"echo": arguments["destination"]}, content="recorded")


def _sleep(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    time.sleep(arguments["seconds"])
    finished(context.run_id).set()
    return ToolOutput(structured={"echo": "late"}, content="late")


async def _asleep(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    try:
        await asyncio.sleep(arguments["seconds"])
    except asyncio.CancelledError:
        LATE.append("cancelled")
        raise
    return ToolOutput(structured={"echo": "late"}, content="late")


def _big(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    text = arguments["unit"] * arguments["count"]
    return ToolOutput(structured={"echo": "x"}, content=text)


def _escape(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    raise WorkspaceEscape("absolute path")


def _no_space(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    raise WorkspaceUnavailable("no space is left for the workspace")


def _echo(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    return ToolOutput(structured={"echo": arguments.get("x", "")}, content=arguments.get("x", ""))


def tools() -> list[Tool]:
    seconds = {"type": "number", "minimum": 0, "maximum": 60}
    return [
        # 30 s: a thousand concurrent calls (test_pipeline_steps) wait their turn for one of
        # the 64 workers, and on a loaded CI machine one waited past the default 2 s.
        Tool(spec=make_spec(name="fx.echo", input_schema=schema(x=STRING), output_schema=OUT,
                            timeout_s=30),
             call=_echo),
        Tool(spec=make_spec(
            name="fx.write", input_schema={**schema(destination={"type": "string"}),
                                           "required": ["destination"]},
            output_schema=OUT, side_effect=SideEffect.EXTERNAL_WRITE, risk=Risk.HIGH,
            idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False,
            required_scopes=("fx.write",)), call=_write),
        Tool(spec=make_spec(name="fx.sleep", input_schema=schema(seconds=seconds),
                            output_schema=OUT, timeout_s=0.2), call=_sleep),
        Tool(spec=make_spec(name="fx.sleep_writer", input_schema=schema(seconds=seconds),
                            output_schema=OUT, timeout_s=0.2, side_effect=SideEffect.WORKSPACE_WRITE,
                            idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False),
             call=_sleep),
        Tool(spec=make_spec(name="fx.asleep", input_schema=schema(seconds=seconds),
                            output_schema=OUT, timeout_s=5), call=_asleep),
        Tool(spec=make_spec(name="fx.big", input_schema=schema(
            unit={"type": "string", "maxLength": 4}, count={"type": "integer"}),
            output_schema=OUT, maximum_output_bytes=1000), call=_big),
        Tool(spec=make_spec(name="fx.escape", input_schema=schema(), output_schema=OUT),
             call=_escape),
        Tool(spec=make_spec(name="fx.no_space", input_schema=schema(), output_schema=OUT),
             call=_no_space),
        Tool(spec=make_spec(name="fx.scoped", input_schema=schema(x=STRING), output_schema=OUT,
                            required_scopes=("fx.read",)), call=_echo),
        Tool(spec=make_spec(name="fx.hidden", input_schema=schema(x=STRING), output_schema=OUT),
             call=_echo, default_enabled=False),
        Tool(spec=make_spec(name="fx.untrusted", input_schema=schema(x=STRING), output_schema=OUT,
                            output_trust=Trust.EXTERNAL_UNTRUSTED), call=_echo),
    ]


PLUGIN = make_plugin(domains=["fx"], tools=tools())
