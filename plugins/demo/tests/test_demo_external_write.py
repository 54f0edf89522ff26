"""demo.external_write: its spec, its record, the approval it always needs, and hard gate 15."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolhost import (
    Idempotency,
    Kind,
    OutcomeStatus,
    Principal,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    ToolExecutionContext,
    Trust,
)
from toolhost._db import DATABASE_NAME, table_names
from toolhost._host import Host
from toolhost._invocations import InvocationState
from toolhost._policy import DEFAULT_MATRIX, Policy, PolicyAction
from toolhost_demo import plugin
from toolhost_demo.external_write import SPEC, external_write


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            for t in table_names(conn)}


def files(data_dir: Path) -> set[str]:
    """Every file under the data directory but the database's own (its WAL and index files)."""
    return {str(p.relative_to(data_dir)) for p in data_dir.rglob("*")
            if p.is_file() and not p.name.startswith(DATABASE_NAME)}


# ---------------------------------------------------------------------------- hard gate 15


def test_gate_15_an_approved_call_writes_its_row_and_nothing_else(
    host: Host, data_dir: Path
) -> None:
    host.pipeline  # noqa: B018 -- composes the stores, so every migration has run
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    tables, before, files_before = table_names(conn), counts(conn), files(data_dir)
    assert "tool_invocations" in tables and len(tables) > 1

    run = host.start_run()
    paused = host.invoke_sync("demo.external_write",
                              {"destination": "crm://accounts/42", "content": "hello"}, run=run)
    assert paused.status is OutcomeStatus.AWAITING_APPROVAL and paused.invocation_id
    approved = host.approve_sync(paused.invocation_id, "ops")
    host.end_run(run)

    after = counts(conn)
    assert table_names(conn) == tables  # no side table appeared
    changed = {t for t in tables if after[t] != before[t]}
    assert changed == {"tool_invocations"}, (before, after)
    assert after["tool_invocations"] == before["tool_invocations"] + 1
    assert files(data_dir) == files_before  # no artifact, no file anywhere

    record = {"recorded": True, "destination": "crm://accounts/42", "byte_count": 5,
              "checksum": sha("hello")}
    assert approved.ok and approved.structured == record
    # The record is the structured result on the invocation's own row, beside its arguments.
    row = conn.execute(
        "SELECT state, approver, result_structured, arguments, artifact_refs "
        "FROM tool_invocations WHERE id = ?", (paused.invocation_id,)).fetchone()
    state, approver, structured, arguments, artifacts = row
    assert (state, approver) == ("succeeded", "ops")
    assert json.loads(structured) == record
    assert json.loads(arguments) == {"destination": "crm://accounts/42", "content": "hello"}
    assert json.loads(artifacts) == []
    conn.close()


# ---------------------------------------------------------------------------- approval


def test_under_the_default_policy_every_call_requires_approval(host: Host) -> None:
    assert all(DEFAULT_MATRIX[SideEffect.EXTERNAL_WRITE][r] is PolicyAction.REQUIRE_APPROVAL
               for r in Risk)
    decision = Policy().decide(SPEC.side_effect, SPEC.risk)
    assert decision.action is PolicyAction.REQUIRE_APPROVAL
    for _ in range(2):
        outcome = host.invoke_sync("demo.external_write", {"destination": "x", "content": "y"})
        assert outcome.status is OutcomeStatus.AWAITING_APPROVAL
        assert outcome.decision == {"action": "approval", "rule": "EXTERNAL_WRITE/HIGH"}
        assert outcome.structured is None


def test_a_pause_runs_nothing_and_a_denial_leaves_no_result(host: Host) -> None:
    paused = host.invoke_sync("demo.external_write", {"destination": "x", "content": "y"})
    assert paused.invocation_id is not None
    row = host.pipeline.invocations.get(paused.invocation_id)
    assert row.state is InvocationState.AWAITING_APPROVAL and row.result_structured is None
    denied = host.pipeline.deny(paused.invocation_id, "ops", "not today")
    assert denied.status is OutcomeStatus.DENIED and denied.structured is None
    row = host.pipeline.invocations.get(paused.invocation_id)
    assert (row.state, row.result_structured, row.denial_reason) == (
        InvocationState.DENIED, None, "not today")


def test_approving_twice_runs_it_once(host: Host) -> None:
    paused = host.invoke_sync("demo.external_write", {"destination": "x", "content": "y"})
    assert paused.invocation_id is not None
    first = host.approve_sync(paused.invocation_id, "ops")
    second = host.approve_sync(paused.invocation_id, "someone else")
    assert first.structured == second.structured and first.ok and second.ok
    assert host.pipeline.invocations.get(paused.invocation_id).approver == "ops"
    assert host.pipeline.invocations.count() == 1


# ---------------------------------------------------------------------------- the record


def approved(host: Host, arguments: dict[str, Any]) -> Any:
    paused = host.invoke_sync("demo.external_write", arguments)
    assert paused.invocation_id is not None, paused.to_json()
    return host.approve_sync(paused.invocation_id, "ops")


@pytest.mark.parametrize(
    "destination",
    ["x", "https://example.com/api?q=1#frag", "mailto:someone@example.org", "../../etc/passwd",
     "not a url at all", "", " padded ", "日本語", "a" * 256],
)
def test_the_destination_is_recorded_verbatim(host: Host, destination: str) -> None:
    outcome = approved(host, {"destination": destination, "content": "c"})
    assert outcome.ok and outcome.structured["destination"] == destination


def test_the_result_carries_no_content_and_no_timestamp(host: Host) -> None:
    outcome = approved(host, {"destination": "x", "content": "naïve"})
    assert outcome.structured == {"recorded": True, "destination": "x", "byte_count": 6,
                                  "checksum": sha("naïve")}
    assert outcome.output_trust is Trust.INTERNAL_TOOL
    assert outcome.content == (f'Recorded 6 bytes for "x" ({sha("naïve")}). Nothing was sent: '
                               "this demo tool only records.")


def test_the_body_touches_nothing_from_its_context() -> None:
    # A context with no workspace, no artifact writer and no deadline: the body still succeeds.
    context = ToolExecutionContext(run_id="r", principal=Principal("p"))
    output = external_write({"destination": "d", "content": ""}, context)
    assert output.structured == {"recorded": True, "destination": "d", "byte_count": 0,
                                 "checksum": sha("")}


@pytest.mark.parametrize(
    "arguments",
    [{"destination": "x"}, {"content": "y"}, {"destination": "x" * 257, "content": "y"},
     {"destination": "x", "content": "y" * 4097}, {"destination": "x", "content": "y", "z": 1},
     {"destination": 1, "content": "y"}],
)
def test_bad_arguments_fail_at_step_4_before_any_pause(host: Host,
                                                       arguments: dict[str, Any]) -> None:
    outcome = host.invoke_sync("demo.external_write", arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert host.pipeline.invocations.list(state=InvocationState.AWAITING_APPROVAL) == []


def test_content_at_the_limit_is_recorded(host: Host) -> None:
    outcome = approved(host, {"destination": "x", "content": "é" * 4096})
    assert outcome.ok and outcome.structured["byte_count"] == 8192


@settings(max_examples=50, deadline=None)
@given(destination=st.text(st.characters(codec="utf-8"), max_size=256),
       content=st.text(st.characters(codec="utf-8"), max_size=300))
def test_the_body_has_no_failures(destination: str, content: str) -> None:
    context = ToolExecutionContext(run_id="r", principal=Principal("p"))
    output = external_write({"destination": destination, "content": content}, context)
    data = content.encode("utf-8")
    assert output.structured == {"recorded": True, "destination": destination,
                                 "byte_count": len(data), "checksum": sha(content)}


# ---------------------------------------------------------------------------- the spec


def test_classification_matches_the_table() -> None:
    assert (SPEC.side_effect, SPEC.risk, SPEC.idempotency) == (
        SideEffect.EXTERNAL_WRITE, Risk.HIGH, Idempotency.NON_IDEMPOTENT)
    assert (SPEC.output_trust, SPEC.required_scopes) == (Trust.INTERNAL_TOOL, ("demo.write",))
    assert (SPEC.timeout_s, SPEC.maximum_output_bytes, SPEC.allow_parallel) == (10, 4096, False)
    assert (SPEC.kind, SPEC.source, SPEC.target_kind, SPEC.server_id) == (
        Kind.CAPABILITY, Source.BUILTIN, TargetKind.IN_PROCESS, None)
    assert (SPEC.name, SPEC.version, SPEC.deprecated) == ("demo.external_write", "1.0.0", False)


def test_schemas_are_the_specs_exactly() -> None:
    assert SPEC.input_schema == {
        "type": "object",
        "properties": {"destination": {"type": "string", "maxLength": 256},
                       "content": {"type": "string", "maxLength": 4096}},
        "required": ["destination", "content"],
        "additionalProperties": False,
    }
    assert SPEC.output_schema == {
        "type": "object",
        "properties": {"recorded": {"const": True}, "destination": {"type": "string"},
                       "byte_count": {"type": "integer"}, "checksum": {"type": "string"}},
        "required": ["recorded", "destination", "byte_count", "checksum"],
        "additionalProperties": False,
    }


def test_the_plugin_declares_no_failures(host: Host) -> None:
    assert [d.name for d in plugin.toolhost_domains()] == ["demo"]
    assert plugin.toolhost_messages() == {}
    (registered,) = list(host.registry)
    assert registered.tool.reason_codes == () and registered.tool.default_enabled is True
    assert registered.distribution == "toolhost-demo"
