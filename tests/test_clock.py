"""The Clock port's contract: now() is aware and UTC, for every implementation."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from toolhost._adapters.system_clock import SystemClock
from toolhost._ports.clock import Clock
from toolhost._testing.clocks import ClockExhausted, FixedClock, ScriptedClock
from toolhost.testing import DEFAULT_INSTANT, ClockContract

NEW_YORK = zoneinfo.ZoneInfo("America/New_York")


class TestSystemClock(ClockContract):
    def make_clock(self) -> Clock:
        return SystemClock()


class TestFixedClock(ClockContract):
    def make_clock(self) -> Clock:
        return FixedClock(DEFAULT_INSTANT.astimezone(NEW_YORK))


class TestScriptedClock(ClockContract):
    def make_clock(self) -> Clock:
        return ScriptedClock([DEFAULT_INSTANT.astimezone(NEW_YORK)])


def test_fixed_clock_converts_to_utc_and_never_moves() -> None:
    clock = FixedClock(DEFAULT_INSTANT.astimezone(NEW_YORK))
    assert clock.now() == clock.now() == DEFAULT_INSTANT
    assert clock.now().tzinfo is dt.UTC


def test_scripted_clock_returns_its_script_then_fails_loudly() -> None:
    later = DEFAULT_INSTANT + dt.timedelta(seconds=1)
    clock = ScriptedClock([DEFAULT_INSTANT, later])
    assert [clock.now(), clock.now()] == [DEFAULT_INSTANT, later]
    with pytest.raises(ClockExhausted):
        clock.now()


@pytest.mark.parametrize("make", [FixedClock, lambda at: ScriptedClock([at])])
def test_naive_instants_are_refused(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="aware"):
        make(dt.datetime(2026, 1, 1))


def test_the_contract_catches_a_naive_clock() -> None:
    class Naive:
        def now(self) -> dt.datetime:
            return dt.datetime(2026, 1, 1)

    class Check(ClockContract):
        def make_clock(self) -> Clock:
            return Naive()

    with pytest.raises(AssertionError):
        Check().test_now_is_aware()
