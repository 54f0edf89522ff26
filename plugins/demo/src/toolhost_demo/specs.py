"""demo.external_write's registration: its spec, without its body.

The plugin imports only this at load (``toolhost check`` reads specs and domains); the body,
with the digest it computes, is imported when the host first builds the tool.
"""

from __future__ import annotations

from typing import Any

from toolhost import Idempotency, Kind, Risk, SideEffect, Source, TargetKind, ToolSpec, Trust

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC"]

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
