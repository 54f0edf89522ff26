"""greet.hello: the smallest plugin that passes toolhost-conformance, written as a typed
function (docs/plugins.md). Its schema comes from the signature and the result's class, its
description from the docstring; every safety field is stated, none inferred."""

from typing import Annotated

import attrs

from toolhost import (
    Domain,
    Idempotency,
    MaxLen,
    Reason,
    Risk,
    SideEffect,
    Tool,
    ToolFailure,
    Trust,
    hookimpl,
    tool,
)

# Every reason code the body may raise, with its message, in the plugin's one table. Static:
# the code carries the diagnosis, the message the remedy, never the input.
BLANK_NAME = "tool.invalid_arguments.blank_name"
MESSAGES = {BLANK_NAME: "The name is blank. Provide a name with at least one letter."}


@attrs.frozen
class Greeting:
    """The result: a closed object ``{"greeting": ...}``; its text is what the model reads."""

    greeting: str

    def __str__(self) -> str:
        return self.greeting


@tool(
    "greet.hello", "1.0.0",
    side_effect=SideEffect.NONE, risk=Risk.LOW, idempotency=Idempotency.READ_ONLY,
    output_trust=Trust.INTERNAL_TOOL, required_scopes=(), timeout_s=2,
    maximum_output_bytes=4096, reasons=Reason.from_table(MESSAGES, BLANK_NAME),
)
def hello(name: Annotated[str, MaxLen(64)]) -> Greeting:
    """Greet someone by name."""
    # The host validated the arguments against the schema: name is a string of at most 64.
    if not name.strip():
        raise ToolFailure(BLANK_NAME, detail={"length": len(name)})
    return Greeting(f"Hello, {name.strip()}!")


@hookimpl
def toolhost_domains() -> list[Domain]:
    return [Domain("greet", "Greetings.")]


@hookimpl
def toolhost_tools() -> list[Tool]:
    return [hello]
