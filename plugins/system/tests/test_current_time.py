"""system.current_time, every line of its section, on exact bytes.

Everything goes through the host's real pipeline with the test kit: ``toolhost_host`` (the
kit's fixture, a FixedClock at ``DEFAULT_INSTANT``) or, for another instant, a ``Harness``
over the plugin with a FixedClock of its own.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import json
import zoneinfo
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolhost import Outcome, Settings, Tool, ToolValidationError, Trust
from toolhost.testing import DEFAULT_INSTANT, FixedClock, Harness
from toolhost_system import plugin
from toolhost_system.current_time import REASONS, SPEC, UNKNOWN_TIMEZONE

UTC = dt.UTC
MESSAGE = "Unknown timezone. Provide an IANA name such as UTC, America/New_York, or Europe/London."
PLUGINS = {"toolhost-system": plugin}


def call(arguments: Any, at: dt.datetime) -> Outcome:
    """One call through the pipeline of a host whose clock stands at ``at``."""
    with Harness.over(PLUGINS, clock=FixedClock(at)) as harness:
        return harness.call("system.current_time", arguments)


def test_the_spec_example_bytes(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("system.current_time", timezone="America/New_York")
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


def test_default_is_utc_with_a_numeric_offset_never_z(toolhost_host: Harness) -> None:
    # The default is the schema's, applied by pipeline step 4: the body does not re-apply it.
    outcome = toolhost_host.invoke("system.current_time")
    assert outcome.content == "2026-07-25T13:03:11.482913+00:00 (UTC, Saturday)"
    assert outcome.structured is not None and outcome.structured["utc_offset"] == "+00:00"
    assert "Z" not in outcome.structured["iso8601"]


def test_microseconds_are_always_present() -> None:
    outcome = call({"timezone": "Asia/Kolkata"}, dt.datetime(2026, 1, 1, tzinfo=UTC))
    assert outcome.content == "2026-01-01T05:30:00.000000+05:30 (Asia/Kolkata, Thursday)"


def test_identical_bytes_across_two_invocations_under_a_fixed_clock(
    toolhost_host: Harness,
) -> None:
    first = toolhost_host.invoke("system.current_time", timezone="Europe/London")
    second = toolhost_host.invoke("system.current_time", timezone="Europe/London")

    def result_bytes(outcome: Outcome) -> bytes:
        # The result, not the invocation: every invocation has its own id.
        assert outcome.output_trust is not None
        return json.dumps([outcome.content, outcome.structured, outcome.output_trust.value],
                          sort_keys=True).encode()

    assert first.invocation_id != second.invocation_id
    assert result_bytes(first) == result_bytes(second)


@pytest.mark.parametrize("name", ["UTC", "America/New_York", "Etc/GMT+5", "Europe/London"])
def test_iana_names_are_accepted(toolhost_host: Harness, name: str) -> None:
    outcome = toolhost_host.invoke("system.current_time", timezone=name)
    assert outcome.ok and outcome.structured and outcome.structured["timezone"] == name


def test_etc_gmt_plus_5_is_five_hours_behind(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("system.current_time", timezone="Etc/GMT+5")
    assert outcome.structured and outcome.structured["utc_offset"] == "-05:00"


@pytest.mark.parametrize(
    "name",
    ["EST", "+05:30", "local", "localtime", "CET", "GMT", "EST5EDT", "Factory", "utc",
     "america/new_york", "", "America/Nowhere", "../etc/passwd", "/etc/localtime",
     "America/../UTC"],
)
def test_everything_else_is_unknown_timezone(toolhost_host: Harness, name: str) -> None:
    outcome = toolhost_host.invoke("system.current_time", timezone=name)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == UNKNOWN_TIMEZONE
    assert outcome.content == outcome.failure.message == MESSAGE
    assert outcome.failure.retryable is False
    assert outcome.failure.kind.value == "INVALID_ARGUMENTS"


def test_an_over_long_name_fails_schema_validation(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("system.current_time", timezone="A/" + "b" * 63)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == ToolValidationError.REASON_CODE


@pytest.mark.parametrize(
    "arguments",
    [{"timezone": 17}, {"timezone": None}, {"timezone": ["UTC"]}, {"timezone": {"name": "UTC"}},
     {"tz": "UTC"}, ["UTC"], "UTC"],
    ids=["int", "null", "list", "object", "unknown-property", "array", "string"],
)
def test_a_non_string_timezone_is_refused_by_the_schema(
    toolhost_host: Harness, arguments: Any
) -> None:
    # The body no longer re-checks the type: step 4 refuses it with the host's one
    # validation failure before the tool runs.
    outcome = toolhost_host.call("system.current_time", arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == ToolValidationError.REASON_CODE
    assert outcome.failure.retryable is False
    assert outcome.structured is None


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


def test_the_body_reads_the_clock_it_was_built_with(toolhost_host: Harness) -> None:
    # Called directly, as the host builds it (build over the host's Services): no pipeline,
    # so the arguments are what step 4 would hand it, default applied.
    output = toolhost_host.run_body("system.current_time", {"timezone": "America/New_York"})
    assert output.content == "2026-07-25T09:03:11.482913-04:00 (America/New_York, Saturday)"
    assert toolhost_host.services("toolhost-system").clock.now() == DEFAULT_INSTANT


def test_the_row_records_the_applied_default(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("system.current_time")
    assert outcome.invocation_id is not None
    row = toolhost_host.record(outcome.invocation_id)
    assert (row.tool_name, row.tool_version) == ("system.current_time", "1.0.0")
    assert row.arguments == {"timezone": "UTC"}  # step 4's default, what the body was given
    assert row.result_structured == outcome.structured


def test_classification_matches_the_table() -> None:
    assert (SPEC.side_effect.value, SPEC.risk.value, SPEC.idempotency.value) == (
        "NONE", "LOW", "READ_ONLY")
    assert (SPEC.output_trust, SPEC.required_scopes, SPEC.timeout_s) == (Trust.INTERNAL_TOOL, (), 2)
    assert (SPEC.maximum_output_bytes, SPEC.allow_parallel, SPEC.deprecated) == (4096, True, False)
    assert (SPEC.kind.value, SPEC.source.value, SPEC.target_kind.value, SPEC.server_id) == (
        "CAPABILITY", "BUILTIN", "in_process", None)
    assert SPEC.version == "1.0.0"


def test_the_rules_are_the_tzdata_packages_not_the_machines(tmp_path: Path) -> None:
    """``zoneinfo.ZoneInfo(name)`` reads the machine's copy first (or ``PYTHONTZPATH``'s): a
    machine whose America/Vancouver says UTC gave +00:00 here, and two real machines whose
    databases are of different years give different bytes for twelve zones."""
    system = tmp_path / "zoneinfo"
    (system / "America").mkdir(parents=True)
    (system / "America" / "Vancouver").write_bytes(
        importlib.resources.files("tzdata.zoneinfo").joinpath("UTC").read_bytes())
    zoneinfo.reset_tzpath(to=[str(system)])
    zoneinfo.ZoneInfo.clear_cache()
    try:
        outcome = call({"timezone": "America/Vancouver"}, dt.datetime(2026, 1, 15, 12, tzinfo=UTC))
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()
    assert outcome.structured is not None
    assert outcome.structured["utc_offset"] == "-08:00"


def test_tzdata_is_a_declared_dependency() -> None:
    requires = metadata.requires("toolhost-system") or []
    assert any(r.split(";")[0].strip().startswith("tzdata") for r in requires)


def test_the_two_hooks() -> None:
    assert [d.name for d in plugin.toolhost_domains()] == ["system"]
    (registered,) = plugin.toolhost_tools(Settings())
    assert isinstance(registered, Tool)
    assert registered.spec is SPEC
    # build, not call: the body closes over the host's injected Clock, and its module (with
    # the tz database) is imported only then, not at registration.
    assert registered.call is None and callable(registered.build)
    assert registered.reasons == REASONS
    assert registered.reason_codes == (UNKNOWN_TIMEZONE,)
    assert {r.code: r.message for r in registered.reasons} == {UNKNOWN_TIMEZONE: MESSAGE}
    assert registered.default_enabled is True
    assert plugin.toolhost_tools(Settings(env={"AGENT_PEOPLE_ENABLED": "1"})) == [registered]


def test_there_is_no_messages_hook() -> None:
    hooks = sorted(name for name, value in vars(plugin).items()
                   if hasattr(value, "toolhost_impl"))
    assert hooks == ["toolhost_domains", "toolhost_tools"]
    assert not hasattr(plugin, "toolhost_messages")


def test_entry_point() -> None:
    (entry,) = [e for e in metadata.entry_points(group="toolhost.plugins")
                if e.dist is not None and e.dist.name == "toolhost-system"]
    assert (entry.name, entry.value) == ("system", "toolhost_system.plugin")
