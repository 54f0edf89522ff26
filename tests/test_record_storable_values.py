"""What a call puts on its row can be stored, on SQLite and on PostgreSQL alike.

- A tool's output with no UTF-8 JSON form (a lone surrogate in its content or structured
  result) passed step 10 and failed only when the row was written:
  a read was answered as the record store's outage (retryable, no row, a false alarm in the
  log and the metrics; every retry the same), a writing call as ``interrupted`` ("may or may
  not have taken effect"); one past 64 KiB failed ``unexpected``. It is the tool's fault,
  OUTPUT_INVALID, on its row, as step 4 refuses such arguments.
- A call naming no tool, with a name no tool could have: PostgreSQL's TEXT refused a U+0000
  in it (the call answered as a store outage, no row), no store took a lone surrogate, and a
  megabyte of name was stored whole. The row now says ``(not a tool name)`` and its detail
  keeps the first 200 characters asked for, escaped, and the length; a name a tool could have
  is recorded as it was asked.
- NaN and the infinities (which Python's and pydantic's JSON parsers accept from an MCP client
  or ``--args``) passed a ``number`` schema and were stored: PostgreSQL's jsonb has no form
  for them and the MCP SDK would have sent them as ``null``. Step 4 refuses them in arguments,
  step 10 in an output (D401).

PostgreSQL runs when tests/pg_server.py finds its binaries (TOOLHOST_REQUIRE_SERVERS=1: it
must).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec
from pg_server import pg_database, pg_server

from toolhost import Idempotency, Risk, SideEffect, Tool, ToolExecutionContext, ToolOutput
from toolhost._model import host_reasons
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._model.settings import Settings
from toolhost.testing import Harness

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

SCHEMA = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}
LONE = "\ud800"
NUMBER = {"type": "object", "properties": {"x": {"type": "number"}}, "required": [],
          "additionalProperties": False}
NOT_JSON_NUMBERS = {"nan": float("nan"), "infinity": float("inf"), "-infinity": float("-inf")}


def _returning(structured: Mapping[str, Any], content: str) -> Any:
    def body(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        return ToolOutput(structured=structured, content=content)
    return body


def _tool(name: str, structured: Mapping[str, Any], content: str, *,
          writes: bool = False, output_schema: Mapping[str, Any] = OUT) -> Tool:
    kinds: dict[str, Any] = dict(side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                                 idempotency=Idempotency.NON_IDEMPOTENT,
                                 allow_parallel=False) if writes else {}
    return Tool(make_spec(name=name, input_schema=SCHEMA, output_schema=output_schema,
                          **kinds), call=_returning(structured, content))


#: Outputs no row can hold, by tool.
UNENCODABLE = {
    "fx.read_content": _tool("fx.read_content", {"echo": "ok"}, f"half {LONE} a pair"),
    "fx.read_structured": _tool("fx.read_structured", {"echo": f"end{LONE}"}, "ok"),
    "fx.write_content": _tool("fx.write_content", {"echo": "ok"}, f"half {LONE}",
                              writes=True),
    "fx.write_structured": _tool("fx.write_structured", {"echo": f"{LONE}"}, "ok",
                                 writes=True),
    # Over the tool's limit and past 64 KiB: measured (and encoded) on a worker thread.
    "fx.read_large": _tool("fx.read_large", {"echo": "ok"}, "é" * 70_000 + LONE),
    "fx.read_nan": _tool("fx.read_nan", {"x": float("nan")}, "ok", output_schema=NUMBER),
    "fx.write_infinity": _tool("fx.write_infinity", {"x": float("-inf")}, "ok", writes=True,
                               output_schema=NUMBER),
    "fx.read_large_infinity": _tool("fx.read_large_infinity", {"x": float("inf")}, "é" * 70_000,
                                    output_schema=NUMBER),
}
OK = _tool("fx.ok", {"echo": "ok"}, "ok")
TAKES_NUMBER = Tool(make_spec(name="fx.takes_number", input_schema=NUMBER, output_schema=OUT),
                    call=_returning({"echo": "ok"}, "ok"))


@pytest.fixture(params=["sqlite", "postgresql"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    env = {}
    if request.param == "postgresql":
        env["TOOLHOST_DATABASE_URL"] = request.getfixturevalue("pg_database")
    with Harness.over({"fx-dist": make_plugin(tools=[*UNENCODABLE.values(), OK, TAKES_NUMBER])},
                      settings=Settings(env=env), data_dir=tmp_path / "data") as h:
        yield h


def rows(h: Harness) -> list[InvocationRecord]:
    return list(h.host.pipeline.invocations.list())


@pytest.mark.parametrize("name", sorted(UNENCODABLE))
def test_an_output_the_row_cannot_hold_is_the_tools_invalid_output(
        harness: Harness, name: str) -> None:
    outcome = harness.invoke(name)
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (
        host_reasons.OUTPUT_SCHEMA, False)
    (row,) = rows(harness)
    assert (row.id, row.state, row.reason_code) == (
        outcome.invocation_id, InvocationState.FAILED, host_reasons.OUTPUT_SCHEMA)
    assert row.failure_detail == {"problem": "the output is not encodable as UTF-8 JSON"}
    assert row.result_content is None and row.result_structured is None
    assert harness.invoke("fx.ok").status.value == "succeeded"


@pytest.mark.parametrize("case", sorted(NOT_JSON_NUMBERS))
def test_an_argument_json_has_no_number_for_is_refused_on_its_row(
        harness: Harness, case: str) -> None:
    outcome = harness.call("fx.takes_number", {"x": NOT_JSON_NUMBERS[case]})
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.detail) == (
        host_reasons.INVALID_SCHEMA, {"problem": "arguments are not encodable as UTF-8 JSON"})
    (row,) = rows(harness)
    assert (row.id, row.state, row.reason_code) == (
        outcome.invocation_id, InvocationState.FAILED, host_reasons.INVALID_SCHEMA)
    assert harness.call("fx.takes_number", {"x": 1.5}).status.value == "succeeded"


#: Names no tool could have, and the detail their row keeps.
NOT_NAMES = {
    "nul": ("fx.no\x00such", "fx.no\\u0000such"),
    "lone-surrogate": (f"fx.{LONE}", "fx.\\ud800"),
    "megabyte": ("fx." + "a" * 1_000_000, "fx." + "a" * 197 + "… (1000003 characters)"),
    "upper-case": ("Fx.Echo", "Fx.Echo"),
}


@pytest.mark.parametrize("case", sorted(NOT_NAMES))
def test_a_name_no_tool_could_have_is_refused_on_a_row_that_can_hold_it(
        harness: Harness, case: str) -> None:
    name, kept = NOT_NAMES[case]
    outcome = harness.call(name, {})
    assert outcome.failure is not None
    assert outcome.failure.reason_code == host_reasons.UNKNOWN_TOOL
    (row,) = rows(harness)
    assert (row.id, row.state, row.reason_code) == (
        outcome.invocation_id, InvocationState.FAILED, host_reasons.UNKNOWN_TOOL)
    assert row.tool_name == "(not a tool name)"
    assert row.failure_detail == {"tool": kept}


def test_a_name_a_tool_could_have_is_recorded_as_asked(harness: Harness) -> None:
    outcome = harness.call("fx.no_such_tool", {})
    assert outcome.failure is not None
    assert outcome.failure.reason_code == host_reasons.UNKNOWN_TOOL
    (row,) = rows(harness)
    assert (row.tool_name, row.failure_detail) == ("fx.no_such_tool", {"tool": "fx.no_such_tool"})


def test_an_unknown_version_is_kept_bounded(harness: Harness) -> None:
    outcome = harness.call("fx.ok", {}, version="1." + "0" * 1_000_000 + "\x00")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == host_reasons.UNKNOWN_VERSION
    (row,) = rows(harness)
    assert (row.tool_name, row.tool_version) == ("fx.ok", None)
    assert row.failure_detail == {
        "tool": "fx.ok", "version": "1." + "0" * 198 + "… (1000003 characters)"}
