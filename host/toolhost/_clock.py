"""The Clock port.

``now()`` returns an aware datetime whose tzinfo is UTC: a naive one would smuggle the
process's local zone in through a port built to keep ambient state out. The contract suite
(``toolhost.testing.ClockContract``) asserts it for every implementation.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

# The real clock lives in the determinism module, the one place allowed to read ambient time.
from toolhost._determinism import SystemClock

__all__ = ["Clock", "ClockExhausted", "FixedClock", "ScriptedClock", "SystemClock"]

UTC = _dt.UTC


@runtime_checkable
class Clock(Protocol):
    def now(self) -> _dt.datetime:
        """The current instant, aware, in UTC."""
        ...


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
