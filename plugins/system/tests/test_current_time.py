"""system.current_time, every line of its section, on exact bytes."""

from __future__ import annotations

import datetime as dt
import json
from importlib import metadata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolhost import FixedClock, Outcome, Trust
from toolhost._host import Host
from toolhost.testing import DEFAULT_INSTANT, host_for
from toolhost_system import plugin
from toolhost_system.current_time import SPEC, UNKNOWN_TIMEZONE

UTC = dt.UTC
MESSAGE = "Unknown timezone. Provide an IANA name such as UTC, America/New_York, or Europe/London."


def host(at: dt.datetime = DEFAULT_INSTANT) -> Host:
    return host_for({"toolhost-system": plugin}, clock=FixedClock(at))


def call(arguments: dict[str, object], at: dt.datetime = DEFAULT_INSTANT):  # type: ignore[no-untyped-def]
    return host(at).invoke_sync("system.current_time", arguments)


def test_the_spec_example_bytes() -> None:
    outcome = call({"timezone": "America/New_York"})
    assert outcome.content == "2026-07-25T09:03:11.482913-04:00 (America/New_York, Saturday)"
    # The spec's representative result prints unix_seconds 1785157391, which is two days
    # (172800 s) after its own iso8601; the value here is computed from the instant itself.
    assert outcome.structured == {
        "iso8601": "2026-07-25T09:03:11.482913-04:00",
        "timezone": "America/New_York",
        "utc_offset": "-04:00",
        "unix_seconds": 1784984591,
        "weekday": "Saturday",
    }
    assert outcome.structured["unix_seconds"] == int(DEFAULT_INSTANT.timestamp())
    assert outcome.output_trust is Trust.INTERNAL_TOOL


def test_default_is_utc_with_a_numeric_offset_never_z() -> None:
    outcome = call({})
    assert outcome.content == "2026-07-25T13:03:11.482913+00:00 (UTC, Saturday)"
    assert outcome.structured is not None and outcome.structured["utc_offset"] == "+00:00"
    assert "Z" not in outcome.structured["iso8601"]


def test_microseconds_are_always_present() -> None:
    outcome = call({"timezone": "Asia/Kolkata"}, dt.datetime(2026, 1, 1, tzinfo=UTC))
    assert outcome.content == "2026-01-01T05:30:00.000000+05:30 (Asia/Kolkata, Thursday)"


def test_identical_bytes_across_two_invocations_under_a_fixed_clock() -> None:
    h = host()
    first = h.invoke_sync("system.current_time", {"timezone": "Europe/London"})
    second = h.invoke_sync("system.current_time", {"timezone": "Europe/London"})

    def result_bytes(outcome: Outcome) -> bytes:
        # The result, not the invocation: every invocation has its own id.
        return json.dumps([outcome.content, outcome.structured, outcome.output_trust.value],
                          sort_keys=True).encode()

    assert first.invocation_id != second.invocation_id
    assert result_bytes(first) == result_bytes(second)


@pytest.mark.parametrize("name", ["UTC", "America/New_York", "Etc/GMT+5", "Europe/London"])
def test_iana_names_are_accepted(name: str) -> None:
    outcome = call({"timezone": name})
    assert outcome.ok and outcome.structured and outcome.structured["timezone"] == name


def test_etc_gmt_plus_5_is_five_hours_behind() -> None:
    outcome = call({"timezone": "Etc/GMT+5"})
    assert outcome.structured and outcome.structured["utc_offset"] == "-05:00"


@pytest.mark.parametrize(
    "name",
    ["EST", "+05:30", "local", "localtime", "CET", "GMT", "EST5EDT", "Factory", "utc",
     "america/new_york", "", "America/Nowhere", "../etc/passwd", "/etc/localtime",
     "America/../UTC"],
)
def test_everything_else_is_unknown_timezone(name: str) -> None:
    outcome = call({"timezone": name})
    assert outcome.failure is not None
    assert outcome.failure.reason_code == UNKNOWN_TIMEZONE
    assert outcome.content == outcome.failure.message == MESSAGE
    assert outcome.failure.retryable is False
    assert outcome.failure.kind.value == "INVALID_ARGUMENTS"


def test_an_over_long_name_fails_schema_validation() -> None:
    outcome = call({"timezone": "A/" + "b" * 63})
    assert outcome.failure and outcome.failure.reason_code == "tool.invalid_arguments.schema"


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC), -1),
        (dt.datetime(1970, 1, 1, tzinfo=UTC), 0),
        (dt.datetime(1970, 1, 1, 0, 0, 0, 999999, tzinfo=UTC), 0),
    ],
)
def test_unix_seconds_is_floored(at: dt.datetime, expected: int) -> None:
    outcome = call({}, at)
    assert outcome.structured and outcome.structured["unix_seconds"] == expected


@given(st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1),
                    timezones=st.just(UTC)))
def test_fields_agree_with_each_other(at: dt.datetime) -> None:
    outcome = call({"timezone": "America/New_York"}, at)
    s = outcome.structured
    assert s is not None
    parsed = dt.datetime.fromisoformat(s["iso8601"])
    assert parsed == at
    assert s["iso8601"].endswith(s["utc_offset"])
    assert s["unix_seconds"] == (at - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(seconds=1)
    assert s["weekday"] == ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
                            "Sunday"][parsed.weekday()]
    assert outcome.content == f"{s['iso8601']} (America/New_York, {s['weekday']})"


def test_the_tool_reads_only_the_injected_clock() -> None:
    a = call({}, dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC))
    assert a.content == "2001-02-03T04:05:06.000000+00:00 (UTC, Saturday)"


def test_classification_matches_the_table() -> None:
    assert (SPEC.side_effect.value, SPEC.risk.value, SPEC.idempotency.value) == (
        "NONE", "LOW", "READ_ONLY")
    assert (SPEC.output_trust, SPEC.required_scopes, SPEC.timeout_s) == (Trust.INTERNAL_TOOL, (), 2)
    assert (SPEC.maximum_output_bytes, SPEC.allow_parallel, SPEC.deprecated) == (4096, True, False)
    assert (SPEC.kind.value, SPEC.source.value, SPEC.target_kind.value, SPEC.server_id) == (
        "CAPABILITY", "BUILTIN", "in_process", None)
    assert SPEC.version == "1.0.0"


def test_tzdata_is_a_declared_dependency() -> None:
    requires = metadata.requires("toolhost-system") or []
    assert any(r.split(";")[0].strip().startswith("tzdata") for r in requires)
