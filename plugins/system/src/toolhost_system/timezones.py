"""Which timezone names system.current_time accepts, and their rules: IANA Area/Location
names, and UTC, from the declared ``tzdata`` package alone.

The tz database also carries abbreviation-style and legacy keys (EST, CET, EST5EDT, GMT) and,
from the system copy, ``localtime``. Abbreviations are ambiguous (IST names three zones), fixed
offsets are excluded for consistency of the accepted set, and the host's local zone is not
information anyone asked for, so a name must contain a ``/`` or be exactly ``UTC``.

The rules are the ``tzdata`` package's, never the machine's (``/usr/share/zoneinfo``, or
wherever ``PYTHONTZPATH`` points): ``zoneinfo.ZoneInfo(name)`` prefers the system's copy, so
the same instant and zone rendered differently on two machines whose databases differ (twelve
zones between Debian's 2025b and tzdata 2026f). Pinned to the package, the answer is a
function of the clock, the argument and the package's version.
"""

from __future__ import annotations

import functools
import importlib.resources
import zoneinfo

__all__ = ["resolve_timezone"]


@functools.cache
def _database() -> frozenset[str]:
    # Read once per process, on first use: the package's own list of its zones.
    names = importlib.resources.files("tzdata").joinpath("zones").read_text("utf-8")
    return frozenset(name for name in names.split() if name == "UTC" or "/" in name)


@functools.cache
def _zone(name: str) -> zoneinfo.ZoneInfo:
    # from_file, not ZoneInfo(name): the constructor searches the system's directories first.
    # Cached here, as ZoneInfo's own cache does not keep zones made from files.
    data = importlib.resources.files("tzdata.zoneinfo").joinpath(*name.split("/"))
    with data.open("rb") as tzif:
        return zoneinfo.ZoneInfo.from_file(tzif, key=name)


def resolve_timezone(name: str) -> zoneinfo.ZoneInfo | None:
    """The zone for an accepted name, or None for anything else."""
    if name not in _database():
        return None
    try:
        return _zone(name)
    except (OSError, ValueError):
        return None
