"""demo.external_write: records what would have been written somewhere, and sends nothing.

It exists to be paused, approved and denied. EXTERNAL_WRITE puts it in the one row of the policy
matrix that requires approval at every risk, so under the default policy every call pauses.

The destination is a string recorded verbatim: never resolved, parsed, connected to or checked,
because a URL parser reachable by a model that was just told this operation needs approval is a
strange thing to build for a fixture. The record is the structured result, which pipeline
step 13 persists on the call's tool_invocations row beside its arguments (where the content
is); there is no side table, and the body writes nothing anywhere.

The body has no failures: it reaches no network, filesystem, clock or parser. What can stop a
call is upstream of it (schema validation at step 4, policy at steps 5-7), and a denial is a
PolicyDecision, not a ToolResult.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolhost import (
    Idempotency,
    Kind,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    ToolExecutionContext,
    ToolOutput,
    ToolSpec,
    Trust,
    sha256_checksum,
)

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "external_write"]

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "destination": {"type": "string", "maxLength": 256},
        "content": {"type": "string", "maxLength": 4096},
    },
    "required": ["destination", "content"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # A constant, not a status: there is no second value, and no failure branch.
        "recorded": {"const": True},
        "destination": {"type": "string"},
        "byte_count": {"type": "integer"},
        "checksum": {"type": "string"},
    },
    "required": ["recorded", "destination", "byte_count", "checksum"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Demonstrates an external write: every call needs an operator's approval before it runs. "
    "It records what would have been written and sends nothing anywhere. destination (at most "
    "256 characters) is recorded exactly as given and is never parsed or contacted; content "
    "is at most 4096 characters. Returns recorded (always true), destination, byte_count (of "
    "content in UTF-8) and checksum (sha256: followed by the lowercase hex SHA-256 of "
    "content in UTF-8)."
)

SPEC = ToolSpec(
    name="demo.external_write",
    version="1.0.0",
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    kind=Kind.CAPABILITY,
    source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS,
    server_id=None,
    side_effect=SideEffect.EXTERNAL_WRITE,
    risk=Risk.HIGH,
    idempotency=Idempotency.NON_IDEMPOTENT,
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("demo.write",),
    timeout_s=10,
    maximum_output_bytes=4096,
    allow_parallel=False,
    deprecated=False,
)


def external_write(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """The tool body: hash the content and return the record. Nothing else happens."""
    del context  # it touches nothing the context could give it
    destination = arguments["destination"]
    data = arguments["content"].encode("utf-8")
    checksum = sha256_checksum(data)
    noun = "byte" if len(data) == 1 else "bytes"
    return ToolOutput(
        # No timestamp: the invocation row carries the timing. No content: the row's
        # arguments hold it, and the model already has it.
        structured={
            "recorded": True,
            "destination": destination,
            "byte_count": len(data),
            "checksum": checksum,
        },
        content=(f"Recorded {len(data)} {noun} for {json.dumps(destination, ensure_ascii=False)}"
                 f" ({checksum}). Nothing was sent: this demo tool only records."),
    )

