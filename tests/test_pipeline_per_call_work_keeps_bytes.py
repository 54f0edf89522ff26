"""Work the pipeline did on every call and now does once (per tool, per policy cell, per
record's times) gives exactly what the per-call form gave (issue #27): the argument digest
from a tool's constant tail, a row's times each encoded once, a policy cell's decision kept,
an outcome's trust looked up, a plain ``async def`` body known by its code's flag, and a
call's logger at the two levels it writes most."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import inspect
import io
import json
from collections.abc import Mapping
from typing import Any

import pytest
import structlog
from conftest import make_plugin, make_spec

from toolhost import Idempotency, Tool, ToolExecutionContext, ToolOutput
from toolhost._model.convert import to_row
from toolhost._model.digest import argument_digest, canonical_json, sha256_digest
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.runs import CancellationEvent
from toolhost._model.spec import Risk, SideEffect, Trust
from toolhost._pipeline import execution
from toolhost._pipeline.log import configure_logging, get_logger
from toolhost._pipeline.policy import Policy, PolicyAction, PolicyDecision
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT, Harness

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def digest_of_the_whole_identity(name: str, version: str, arguments: Any,
                                 definition: str | None = None) -> str:
    """The digest as it was made before: the identity object encoded whole."""
    identity: dict[str, Any] = {"tool": name, "version": version, "arguments": arguments}
    if definition is not None:
        identity["definition"] = definition
    return sha256_digest(canonical_json(identity))


@pytest.mark.parametrize(("name", "version", "arguments", "definition"), [
    ("math.calculate", "1.0.0", {"expression": "17 * 23"}, None),
    ("fs.read_text", "2.1.0", {}, None),
    ("up.tool", "1", {"z": [1, 2.5, None, True], "a": {"é": "\u2028\"\\"}}, "{\"d\": 1}"),
    ("up.tool", "1", {"k": "v"}, ""),
    ("ünï.code", "0.0.1-β", {"n": -0, "big": 10**30, "f": 1e-7}, "défïnition"),
])
def test_the_argument_digest_is_the_digest_of_the_whole_identity(
        name: str, version: str, arguments: Any, definition: str | None) -> None:
    assert argument_digest(name, version, arguments, definition) == (
        digest_of_the_whole_identity(name, version, arguments, definition))
    # The tail is kept per tool: a second call, and another tool's, are still exact.
    assert argument_digest(name, version, arguments, definition) == (
        digest_of_the_whole_identity(name, version, arguments, definition))
    assert argument_digest(name + ".other", version, arguments, definition) == (
        digest_of_the_whole_identity(name + ".other", version, arguments, definition))


def digest_or_error(make: Any, arguments: Any) -> Any:
    try:
        return make("t.t", "1", arguments)
    except Exception as exc:
        return type(exc)


@pytest.mark.parametrize("arguments", [
    {"x": "\ud800"}, {"x": float("nan")}, {"x": object()}, {1: "a key that is not text"},
    {"b": 1, "a": {"d": [], "c": None}},
])
def test_arguments_with_no_utf8_json_form_raise_as_before(arguments: Any) -> None:
    ours = digest_or_error(argument_digest, arguments)
    assert ours == digest_or_error(digest_of_the_whole_identity, arguments)


def record(**times: Any) -> InvocationRecord:
    return InvocationRecord(
        id="i", run_id="r", principal_id="p", scopes=("b", "a"), tool_name="t.t",
        tool_version="1", arguments={"a": 1}, argument_digest=None,
        state=InvocationState.SUCCEEDED, **times)


def iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="microseconds")


def test_a_rows_times_are_each_their_own_text_whether_or_not_they_are_one_datetime() -> None:
    created = dt.datetime(2026, 12, 7, 23, 0, 0, tzinfo=dt.UTC)  # microsecond 0: ".000000"
    later = created + dt.timedelta(seconds=1, microseconds=5)
    other_zone = dt.datetime(2026, 12, 7, 23, 0, 0, 7,
                             tzinfo=dt.timezone(dt.timedelta(hours=-3, minutes=-30)))
    equal_not_same = created + dt.timedelta(0)
    for times in (
        dict(created_at=created, started_at=created, finished_at=later),
        dict(created_at=created, started_at=None, finished_at=created, decided_at=created),
        dict(created_at=created, started_at=equal_not_same, run_deadline=other_zone),
        # The same instant in another zone is equal, and another text.
        dict(created_at=created, started_at=created.astimezone(other_zone.tzinfo)),
        dict(created_at=other_zone, started_at=other_zone, finished_at=other_zone,
             decided_at=later, run_deadline=later),
    ):
        rec = record(**times)
        row = to_row(rec)
        for name in ("created_at", "started_at", "finished_at", "decided_at", "run_deadline"):
            assert row[name] == iso(getattr(rec, name)), (name, times)
    assert to_row(record(created_at=created, started_at=created))["started_at"] == (
        "2026-12-07T23:00:00.000000+00:00")


def test_a_policy_cells_decision_is_the_same_every_time_it_is_asked() -> None:
    policy = Policy()
    for side_effect in SideEffect:
        for risk in Risk:
            first = policy.decide(side_effect, risk)
            assert first == PolicyDecision(policy.matrix[side_effect][risk], side_effect, risk)
            assert policy.decide(side_effect, risk) == first
            assert first.to_json() is not policy.decide(side_effect, risk).to_json()
    # The cache is no part of the policy's value.
    assert policy == Policy()
    assert "_decided" not in repr(policy)


def test_a_loosened_external_write_cell_still_names_its_override() -> None:
    loosened = Policy.configured({(SideEffect.EXTERNAL_WRITE, Risk.LOW): PolicyAction.ALLOW},
                                 allow_external_write_loosening=True)
    for _ in range(2):
        decision = loosened.decide(SideEffect.EXTERNAL_WRITE, Risk.LOW)
        assert decision.action is PolicyAction.ALLOW
        assert decision.override is not None
        assert decision.to_json()["override"] == decision.override


async def async_body(arguments: Mapping[str, Any], context: Any) -> None:
    return None


def sync_body(arguments: Mapping[str, Any], context: Any) -> None:
    return None


class AsyncCallable:
    async def __call__(self, arguments: Mapping[str, Any], context: Any) -> None:
        return None


class SyncCallable:
    def __call__(self, arguments: Mapping[str, Any], context: Any) -> None:
        return None


@pytest.mark.parametrize("tool", [
    async_body, sync_body, AsyncCallable(), SyncCallable(), functools.partial(async_body),
    functools.partial(sync_body), AsyncCallable().__call__, lambda arguments, context: None,
])
def test_whether_a_body_is_async_is_what_inspect_says(tool: Any) -> None:
    expected = inspect.iscoroutinefunction(tool) or inspect.iscoroutinefunction(
        type(tool).__call__)
    assert execution._is_async(tool) is expected


def test_a_sync_body_that_returns_a_coroutine_still_has_it_awaited() -> None:
    async def later() -> str:
        return "awaited"

    async def finish() -> Any:
        call, run = CancellationEvent(), CancellationEvent()
        return await execution._finished(later(), call, run, float("inf"), lambda: 0.0)

    assert asyncio.run(finish()) == "awaited"


def test_a_calls_debug_and_info_lines_are_written_at_a_level_that_lets_them_through() -> None:
    out = io.StringIO()
    try:
        configure_logging(FixedClock(DEFAULT_INSTANT), level="warning", stream=out, json=True)
        log = get_logger(invocation_id="i2")
        log.debug("dropped debug", step=1)
        log.info("dropped info", step=2)
        assert out.getvalue() == ""
        configure_logging(FixedClock(DEFAULT_INSTANT), level="debug", stream=out, json=True)
        log.debug("kept debug", step=3)
        log.info("kept info", step=4)
        configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True)
        fresh = get_logger(invocation_id="i3")
        fresh.debug("dropped again", step=5)
        fresh.info("kept again", step=6)
    finally:
        structlog.reset_defaults()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["event"], e["invocation_id"], e.get("step"), e.get("level")) for e in lines] == [
        ("kept debug", "i2", 3, "debug"), ("kept info", "i2", 4, "info"),
        ("kept again", "i3", 6, "info")]


async def answers(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    return ToolOutput(structured={}, content="")


def test_an_outcomes_trust_is_the_member_its_row_names_and_no_other_text_is_one() -> None:
    spec = make_spec(name="fx.body", input_schema=SCHEMA, output_schema=OUT,
                     idempotency=Idempotency.READ_ONLY)
    with Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=answers)])}) as h:
        pipeline = h.host.pipeline
        for trust in Trust:
            rec = record(created_at=DEFAULT_INSTANT, output_trust=trust.value,
                         result_content="c", result_structured={})
            assert pipeline.outcome_of(rec).output_trust is trust
        assert pipeline.outcome_of(record(created_at=DEFAULT_INSTANT)).output_trust is None
        with pytest.raises(ValueError):
            pipeline.outcome_of(record(created_at=DEFAULT_INSTANT, output_trust="user"))
