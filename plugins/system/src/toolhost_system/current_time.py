"""system.current_time: a pure function of Clock.now(), the timezone argument and the tz database.

It reads the injected Clock and nothing else, which is what makes it byte-stable under a
fixed clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from toolhost import (
    Idempotency,
    Kind,
    Reason,
    Risk,
    Services,
    SideEffect,
    Source,
    TargetKind,
    ToolCallable,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    ToolSpec,
    Trust,
)
from toolhost_system.timezones import resolve_timezone

__all__ = ["REASONS", "SPEC", "UNKNOWN_TIMEZONE", "build", "render"]

UNKNOWN_TIMEZONE = "tool.invalid_arguments.unknown_timezone"
#: The tool's only failure: the clock cannot fail, and the conversion cannot once the zone
#: resolves.
REASONS = (
    Reason(
        UNKNOWN_TIMEZONE,
        "Unknown timezone. Provide an IANA name such as UTC, America/New_York, or Europe/London.",
    ),
)

# English, not the process locale: the field is for the model, whose prompt is English.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

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


def _offset(local: dt.datetime) -> str:
    # Always numeric, never Z, so the string is byte-stable under a fixed clock.
    return local.isoformat(timespec="microseconds")[26:]


def render(now: dt.datetime, zone_name: str) -> dict[str, Any]:
    """The structured result for an aware UTC instant in an accepted zone."""
    zone = resolve_timezone(zone_name)
    if zone is None:
        raise ToolFailure(UNKNOWN_TIMEZONE, detail={"timezone": zone_name})
    local = now.astimezone(zone)
    iso = local.isoformat(timespec="microseconds")
    return {
        "iso8601": iso,
        "timezone": zone_name,
        "utc_offset": _offset(local),
        # Floored, in integer arithmetic: no float ever holds the epoch.
        "unix_seconds": (now - _EPOCH) // dt.timedelta(seconds=1),
        "weekday": _WEEKDAYS[local.weekday()],
    }


def build(services: Services) -> ToolCallable:
    """The body, over the injected Clock: the one time it reads."""
    clock = services.clock

    def current_time(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        # Step 4 applied the schema's default and checked the type: a string is here.
        zone_name: str = arguments["timezone"]
        result = render(clock.now(), zone_name)
        content = f"{result['iso8601']} ({result['timezone']}, {result['weekday']})"
        return ToolOutput(structured=result, content=content)

    return current_time
