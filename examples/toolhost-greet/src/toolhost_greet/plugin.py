"""greet.hello: the smallest plugin that passes toolhost-conformance."""

from collections.abc import Mapping
from typing import Any

from toolhost import (
    Domain,
    Idempotency,
    Kind,
    Reason,
    Risk,
    Settings,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    ToolSpec,
    Trust,
    hookimpl,
)

# Declared once, on the tool that raises it. Static: the code carries the diagnosis, the
# message the remedy, never the input.
BLANK_NAME = Reason(
    "tool.invalid_arguments.blank_name",
    "The name is blank. Provide a name with at least one letter.",
)

SPEC = ToolSpec(
    name="greet.hello",
    version="1.0.0",
    description="Greet someone by name.",
    input_schema={
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 64}},
        "required": ["name"],
        "additionalProperties": False,  # closed at every object level
    },
    output_schema={
        "type": "object",
        "properties": {"greeting": {"type": "string"}},
        "required": ["greeting"],
        "additionalProperties": False,
    },
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
    allow_parallel=True,  # only READ_ONLY tools may run in parallel
    deprecated=False,
)


def hello(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    # The host validated the arguments against input_schema: "name" is a string here.
    name = arguments["name"].strip()
    if not name:
        raise ToolFailure(BLANK_NAME.code, detail={"length": len(arguments["name"])})
    return ToolOutput(structured={"greeting": f"Hello, {name}!"}, content=f"Hello, {name}!")


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("greet", "Greetings.")]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    return [Tool(SPEC, call=hello, reasons=(BLANK_NAME,))]
