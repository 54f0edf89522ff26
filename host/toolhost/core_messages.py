"""The host's own reason codes: failures the pipeline raises rather than a tool.

Registered as a plugin of the ``toolhost`` distribution through the same hook every domain
plugin uses, so there is one message table and one rule for it.
"""

from __future__ import annotations

from toolhost.hookspecs import hookimpl

UNKNOWN_TOOL = "tool.invalid_arguments.unknown_tool"
UNKNOWN_VERSION = "tool.invalid_arguments.unknown_version"
INVALID_SCHEMA = "tool.invalid_arguments.schema"  # ToolValidationError.REASON_CODE
INTERNAL_UNEXPECTED = "tool.internal.unexpected"
INTERNAL_UNDECLARED = "tool.internal.undeclared_reason_code"
OUTPUT_SCHEMA = "tool.output_invalid.schema"

MESSAGES = {
    UNKNOWN_TOOL: "Unknown tool. Call one of the tools you were given.",
    UNKNOWN_VERSION: "That version of the tool is not registered. Omit the version to use the latest.",
    INVALID_SCHEMA: "The arguments do not match the tool's input schema.",
    INTERNAL_UNEXPECTED: "The tool failed unexpectedly.",
    INTERNAL_UNDECLARED: "The tool failed unexpectedly.",
    OUTPUT_SCHEMA: "The tool returned output that does not match its output schema.",
}


@hookimpl
def toolhost_messages() -> dict[str, str]:
    return dict(MESSAGES)
