"""system.current_time's body: a pure function of Clock.now(), the timezone argument and the tz
database.

It reads the injected Clock and nothing else, which is what makes it byte-stable under a
fixed clock. ``specs.CURRENT_TIME`` declares the tool and calls ``render`` here.
"""

from __future__ import annotations

import datetime as dt

from toolhost import ToolFailure
from toolhost_system.specs import REASONS, SPEC, UNKNOWN_TIMEZONE, CurrentTime
from toolhost_system.timezones import resolve_timezone

__all__ = ["REASONS", "SPEC", "UNKNOWN_TIMEZONE", "render"]

# English, not the process locale: the field is for the model, whose prompt is English.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _offset(local: dt.datetime) -> str:
    # Always numeric, never Z, so the string is byte-stable under a fixed clock.
    return local.isoformat(timespec="microseconds")[26:]


def render(now: dt.datetime, zone_name: str) -> CurrentTime:
    """The result for an aware UTC instant in an accepted zone."""
    zone = resolve_timezone(zone_name)
    if zone is None:
        raise ToolFailure(UNKNOWN_TIMEZONE, detail={"timezone": zone_name})
    local = now.astimezone(zone)
    return CurrentTime(
        iso8601=local.isoformat(timespec="microseconds"),
        timezone=zone_name,
        utc_offset=_offset(local),
        # Floored, in integer arithmetic: no float ever holds the epoch.
        unix_seconds=(now - _EPOCH) // dt.timedelta(seconds=1),
        weekday=_WEEKDAYS[local.weekday()],
    )
