"""Which timezone names system.current_time accepts: IANA Area/Location names, and UTC.

The tz database also carries abbreviation-style and legacy keys (EST, CET, EST5EDT, GMT) and,
from the system copy, ``localtime``. Abbreviations are ambiguous (IST names three zones), fixed
offsets are excluded for consistency of the accepted set, and the host's local zone is not
information anyone asked for, so a name must contain a ``/`` or be exactly ``UTC``.
"""

from __future__ import annotations

import functools
import zoneinfo

__all__ = ["resolve_timezone"]


@functools.cache
def _database() -> frozenset[str]:
    # Read once per process, on first use: enumerating the database costs a directory walk.
    return frozenset(zoneinfo.available_timezones())


def resolve_timezone(name: str) -> zoneinfo.ZoneInfo | None:
    """The zone for an accepted name, or None for anything else."""
    if name != "UTC" and "/" not in name:
        return None
    if name not in _database():
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None
