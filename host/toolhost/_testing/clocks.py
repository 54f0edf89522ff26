"""Test clocks: FixedClock (the deterministic harness's) and ScriptedClock, and the harness's
instant."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable

__all__ = [
    "DEFAULT_INSTANT",
    "UTC",
    "ClockExhausted",
    "FixedClock",
    "ScriptedClock",
]

# The real clock lives in the determinism module, the one place allowed to read ambient time.

#: The instant the deterministic harness uses unless told otherwise.
DEFAULT_INSTANT = _dt.datetime(2026, 7, 25, 13, 3, 11, 482913, tzinfo=_dt.UTC)

UTC = _dt.UTC



def _as_utc(value: _dt.datetime) -> _dt.datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("a Clock needs aware datetimes; got a naive one")
    return value.astimezone(UTC)


class FixedClock:
    """Always the same instant: the deterministic harness's clock."""

    def __init__(self, at: _dt.datetime) -> None:
        self._at = _as_utc(at)

    def now(self) -> _dt.datetime:
        return self._at


class ClockExhausted(RuntimeError):
    """A ScriptedClock was asked for more instants than its script holds."""


class ScriptedClock:
    """Returns the scripted instants in order, then raises ClockExhausted.

    Running out is an error rather than a repeat of the last value, so a test that reads the
    clock more often than it planned fails loudly instead of passing on a stale instant.
    """

    def __init__(self, instants: Iterable[_dt.datetime]) -> None:
        self._instants = [_as_utc(i) for i in instants]
        self._next = 0

    def now(self) -> _dt.datetime:
        if self._next >= len(self._instants):
            raise ClockExhausted(f"scripted clock exhausted after {len(self._instants)} reads")
        value = self._instants[self._next]
        self._next += 1
        return value
