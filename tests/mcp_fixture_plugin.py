"""A fixture plugin for the MCP server tests, installed as a fake distribution (``fake-mcp``).

- ``fxw.external_write``: EXTERNAL_WRITE/HIGH, so every call pauses for approval; each run
  appends one line to the file the FXW_LOG setting names, so a test counts executions.
- ``fxw.slow``: WORKSPACE_WRITE/LOW (allowed, recorded as running before it runs); prints a
  stray line to stdout (which must land on stderr, never on the wire), appends ``started`` to
  FXW_LOG, then sleeps, so a test can disconnect mid-call.

The tests read this file's text and install it with ``installed.install_fake_plugin``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from toolhost import (
    Domain,
    Idempotency,
    Kind,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolOutput,
    ToolSpec,
    Trust,
    hookimpl,
)

WRITE_IN = {"type": "object", "properties": {"destination": {"type": "string", "maxLength": 64}},
            "required": ["destination"], "additionalProperties": False}
WRITE_OUT = {"type": "object", "properties": {"recorded": {"const": True},
                                              "destination": {"type": "string"}},
             "required": ["recorded", "destination"], "additionalProperties": False}
SLOW_IN = {"type": "object", "properties": {"seconds": {"type": "number", "maximum": 60}},
           "required": ["seconds"], "additionalProperties": False}
SLOW_OUT = {"type": "object", "properties": {"slept": {"type": "number"}}, "required": ["slept"],
            "additionalProperties": False}


def _spec(name: str, inp: Mapping[str, Any], out: Mapping[str, Any], **fields: Any) -> ToolSpec:
    base: dict[str, Any] = dict(
        name=name, version="1.0.0", description=f"Fixture {name}.", input_schema=inp,
        output_schema=out, kind=Kind.CAPABILITY, source=Source.BUILTIN,
        target_kind=TargetKind.IN_PROCESS, server_id=None, output_trust=Trust.INTERNAL_TOOL,
        timeout_s=60, maximum_output_bytes=4096, allow_parallel=False, deprecated=False,
    )
    base.update(fields)
    return ToolSpec(**base)


WRITE = _spec("fxw.external_write", WRITE_IN, WRITE_OUT, side_effect=SideEffect.EXTERNAL_WRITE,
              risk=Risk.HIGH, idempotency=Idempotency.NON_IDEMPOTENT,
              required_scopes=("fxw.write",))
SLOW = _spec("fxw.slow", SLOW_IN, SLOW_OUT, side_effect=SideEffect.WORKSPACE_WRITE,
             risk=Risk.LOW, idempotency=Idempotency.IDEMPOTENT, required_scopes=())


def _log(settings: Any, line: str) -> None:
    path = settings.get("FXW_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("fxw")]


@hookimpl
def toolhost_tools(settings: Any) -> list[Tool]:
    # Neither body needs a host service (they close over the settings), so each is a call=.
    def write(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        _log(settings, "wrote " + arguments["destination"])
        return ToolOutput(structured={"recorded": True, "destination": arguments["destination"]},
                          content="recorded " + arguments["destination"])

    def slow(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        print("stray output from fxw.slow", flush=True)  # a careless plugin
        _log(settings, "started")
        time.sleep(arguments["seconds"])
        return ToolOutput(structured={"slept": arguments["seconds"]}, content="slept")

    return [Tool(WRITE, call=write), Tool(SLOW, call=slow)]
