"""DOMAIN.echo: a complete minimal tool; replace it with the plugin's own.

The two hooks are the whole contract: ``toolhost_domains`` names the namespace this
distribution owns, ``toolhost_tools`` returns its tools. Import only from ``toolhost``.
"""

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

# Every reason code the body may raise, declared once, on its tool. Static: the code carries
# the diagnosis, the message the remedy, never the input.
BLANK_TEXT = Reason(
    "tool.invalid_arguments.blank_text",
    "The text is blank. Provide text with at least one visible character.",
)

SPEC = ToolSpec(
    name="DOMAIN.echo",
    version="1.0.0",
    description="Return the given text, trimmed.",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 256}},
        "required": ["text"],
        "additionalProperties": False,  # closed at every object level
    },
    output_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
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


def echo(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    # The host validated the arguments against input_schema: "text" is a string here.
    text = arguments["text"].strip()
    if not text:
        raise ToolFailure(BLANK_TEXT.code, detail={"length": len(arguments["text"])})
    return ToolOutput(structured={"text": text}, content=text)


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("DOMAIN", "Replace with one line on what this domain's tools do.")]


@hookimpl
def toolhost_tools(settings: Settings) -> list[Tool]:
    return [Tool(SPEC, call=echo, reasons=(BLANK_TEXT,))]
