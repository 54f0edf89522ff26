"""demo.external_write: its spec, its record, the approval it always needs, and hard gate 15.

Everything goes through the host's real pipeline with the test kit (``toolhost.testing``):
``toolhost_host`` for most tests, ``stored_host`` where the rows are counted on disk.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demo_support import database
from toolhost import (
    Idempotency,
    Kind,
    OutcomeStatus,
    Risk,
    Settings,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolValidationError,
    Trust,
)
from toolhost.testing import Harness, InvocationState
from toolhost_demo import plugin
from toolhost_demo.external_write import SPEC, external_write


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def table_names(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                        "AND name NOT LIKE 'sqlite_%' ORDER BY name").fetchall()
    return [r[0] for r in rows]


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            for t in table_names(conn)}


def files(data_dir: Path, db: Path) -> set[str]:
    """Every file under the data directory but the database's own (its WAL and index files)."""
    return {str(p.relative_to(data_dir)) for p in data_dir.rglob("*")
            if p.is_file() and not p.name.startswith(db.name)}


# ---------------------------------------------------------------------------- hard gate 15


def test_gate_15_an_approved_call_writes_its_row_and_nothing_else(
    stored_host: Harness, data_dir: Path
) -> None:
    # A first call, paused and denied, composes the stores: every migration has run, and
    # what the approved call below changes is measured against a settled database.
    first = stored_host.invoke("demo.external_write", destination="warm-up", content="")
    assert first.invocation_id is not None
    stored_host.deny(first.invocation_id)
    db = database(data_dir)
    conn = sqlite3.connect(db)
    tables, before, files_before = table_names(conn), counts(conn), files(data_dir, db)
    assert "tool_invocations" in tables and len(tables) > 1

    run = stored_host.start_run()
    paused = stored_host.call("demo.external_write",
                              {"destination": "crm://accounts/42", "content": "hello"}, run=run)
    assert paused.status is OutcomeStatus.AWAITING_APPROVAL and paused.invocation_id
    approved = stored_host.approve(paused.invocation_id, "ops")
    stored_host.end_run(run)

    after = counts(conn)
    assert table_names(conn) == tables  # no side table appeared
    changed = {t for t in tables if after[t] != before[t]}
    assert changed == {"tool_invocations"}, (before, after)
    assert after["tool_invocations"] == before["tool_invocations"] + 1
    assert files(data_dir, db) == files_before  # no artifact, no file anywhere

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


def test_under_the_default_policy_every_call_requires_approval(toolhost_host: Harness) -> None:
    for _ in range(2):
        outcome = toolhost_host.invoke("demo.external_write", destination="x", content="y")
        assert outcome.status is OutcomeStatus.AWAITING_APPROVAL
        assert outcome.decision == {"action": "approval", "rule": "EXTERNAL_WRITE/HIGH"}
        assert outcome.structured is None


def test_a_pause_runs_nothing_and_a_denial_leaves_no_result(toolhost_host: Harness) -> None:
    paused = toolhost_host.invoke("demo.external_write", destination="x", content="y")
    assert paused.invocation_id is not None
    row = toolhost_host.record(paused.invocation_id)
    assert row.state is InvocationState.AWAITING_APPROVAL and row.result_structured is None
    denied = toolhost_host.deny(paused.invocation_id, "not today")
    assert denied.status is OutcomeStatus.DENIED and denied.structured is None
    row = toolhost_host.record(paused.invocation_id)
    assert (row.state, row.result_structured, row.denial_reason) == (
        InvocationState.DENIED, None, "not today")


def test_approving_twice_runs_it_once(stored_host: Harness, data_dir: Path) -> None:
    paused = stored_host.invoke("demo.external_write", destination="x", content="y")
    assert paused.invocation_id is not None
    first = stored_host.approve(paused.invocation_id, "ops")
    second = stored_host.approve(paused.invocation_id, "someone else")
    assert first.structured == second.structured and first.ok and second.ok
    assert stored_host.record(paused.invocation_id).approver == "ops"
    conn = sqlite3.connect(database(data_dir))
    assert conn.execute("SELECT COUNT(*) FROM tool_invocations").fetchone()[0] == 1
    conn.close()


def test_a_run_without_the_scope_is_refused_before_any_pause(toolhost_host: Harness) -> None:
    run = toolhost_host.start_run(scopes=())
    outcome = toolhost_host.call("demo.external_write", {"destination": "x", "content": "y"},
                                 run=run)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.permission_denied.missing_scope"
    assert outcome.failure.retryable is False


# ---------------------------------------------------------------------------- the record


def approved(harness: Harness, arguments: dict[str, Any]) -> Any:
    paused = harness.call("demo.external_write", arguments)
    assert paused.invocation_id is not None, paused.to_json()
    return harness.approve(paused.invocation_id, "ops")


@pytest.mark.parametrize(
    "destination",
    ["x", "https://example.com/api?q=1#frag", "mailto:someone@example.org", "../../etc/passwd",
     "not a url at all", "", " padded ", "日本語", "a" * 256],
)
def test_the_destination_is_recorded_verbatim(toolhost_host: Harness, destination: str) -> None:
    outcome = approved(toolhost_host, {"destination": destination, "content": "c"})
    assert outcome.ok and outcome.structured["destination"] == destination


def test_the_result_carries_no_content_and_no_timestamp(toolhost_host: Harness) -> None:
    outcome = approved(toolhost_host, {"destination": "x", "content": "naïve"})
    assert outcome.structured == {"recorded": True, "destination": "x", "byte_count": 6,
                                  "checksum": sha("naïve")}
    assert outcome.output_trust is Trust.INTERNAL_TOOL
    assert outcome.content == (f'Recorded 6 bytes for "x" ({sha("naïve")}). Nothing was sent: '
                               "this demo tool only records.")


def test_the_body_is_what_the_host_runs(toolhost_host: Harness) -> None:
    # A typed tool's call=: the host runs it as it is, and calling it needs no pipeline.
    assert toolhost_host.tool("demo.external_write") is plugin.EXTERNAL_WRITE.call
    assert external_write("d", "").checksum == sha("")
    output = toolhost_host.run_body("demo.external_write", {"destination": "d", "content": ""})
    assert output.structured == {"recorded": True, "destination": "d", "byte_count": 0,
                                 "checksum": sha("")}


@pytest.mark.parametrize(
    "arguments",
    [{"destination": "x"}, {"content": "y"}, {"destination": "x" * 257, "content": "y"},
     {"destination": "x", "content": "y" * 4097}, {"destination": "x", "content": "y", "z": 1},
     {"destination": 1, "content": "y"}, {"destination": "x", "content": 5},
     {"destination": None, "content": "y"}, {"destination": "x", "content": ["y"]},
     ["x", "y"], "x"],
)
def test_bad_arguments_fail_at_step_4_before_any_pause(
    stored_host: Harness, data_dir: Path, arguments: Any
) -> None:
    # The body does not re-check types or presence: step 4 refuses all of it, before policy.
    outcome = stored_host.call("demo.external_write", arguments)
    assert outcome.failure is not None
    assert outcome.failure.reason_code == ToolValidationError.REASON_CODE
    assert not outcome.paused and outcome.decision is None
    conn = sqlite3.connect(database(data_dir))
    paused = conn.execute("SELECT COUNT(*) FROM tool_invocations WHERE state = ?",
                          (InvocationState.AWAITING_APPROVAL.value,)).fetchone()[0]
    conn.close()
    assert paused == 0


def test_content_at_the_limit_is_recorded(toolhost_host: Harness) -> None:
    outcome = approved(toolhost_host, {"destination": "x", "content": "é" * 4096})
    assert outcome.ok and outcome.structured["byte_count"] == 8192


# The examples only read the harness (each gets a context of its own), so sharing the
# function-scoped fixture across them is safe.
@settings(max_examples=50,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(destination=st.text(st.characters(codec="utf-8"), max_size=256),
       content=st.text(st.characters(codec="utf-8"), max_size=300))
def test_the_body_has_no_failures(toolhost_host: Harness, destination: str, content: str) -> None:
    output = toolhost_host.run_body("demo.external_write",
                                    {"destination": destination, "content": content})
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


def test_the_plugin_declares_no_failures() -> None:
    assert [d.name for d in plugin.toolhost_domains()] == ["demo"]
    (registered,) = plugin.toolhost_tools(Settings())
    assert isinstance(registered, Tool)
    assert registered.spec is SPEC
    # A typed tool (specs.EXTERNAL_WRITE): its body's module is imported at the first call.
    assert registered is plugin.EXTERNAL_WRITE and registered.build is None
    assert registered.reasons == () and registered.reason_codes == ()
    assert registered.default_enabled is True


def test_the_two_hooks_and_no_messages_hook() -> None:
    hooks = sorted(name for name, value in vars(plugin).items()
                   if hasattr(value, "toolhost_impl"))
    assert hooks == ["toolhost_domains", "toolhost_tools"]
    assert not hasattr(plugin, "toolhost_messages")


def test_the_host_registers_it_from_this_distribution(toolhost_host: Harness) -> None:
    outcome = toolhost_host.invoke("demo.external_write", destination="x", content="y")
    assert (outcome.tool, outcome.version) == ("demo.external_write", "1.0.0")
