"""Shared fixtures for the host's own tests: spec and plugin factories."""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from toolhost import (
    Domain,
    Idempotency,
    Kind,
    Reason,
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

CLOSED_IN = {
    "type": "object",
    "properties": {"x": {"type": "string", "maxLength": 8, "default": "d"}},
    "required": [],
    "additionalProperties": False,
}
CLOSED_OUT = {
    "type": "object",
    "properties": {"echo": {"type": "string"}},
    "required": ["echo"],
    "additionalProperties": False,
}


def make_spec(**overrides: Any) -> ToolSpec:
    fields: dict[str, Any] = dict(
        name="fx.echo",
        version="1.0.0",
        description="Echo x back.",
        input_schema=CLOSED_IN,
        output_schema=CLOSED_OUT,
        kind=Kind.CAPABILITY,
        source=Source.BUILTIN,
        target_kind=TargetKind.IN_PROCESS,
        server_id=None,
        side_effect=SideEffect.NONE,
        risk=Risk.LOW,
        idempotency=Idempotency.READ_ONLY,
        output_trust=Trust.INTERNAL_TOOL,
        required_scopes=(),
        timeout_s=2,
        maximum_output_bytes=4096,
        allow_parallel=True,
        deprecated=False,
    )
    fields.update(overrides)
    return ToolSpec(**fields)


def echo_build(services: Any) -> Callable[..., ToolOutput]:
    def echo(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])

    return echo


def make_tool(spec: ToolSpec | None = None, build: Callable[..., Any] | None = echo_build,
              reasons: Sequence[Reason] = (), *, call: Callable[..., Any] | None = None) -> Tool:
    """A Tool over ``spec`` (default: fx.echo). Pass ``call=`` for a body that needs nothing
    (``build`` is then left out unless given explicitly)."""
    if call is not None and build is echo_build:
        build = None
    return Tool(spec or make_spec(), call=call, build=build, reasons=tuple(reasons))


def make_plugin(domains: Sequence[str] = ("fx",), tools: Sequence[Tool] = ()) -> object:
    """A plugin object with the two hookimpls returning exactly what it is given."""

    @hookimpl
    def toolhost_domains() -> list[Domain]:
        return [Domain(d) for d in domains]

    @hookimpl
    def toolhost_tools(settings: Any) -> list[Tool]:
        return list(tools)

    return types.SimpleNamespace(
        toolhost_domains=toolhost_domains,
        toolhost_tools=toolhost_tools,
    )


@pytest.fixture
def spec() -> Callable[..., ToolSpec]:
    return make_spec


def evolve(spec: ToolSpec, **changes: Any) -> ToolSpec:
    return attrs.evolve(spec, **changes)


def nothing_left(workspaces: Path) -> bool:
    """No run's workspace is left under ``workspaces``: only the host's own entries (its
    lock, and the empty trash and detached folders)."""
    leftovers = [p.name for p in workspaces.iterdir() if not p.name.startswith(".")]
    emptied = all(not any((workspaces / d).iterdir())
                  for d in (".trash", ".detached") if (workspaces / d).exists())
    return not leftovers and emptied
