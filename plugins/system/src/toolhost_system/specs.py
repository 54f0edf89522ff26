"""system.current_time's registration: its spec and its one reason, without its body.

The plugin imports only this at load (``toolhost check`` reads specs, reasons and domains);
the body, with the tz database it reads, is imported when the host first builds the tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolhost import (
    Idempotency,
    Kind,
    Reason,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    ToolSpec,
    Trust,
)

__all__ = ["INPUT_SCHEMA", "OUTPUT_SCHEMA", "REASONS", "SPEC", "UNKNOWN_TIMEZONE"]

UNKNOWN_TIMEZONE = "tool.invalid_arguments.unknown_timezone"
#: The tool's only failure: the clock cannot fail, and the conversion cannot once the zone
#: resolves.
REASONS = (
    Reason(
        UNKNOWN_TIMEZONE,
        "Unknown timezone. Provide an IANA name such as UTC, America/New_York, or Europe/London.",
    ),
)

INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": "string",
            "maxLength": 64,
            "default": "UTC",
            "description": "IANA name, e.g. UTC or America/New_York",
        }
    },
    "required": [],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "iso8601": {"type": "string"},
        "timezone": {"type": "string"},
        "utc_offset": {"type": "string"},
        "unix_seconds": {"type": "integer"},
        "weekday": {"type": "string"},
    },
    "required": ["iso8601", "timezone", "utc_offset", "unix_seconds", "weekday"],
    "additionalProperties": False,
}

SPEC = ToolSpec(
    name="system.current_time",
    version="1.0.0",
    description=(
        "The current date and time in a timezone. timezone is an IANA name such as UTC, "
        "America/New_York or Europe/London (default UTC); abbreviations like EST and fixed "
        "offsets like +05:30 are not accepted. Returns iso8601 (RFC 3339 with microseconds and "
        "a numeric offset), the timezone, utc_offset, unix_seconds and the English weekday."
    ),
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
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
