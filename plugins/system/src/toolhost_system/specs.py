"""system.current_time's registration: the typed tool and its one reason, without its body.

The plugin imports only this at load (``toolhost check`` reads specs, reasons and domains);
the body's module, with the tz database it reads, is imported at the tool's first call. The
schemas are derived from the signature and ``CurrentTime`` (``toolhost.tool``) and are the
seed's exactly: tests/test_first_party_catalog.py holds them byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import attrs

from toolhost import (
    Doc,
    Idempotency,
    MaxLen,
    Reason,
    Risk,
    Services,
    SideEffect,
    Trust,
    tool,
)

__all__ = ["CURRENT_TIME", "INPUT_SCHEMA", "MESSAGES", "OUTPUT_SCHEMA", "REASONS", "SPEC",
           "UNKNOWN_TIMEZONE", "CurrentTime"]

#: The tool's only failure: the clock cannot fail, and the conversion cannot once the zone
#: resolves.
UNKNOWN_TIMEZONE = "tool.invalid_arguments.unknown_timezone"
MESSAGES = {
    UNKNOWN_TIMEZONE:
    "Unknown timezone. Provide an IANA name such as UTC, America/New_York, or Europe/London.",
}
REASONS = Reason.from_table(MESSAGES, UNKNOWN_TIMEZONE)


@attrs.frozen
class CurrentTime:
    """The result; its text is what the model reads."""

    iso8601: str
    timezone: str
    utc_offset: str
    unix_seconds: int
    weekday: str

    def __str__(self) -> str:
        return f"{self.iso8601} ({self.timezone}, {self.weekday})"


@tool("system.current_time", "1.0.0", side_effect=SideEffect.NONE, risk=Risk.LOW,
      idempotency=Idempotency.READ_ONLY, output_trust=Trust.INTERNAL_TOOL, required_scopes=(),
      timeout_s=2, maximum_output_bytes=4096, reasons=REASONS)
def CURRENT_TIME(  # noqa: N802 - the decorator makes a Tool, named as a constant
    services: Services,
    timezone: Annotated[str, MaxLen(64), Doc("IANA name, e.g. UTC or America/New_York")] = "UTC",
) -> CurrentTime:
    """The current date and time in a timezone. timezone is an IANA name such as UTC,
    America/New_York or Europe/London (default UTC); abbreviations like EST and fixed offsets
    like +05:30 are not accepted. Returns iso8601 (RFC 3339 with microseconds and a numeric
    offset), the timezone, utc_offset, unix_seconds and the English weekday.
    """
    from toolhost_system.current_time import render  # the tz database, at the first call

    # The injected Clock is the one time the tool reads.
    return render(services.clock.now(), timezone)


SPEC = CURRENT_TIME.spec
INPUT_SCHEMA: Mapping[str, Any] = SPEC.input_schema
OUTPUT_SCHEMA: Mapping[str, Any] = SPEC.output_schema
