"""system.current_time: a pure function of Clock.now(), the timezone argument and the tz database.

It reads the injected Clock and nothing else, which is what makes it byte-stable under a
fixed clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from toolhost import Services, ToolCallable, ToolExecutionContext, ToolFailure, ToolOutput
from toolhost_system.specs import REASONS, SPEC, UNKNOWN_TIMEZONE
from toolhost_system.timezones import resolve_timezone

__all__ = ["REASONS", "SPEC", "UNKNOWN_TIMEZONE", "build", "render"]

# English, not the process locale: the field is for the model, whose prompt is English.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


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
