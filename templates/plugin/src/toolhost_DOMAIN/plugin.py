"""DOMAIN.echo, a complete tool: the schema comes from the signature (see docs/plugins.md)."""

from typing import Annotated

import toolhost
from toolhost import Domain, Idempotency, MaxLen, Reason, Risk, SideEffect, Trust, hookimpl, tool

BLANK = "tool.invalid_arguments.blank_text"
MESSAGES = {BLANK: "The text is blank. Provide text with at least one visible character."}


@tool("DOMAIN.echo", "1.0.0", side_effect=SideEffect.NONE, risk=Risk.LOW,
      idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL, required_scopes=(),
      timeout_s=2, maximum_output_bytes=4096, reasons=Reason.from_table(MESSAGES, BLANK))
def echo(text: Annotated[str, MaxLen(256)]) -> str:
    """Return the given text, trimmed."""
    if not text.strip():
        raise toolhost.ToolFailure(BLANK, detail={"length": len(text)})
    return text.strip()


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("DOMAIN", "Replace with one line on what this domain's tools do.")]


@hookimpl
def toolhost_tools() -> list[toolhost.Tool]:
    return [echo]
