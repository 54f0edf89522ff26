"""Every pipeline step and every fault of issue #3, against the fixture plugin."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fixture_tools
import pytest
import structlog
from conftest import Closes, make_plugin, make_spec
from fixture_tools import EXECUTIONS, LATE, PLUGIN, finished

from toolhost import OutcomeStatus, Principal, Tool, ToolFailureKind, ToolOutput, Trust
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect, table_names
from toolhost._composition import Host
from toolhost._model.digest import argument_digest
from toolhost._model.host_reasons import AWAITING_APPROVAL_TEXT, DENIED_TEXT, MESSAGES
from toolhost._model.invocations import InvocationState
from toolhost._model.runs import ToolCall
from toolhost._model.spec import Idempotency, Risk, SideEffect
from toolhost._pipeline import steps
from toolhost._pipeline.approvals import InvocationStateError
from toolhost._pipeline.log import configure_logging
from toolhost._pipeline.policy import Policy, PolicyAction
from toolhost.testing import host_for

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def _reset() -> None:
    EXECUTIONS.clear()
    LATE.clear()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    with host_for({"fx-dist": PLUGIN}, data_dir=tmp_path) as host:
        yield host


def rows(host: Host) -> list[Any]:
    return host.pipeline.invocations.list()


def run_for(host: Host, **kwargs: Any) -> Any:
    kwargs.setdefault("principal", Principal("u", frozenset({"fx.read", "fx.write"})))
    return host.start_run(**kwargs)


# ------------------------------------------------------------------ steps 1-4


def test_every_outcome_is_exactly_one_row(host: Host) -> None:
    run = run_for(host)
    outcomes = [
        host.invoke_sync("fx.echo", {"x": "a"}, run=run),
        host.invoke_sync("fx.nope", {}, run=run),
        host.invoke_sync("fx.echo", {"x": 1}, run=run),
        host.invoke_sync("fx.escape", {}, run=run),
    ]
    records = rows(host)
    assert [r.id for r in records] == [o.invocation_id for o in outcomes] or sorted(
        r.id for r in records) == sorted(o.invocation_id for o in outcomes)
    assert len(records) == 4
    by_id = {r.id: r for r in records}
    assert by_id[outcomes[0].invocation_id].state is InvocationState.SUCCEEDED
    assert by_id[outcomes[1].invocation_id].reason_code == "tool.invalid_arguments.unknown_tool"
    assert by_id[outcomes[2].invocation_id].reason_code == "tool.invalid_arguments.schema"


def test_step_2_default_roster_and_explicit_enabled_tools(host: Host) -> None:
    default = run_for(host)
    hidden = host.invoke_sync("fx.hidden", {"x": "a"}, run=default)
    assert hidden.failure and hidden.failure.reason_code == "tool.permission_denied.not_enabled"
    explicit = run_for(host, enabled_tools=["fx.hidden"])
    assert host.invoke_sync("fx.hidden", {"x": "a"}, run=explicit).ok
    assert not host.invoke_sync("fx.echo", {"x": "a"}, run=explicit).ok


def test_step_3_missing_scope_is_permission_denied_not_retryable(host: Host) -> None:
    run = host.start_run(principal=Principal("u", frozenset()))
    outcome = host.invoke_sync("fx.scoped", {"x": "a"}, run=run)
    assert outcome.failure is not None
    assert outcome.failure.kind is ToolFailureKind.PERMISSION_DENIED
    assert outcome.failure.retryable is False
    assert outcome.content == MESSAGES["tool.permission_denied.missing_scope"]
    assert outcome.failure.detail == {"missing": ["fx.read"]}


def test_step_1_pins_choose_the_version(tmp_path: Path, closes: Closes) -> None:
    from conftest import make_plugin, make_spec, make_tool

    plugin = make_plugin(tools=[make_tool(), make_tool(make_spec(version="2.0.0"))])
    h = closes(host_for({"fx-dist": plugin}, data_dir=tmp_path))
    assert h.invoke_sync("fx.echo", {}, run=h.start_run()).version == "2.0.0"
    assert h.invoke_sync("fx.echo", {}, run=h.start_run(pins={"fx.echo": "1.0.0"})).version == (
        "1.0.0")


# ------------------------------------------------------------------ steps 5-7: approvals


def pause(host: Host, destination: str = "https://example.invalid/x") -> Any:
    outcome = host.invoke_sync("fx.write", {"destination": destination}, run=run_for(host))
    assert outcome.status is OutcomeStatus.AWAITING_APPROVAL
    return outcome


def test_require_approval_persists_a_pause_with_the_digest(host: Host) -> None:
    outcome = pause(host)
    assert outcome.content == AWAITING_APPROVAL_TEXT and outcome.structured is None
    record = host.pipeline.invocations.get(outcome.invocation_id)
    assert record.state is InvocationState.AWAITING_APPROVAL
    assert record.argument_digest and record.argument_digest.startswith("sha256:")
    assert record.policy == {"action": "approval", "rule": "EXTERNAL_WRITE/HIGH"}
    assert EXECUTIONS == []


def test_approve_runs_the_approved_arguments_once(host: Host) -> None:
    paused = pause(host)
    done = host.approve_sync(paused.invocation_id, "ops")
    assert done.ok and done.content == "recorded"
    again = host.approve_sync(paused.invocation_id, "ops")
    assert again.ok and again.content == "recorded"
    assert EXECUTIONS == [{"destination": "https://example.invalid/x"}]
    record = host.pipeline.invocations.get(paused.invocation_id)
    assert (record.state, record.approver) == (InvocationState.SUCCEEDED, "ops")
    assert record.result_structured == {"echo": "https://example.invalid/x"}


def test_deny_ends_the_row_with_a_rendered_decision_not_a_result(host: Host) -> None:
    paused = pause(host)
    denied = host.pipeline.deny(paused.invocation_id, "ops", "not today, sk-secret")
    assert denied.status is OutcomeStatus.DENIED
    assert denied.content == DENIED_TEXT and denied.structured is None and denied.failure is None
    assert "not today" not in json.dumps(denied.to_json())
    record = host.pipeline.invocations.get(paused.invocation_id)
    assert (record.state, record.denial_reason) == (InvocationState.DENIED,
                                                    "not today, sk-secret")
    with pytest.raises(InvocationStateError):
        host.approve_sync(paused.invocation_id, "ops")
    assert EXECUTIONS == []


def test_deny_after_approval_is_refused(host: Host) -> None:
    paused = pause(host)
    host.approve_sync(paused.invocation_id, "ops")
    with pytest.raises(InvocationStateError, match="succeeded, not awaiting approval"):
        host.pipeline.deny(paused.invocation_id, "ops", "too late")


def test_an_approval_binds_to_the_digest(host: Host, closes: Closes) -> None:
    paused = pause(host)
    conn = closes(connect(host.data_dir / DATABASE_NAME))
    conn.execute("UPDATE tool_invocations SET arguments = ? WHERE id = ?",
                 (json.dumps({"destination": "https://evil.invalid"}), paused.invocation_id))
    outcome = host.approve_sync(paused.invocation_id, "ops")
    assert outcome.failure and outcome.failure.reason_code == "tool.internal.digest_mismatch"
    assert EXECUTIONS == []


def test_an_approval_binds_to_arguments_that_still_validate(host: Host,
                                                          closes: Closes) -> None:
    paused = pause(host)
    conn = closes(connect(host.data_dir / DATABASE_NAME))
    conn.execute("UPDATE tool_invocations SET arguments = ? WHERE id = ?",
                 (json.dumps({"destination": 5}), paused.invocation_id))
    outcome = host.approve_sync(paused.invocation_id, "ops")
    assert outcome.failure and outcome.failure.reason_code == "tool.internal.digest_mismatch"
    assert EXECUTIONS == []


def test_a_repeated_call_finds_its_row_through_the_pipeline(host: Host) -> None:
    run = run_for(host)
    paused = host.invoke_sync("fx.write", {"destination": "d"}, run=run)
    registered = host.registry.resolve("fx.write")
    prepared = host.pipeline.prepare(registered, {"destination": "d"})
    assert [r.id for r in host.pipeline.rows_for(run.id, prepared)] == [paused.invocation_id]
    assert host.pipeline.row(paused.invocation_id).argument_digest == prepared.digest
    other = host.pipeline.prepare(registered, {"destination": "e"})
    assert host.pipeline.rows_for(run.id, other) == []
    assert host.pipeline.decide(registered).action is PolicyAction.REQUIRE_APPROVAL


def test_racing_approvals_in_threads_execute_once(host: Host) -> None:
    paused = pause(host)
    barrier = threading.Barrier(8)
    results: list[Any] = []

    def approve() -> None:
        barrier.wait()
        results.append(host.approve_sync(paused.invocation_id, "ops"))

    threads = [threading.Thread(target=approve) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(EXECUTIONS) == 1
    assert all(r.status in (OutcomeStatus.SUCCEEDED, OutcomeStatus.RUNNING) for r in results)


SCRIPT = """
import json, os, sys
sys.path.insert(0, {tests!r})
from fixture_tools import PLUGIN
from toolhost.testing import host_for
from toolhost import Principal
from pathlib import Path
host = host_for({{"fx-dist": PLUGIN}}, data_dir=Path({data!r}))
if sys.argv[1] == "pause":
    run = host.start_run(principal=Principal("u", frozenset({{"fx.write"}})))
    outcome = host.invoke_sync("fx.write", {{"destination": "d"}}, run=run)
    print(outcome.invocation_id, flush=True)
    os.kill(os.getpid(), 9)  # killed between awaiting_approval and approve
else:
    print(host.approve_sync(sys.argv[2], "proc-" + str(os.getpid())).status.value)
"""


def test_a_pause_survives_a_killed_process_and_racing_processes_execute_once(
    tmp_path: Path, closes: Closes,
) -> None:
    script = tmp_path / "proc.py"
    script.write_text(SCRIPT.format(tests=str(HERE), data=str(tmp_path / "data")))
    env = {**os.environ, "FX_EXECUTION_LOG": str(tmp_path / "executions.log")}
    paused = subprocess.run([sys.executable, str(script), "pause"], capture_output=True,
                            text=True, env=env, timeout=60)
    assert paused.returncode == -9
    invocation_id = paused.stdout.strip()
    procs = [subprocess.Popen([sys.executable, str(script), "approve", invocation_id],
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    statuses = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert "succeeded" in statuses and set(statuses) <= {"succeeded", "running"}
    assert (tmp_path / "executions.log").read_text() == "d\n"
    h = closes(host_for({"fx-dist": PLUGIN}, data_dir=tmp_path / "data"))
    assert h.pipeline.invocations.get(invocation_id).state is InvocationState.SUCCEEDED
    assert h.pipeline.invocations.count() == 1


def test_policy_deny_cell_denies_without_approval(tmp_path: Path, closes: Closes) -> None:
    policy = Policy.configured({(SideEffect.NONE, Risk.LOW): PolicyAction.DENY})
    h = closes(host_for({"fx-dist": PLUGIN}, data_dir=tmp_path, policy=policy))
    outcome = h.invoke_sync("fx.echo", {"x": "a"}, run=h.start_run())
    assert outcome.status is OutcomeStatus.DENIED and outcome.content == DENIED_TEXT
    assert h.pipeline.invocations.get(outcome.invocation_id).state is InvocationState.DENIED


def test_tightened_policy_requires_approval_for_a_reader(tmp_path: Path,
                                                         closes: Closes) -> None:
    policy = Policy.configured({(SideEffect.NONE, Risk.LOW): PolicyAction.REQUIRE_APPROVAL})
    h = closes(host_for({"fx-dist": PLUGIN}, data_dir=tmp_path, policy=policy))
    assert h.invoke_sync("fx.echo", {"x": "a"}, run=h.start_run()).paused
    assert policy.tightened == ("NONE/LOW: allow -> approval",)


# ------------------------------------------------------------------ step 8: deadlines, cancel


def test_a_sync_tool_past_its_deadline_times_out_and_its_late_result_is_discarded(
    host: Host,
) -> None:
    run = run_for(host)
    outcome = host.invoke_sync("fx.sleep", {"seconds": 2}, run=run)
    # Answered at its 0.2 s deadline, while the body still sleeps: the order, not a time (a
    # loaded CI machine took 0.9 s to answer, composing the host included).
    assert not finished(run.id).is_set()
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.TIMEOUT
    assert outcome.failure.retryable is True  # READ_ONLY: a retry is safe
    assert outcome.content == "The tool did not finish before its deadline."
    # Wait for the abandoned thread itself (bounded), not for a guess at how long it takes.
    assert finished(run.id).wait(timeout=10)  # the thread finished...
    record = host.pipeline.invocations.get(outcome.invocation_id)
    assert record.state is InvocationState.FAILED  # ...and nothing persisted it as success


def test_a_non_idempotent_timeout_is_never_retryable(host: Host) -> None:
    outcome = host.invoke_sync("fx.sleep_writer", {"seconds": 0.5}, run=run_for(host))
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.TIMEOUT
    assert outcome.failure.retryable is False
    # D137: the deadline of a call not safe to repeat warns it may have taken effect.
    assert outcome.failure.reason_code == "tool.timeout.deadline_may_have_taken_effect"
    assert outcome.failure.message == (
        "The tool did not finish before its deadline, but its request may already have taken "
        "effect and been charged. Do not retry it blindly; ask the user how to proceed.")


def test_the_run_deadline_caps_the_tool_timeout(host: Host) -> None:
    # The tool's own timeout is 5 s and its body sleeps 4: uncapped, the call would succeed
    # after 4 s. The run's second leaves a loaded machine time to start the body (a 0.1 s
    # deadline could pass before it, and then nothing was there to cancel).
    run = run_for(host, timeout_s=1.0)
    started = time.perf_counter()
    outcome = host.invoke_sync("fx.asleep", {"seconds": 4}, run=run)
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.TIMEOUT
    assert time.perf_counter() - started < 3.5
    assert LATE == ["cancelled"]


def test_run_cancellation_cancels_an_async_tool(host: Host) -> None:
    run = run_for(host)

    async def scenario() -> Any:
        task = asyncio.ensure_future(host.invoke("fx.asleep", {"seconds": 3}, run=run))
        await asyncio.sleep(0.05)
        run.cancellation.cancel()
        return await task

    outcome = asyncio.run(scenario())
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.CANCELLED
    assert LATE == ["cancelled"]
    assert host.invoke_sync("fx.echo", {"x": "a"}, run=run).failure.kind is (
        ToolFailureKind.CANCELLED)


def test_run_cancellation_abandons_a_sync_tool(host: Host) -> None:
    from fixture_tools import make_spec  # noqa: F401 - imported for the fixture module's side

    run = run_for(host)
    threading.Timer(0.05, run.cancellation.cancel).start()
    outcome = host.invoke_sync("fx.sleep", {"seconds": 0.15}, run=run)
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.CANCELLED
    time.sleep(0.2)
    assert host.pipeline.invocations.get(outcome.invocation_id).state is InvocationState.FAILED


# ------------------------------------------------------------------ steps 9, 11


def test_step_9_workspace_escape_is_a_validation_failure(host: Host) -> None:
    outcome = host.invoke_sync("fx.escape", {}, run=run_for(host))
    assert outcome.failure and outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert outcome.failure.detail == {"workspace": "absolute path"}


def test_step_9_an_unavailable_workspace_is_the_hosts_retryable_failure(host: Host) -> None:
    # Declared by no tool: the fixture tool has no reasons, and it is still not "undeclared".
    outcome = host.invoke_sync("fx.no_space", {}, run=run_for(host))
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.upstream_unavailable.workspace_unavailable"
    assert outcome.failure.kind is ToolFailureKind.UPSTREAM_UNAVAILABLE
    assert outcome.failure.retryable is True
    assert outcome.content == ("The workspace cannot be used right now (no space or no file "
                               "handles left). Try again later.")
    assert outcome.failure.detail == {"problem": "no space is left for the workspace"}


def test_step_11_trust_is_persisted_as_clamped(host: Host) -> None:
    outcome = host.invoke_sync("fx.untrusted", {"x": "a"}, run=run_for(host))
    assert outcome.output_trust is Trust.EXTERNAL_UNTRUSTED
    assert host.pipeline.invocations.get(outcome.invocation_id).output_trust == (
        "EXTERNAL_UNTRUSTED")


# ------------------------------------------------------------------ step 12: size


def test_within_the_limit_nothing_changes(host: Host) -> None:
    outcome = host.invoke_sync("fx.big", {"unit": "a", "count": 1000}, run=run_for(host))
    assert outcome.ok and outcome.content == "a" * 1000 and not outcome.truncated


def test_over_the_limit_the_model_gets_an_excerpt_and_the_whole_is_an_artifact(
    host: Host,
) -> None:
    outcome = host.invoke_sync("fx.big", {"unit": "é€", "count": 5000}, run=run_for(host))
    assert outcome.ok and outcome.truncated and outcome.structured is None
    assert len(outcome.content.encode()) <= 1000
    (ref,) = outcome.artifacts
    assert f"The whole output is artifact {ref['id']} ({ref['checksum']})" in outcome.content
    head, tail = outcome.content.split("\n[... ")[0], outcome.content.rsplit(". ...]\n", 1)[1]
    assert ("é€" * 5000).startswith(head) and ("é€" * 5000).endswith(tail)
    assert head and tail
    whole = json.loads(host.pipeline.artifacts.read(ref["id"]))
    assert whole == {"content": "é€" * 5000, "structured": {"echo": "x"}}
    record = host.pipeline.invocations.get(outcome.invocation_id)
    assert record.result_content == outcome.content and record.artifact_refs == (ref,)


def test_past_the_hard_ceiling_is_output_too_large_with_the_partial_artifactized(
    host: Host,
) -> None:
    count = 8 * 1024 * 1024 // 4 + 1
    outcome = host.invoke_sync("fx.big", {"unit": "abcd", "count": count}, run=run_for(host))
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.OUTPUT_TOO_LARGE
    (ref,) = outcome.artifacts
    assert ref["byte_count"] == 8 * 1024 * 1024
    assert host.pipeline.artifacts.read(ref["id"]) == (b"abcd" * count)[: 8 * 1024 * 1024]


# ------------------------------------------------------------------ parallel batches


def test_a_step_of_readers_runs_concurrently(host: Host) -> None:
    run = run_for(host)
    started = time.perf_counter()
    outcomes = asyncio.run(host.invoke_step(run, [ToolCall("fx.asleep", {"seconds": 0.3})] * 4))
    assert all(o.ok for o in outcomes)
    assert time.perf_counter() - started < 1.0  # four 0.3 s sleeps, together


def test_a_step_with_a_writer_runs_serially_in_the_models_order(host: Host) -> None:
    run = run_for(host, enabled_tools=["fx.echo", "fx.sleep_writer", "fx.asleep"])
    calls = [ToolCall("fx.asleep", {"seconds": 0.15}), ToolCall("fx.sleep_writer", {"seconds": 0}),
             ToolCall("fx.asleep", {"seconds": 0.15})]
    started = time.perf_counter()
    outcomes = asyncio.run(host.invoke_step(run, calls))
    assert time.perf_counter() - started >= 0.3
    records = {r.id: r for r in rows(host)}
    starts = [records[o.invocation_id].created_at for o in outcomes]
    assert starts == sorted(starts)


def test_a_thousand_concurrent_reads_lose_and_duplicate_no_row(host: Host) -> None:
    run = run_for(host)

    async def many() -> list[Any]:
        return list(await asyncio.gather(
            *(host.invoke("fx.echo", {"x": str(i)}, run=run) for i in range(1000))))

    outcomes = asyncio.run(many())
    assert sorted(o.content for o in outcomes) == sorted(str(i) for i in range(1000))
    records = rows(host)
    assert len(records) == 1000 and len({r.id for r in records}) == 1000
    assert {r.id for r in records} == {o.invocation_id for o in outcomes}


# ------------------------------------------------------------------ faults


def test_an_unexpected_exception_is_internal_with_detail_only_for_operators(host: Host) -> None:
    outcome = host.invoke_sync("fx.big", {"unit": "a", "count": -1}, run=run_for(host))
    assert outcome.ok  # "a" * -1 is "": a valid (empty) output, not a crash
    bad = host.invoke_sync("fx.big", {"unit": "a"}, run=run_for(host))
    assert bad.failure and bad.failure.reason_code == "tool.internal.unexpected"
    assert bad.content == "The tool failed unexpectedly."
    record = host.pipeline.invocations.get(bad.invocation_id)
    assert record.failure_detail == {"exception": "KeyError", "error": "'count'"}


@pytest.fixture
def json_logs(host: Host) -> Any:
    stream = io.StringIO()
    configure_logging(host.clock, level="debug", stream=stream, json=True)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    structlog.reset_defaults()


def test_each_step_logs_one_json_event_bound_to_the_invocation(host: Host, json_logs: Any) -> None:
    outcome = host.invoke_sync("fx.echo", {"x": "a"}, run=run_for(host))
    events = [e for e in json_logs() if e.get("invocation_id") == outcome.invocation_id]
    assert [e["step"] for e in events] == [1, 2, 3, 4, 5, 8, 10, 11, 12, 13]
    assert {e["run_id"] for e in events} == {events[0]["run_id"]}
    assert events[0]["timestamp"] == "2026-07-25T13:03:11.482913+00:00"  # from the Clock


def test_failure_detail_goes_to_logs_never_to_the_model(host: Host, json_logs: Any) -> None:
    outcome = host.invoke_sync("fx.big", {"unit": "a"}, run=run_for(host))
    (failed,) = [e for e in json_logs() if e["event"] == "pipeline.failed"]
    assert failed["detail"] == {"exception": "KeyError", "error": "'count'"}
    assert "count" not in outcome.content


def test_the_schema_holds_only_the_stores_tables(host: Host, closes: Closes) -> None:
    host.invoke_sync("fx.echo", {"x": "a"}, run=run_for(host))
    conn = closes(connect(host.data_dir / DATABASE_NAME))
    assert table_names(conn) == ["artifacts", "ended_logins", "schema_migrations",
                                 "tool_invocations", "tool_outputs"]
    assert fixture_tools.PLUGIN is PLUGIN


def test_a_lone_surrogate_in_arguments_is_a_validation_failure(host: Host) -> None:
    outcome = host.invoke_sync("fx.echo", {"x": "\ud800"}, run=run_for(host))
    assert outcome.failure and outcome.failure.reason_code == "tool.invalid_arguments.schema"
    assert host.pipeline.invocations.get(outcome.invocation_id).state is InvocationState.FAILED


HALVES = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.5}},
          "required": [], "additionalProperties": False}


def test_a_number_past_a_floats_range_is_refused_on_its_row(tmp_path: Path) -> None:
    # fastjsonschema divides by a float multipleOf: 10**400 raised OverflowError out of the
    # pipeline with no row, from arguments (any MCP client can send it) and from an output.
    tools = [Tool(make_spec(name="fx.halves", input_schema=HALVES, output_schema=HALVES),
                  call=lambda arguments, context: ToolOutput(
                      content="", structured={"x": int(arguments["x"]) * 10**400}))]
    with host_for({"fx-dist": make_plugin(tools=tools)}, data_dir=tmp_path) as host:
        refused = host.invoke_sync("fx.halves", {"x": 10**400}, run=run_for(host))
        assert refused.failure is not None
        assert (refused.failure.reason_code, refused.failure.detail) == (
            "tool.invalid_arguments.schema",
            {"problem": "a number in the arguments cannot be checked against the schema "
                        "(too large, NaN or an infinity)"})
        # NaN fails int() in the same division: a ValueError, the model's number too.
        not_a_number = host.invoke_sync("fx.halves", {"x": float("nan")}, run=run_for(host))
        assert not_a_number.failure is not None
        assert not_a_number.failure.reason_code == "tool.invalid_arguments.schema"
        invalid = host.invoke_sync("fx.halves", {"x": 2}, run=run_for(host))
        assert invalid.failure is not None
        assert invalid.failure.reason_code == "tool.output_invalid.schema"
        states = {r.id: (r.state, r.reason_code) for r in rows(host)}
        assert states == {
            refused.invocation_id: (InvocationState.FAILED, "tool.invalid_arguments.schema"),
            not_a_number.invocation_id: (InvocationState.FAILED,
                                         "tool.invalid_arguments.schema"),
            invalid.invocation_id: (InvocationState.FAILED, "tool.output_invalid.schema")}


COUNTS = {"type": "object", "properties": {
    "limit": {"type": "integer", "minimum": 1},
    "maybe": {"type": ["integer", "null"]},
    "sizes": {"type": "array", "items": {"type": "integer"}, "maxItems": 4},
    "inner": {"type": "object", "properties": {"n": {"type": "integer"}},
              "additionalProperties": False},
    "ratio": {"type": "number"},
}, "required": [], "additionalProperties": False}


OUT_ECHO = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
            "additionalProperties": False}


def test_a_whole_number_float_where_the_schema_says_integer_reaches_the_body_as_an_int(
        tmp_path: Path) -> None:
    # JSON Schema's integer admits 3.0: toolhost-people sliced rows[:3.0] and failed
    # tool.internal.unexpected with TypeError (D404).
    seen: list[dict[str, Any]] = []

    def body(arguments: Any, context: Any) -> ToolOutput:
        seen.append(dict(arguments))
        return ToolOutput(content="", structured={"echo": "ok"})

    out = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
           "additionalProperties": False}
    tools = [Tool(make_spec(name="fx.counts", input_schema=COUNTS, output_schema=out),
                  call=body)]
    sent = {"limit": 3.0, "maybe": 2.0, "sizes": [1.0, 2, 3.0], "inner": {"n": 4.0},
            "ratio": 5.0}
    with host_for({"fx-dist": make_plugin(tools=tools)}, data_dir=tmp_path) as host:
        as_floats = host.invoke_sync("fx.counts", sent, run=run_for(host))
        as_ints = host.invoke_sync("fx.counts", {
            "limit": 3, "maybe": 2, "sizes": [1, 2, 3], "inner": {"n": 4}, "ratio": 5.0},
            run=run_for(host))
        assert as_floats.ok and as_ints.ok
        digests = {r.argument_digest for r in rows(host)}
    assert len(digests) == 1  # one call, however the model spelled its numbers
    assert [[type(v).__name__ for v in (a["limit"], a["maybe"], *a["sizes"], a["inner"]["n"],
                                        a["ratio"])] for a in seen] == [
        ["int"] * 6 + ["float"]] * 2
    assert sent == {"limit": 3.0, "maybe": 2.0, "sizes": [1.0, 2, 3.0], "inner": {"n": 4.0},
                    "ratio": 5.0}
    assert type(sent["sizes"][0]) is float and type(sent["inner"]["n"]) is float


def test_a_call_paused_with_whole_number_floats_before_d404_is_approved_and_runs(
        tmp_path: Path, closes: Closes) -> None:
    # Its digest was taken over 3.0; step 4 now hands the body 3, whose digest differs: the
    # approval ended digest_mismatch, the "row was changed" alarm, and the call never ran.
    seen: list[Any] = []
    gated = Tool(make_spec(name="fx.counted", input_schema=COUNTS, output_schema=OUT_ECHO,
                           side_effect=SideEffect.EXTERNAL_WRITE, risk=Risk.HIGH,
                           idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False),
                 call=lambda arguments, context: (seen.append(dict(arguments)) or ToolOutput(
                     content="", structured={"echo": "ok"})))
    with host_for({"fx-dist": make_plugin(tools=[gated])}, data_dir=tmp_path) as host:
        old, tampered = (host.invoke_sync("fx.counted", {"limit": n}, run=run_for(host))
                         for n in (3, 4))
        conn = closes(connect(host.data_dir / DATABASE_NAME))
        for paused, stored in ((old, {"limit": 3.0}), (tampered, {"limit": 5.0})):
            # As the tree before D404 stored it: the arguments and the digest over them.
            digest = argument_digest("fx.counted", "1.0.0", {"limit": 3.0})
            conn.execute("UPDATE tool_invocations SET arguments = ?, argument_digest = ? "
                         "WHERE id = ?", (json.dumps(stored), digest, paused.invocation_id))
        conn.commit()
        assert host.approve_sync(old.invocation_id, "ops").ok
        changed = host.approve_sync(tampered.invocation_id, "ops")
        assert changed.failure and changed.failure.reason_code == "tool.internal.digest_mismatch"
    assert seen == [{"limit": 3}] and type(seen[0]["limit"]) is int


def test_a_host_fault_before_policy_still_writes_the_row(
        host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("a fault of the host's own")

    monkeypatch.setattr(steps, "check_scopes", broken)
    outcome = host.invoke_sync("fx.echo", {"x": "a"}, run=run_for(host))
    assert outcome.failure and outcome.failure.reason_code == "tool.internal.unexpected"
    (row,) = rows(host)
    assert (row.id, row.state, row.reason_code) == (
        outcome.invocation_id, InvocationState.FAILED, "tool.internal.unexpected")


def test_a_refusals_detail_is_stored_as_a_row_can_hold_it(
        host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    # A step 1-4 refusal's detail went to the row raw, as D397 had mended for step 13 only:
    # a lone surrogate in the exception's text (a file name) failed the write, and the call
    # was answered as a record-store outage with no row.
    def broken(*args: Any) -> None:
        raise RuntimeError("cannot read caf\udce9.txt")

    monkeypatch.setattr(steps, "check_scopes", broken)
    outcome = host.invoke_sync("fx.echo", {"x": "a"}, run=run_for(host))
    assert outcome.failure and outcome.failure.reason_code == "tool.internal.unexpected"
    (row,) = rows(host)
    assert (row.failure_detail or {})["error"] == "cannot read caf\\udce9.txt"


def test_a_host_fault_after_the_tool_ran_still_finishes_the_row(host: Host) -> None:
    run = run_for(host)
    assert host.invoke_sync("fx.echo", {"x": "warm"}, run=run).ok  # the stores exist now
    blobs = host.data_dir / "artifacts" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    blobs.rename(host.data_dir / "blobs-aside")
    blobs.write_bytes(b"not a directory")  # the artifact store's disk is now unusable
    outcome = host.invoke_sync("fx.big", {"unit": "a", "count": 5000}, run=run)
    assert outcome.failure and outcome.failure.reason_code == "tool.internal.unexpected"
    record = host.pipeline.invocations.get(outcome.invocation_id)
    assert record.state is InvocationState.FAILED and record.finished_at is not None


def test_an_approved_execution_can_be_cancelled_by_the_caller(tmp_path: Path,
                                                              closes: Closes) -> None:
    from toolhost._model.runs import CancellationEvent

    policy = Policy.configured({(SideEffect.NONE, Risk.LOW): PolicyAction.REQUIRE_APPROVAL})
    h = closes(host_for({"fx-dist": PLUGIN}, data_dir=tmp_path, policy=policy))
    paused = h.invoke_sync("fx.asleep", {"seconds": 3}, run=h.start_run())
    cancellation = CancellationEvent()

    async def scenario() -> Any:
        task = asyncio.ensure_future(
            h.pipeline.approve(paused.invocation_id, "ops", cancellation=cancellation))
        await asyncio.sleep(0.05)
        cancellation.cancel()
        return await task

    outcome = asyncio.run(scenario())
    assert outcome.failure and outcome.failure.kind is ToolFailureKind.CANCELLED
    assert h.pipeline.invocations.get(paused.invocation_id).state is InvocationState.FAILED


# ------------------------------------------------------------------ step 12 off the loop


def test_step_12_runs_off_the_event_loop(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    # The big output's artifact write is held until the small call has finished. With step 12
    # on the event loop, the hold would stall the loop (the small call could not even start)
    # until the bounded wait gave up, and the small call would finish after the big one.
    entered, release = threading.Event(), threading.Event()
    store = host.pipeline.artifacts
    put_or_reuse = store.put_or_reuse

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(timeout=5)
        return put_or_reuse(*args, **kwargs)

    monkeypatch.setattr(store, "put_or_reuse", held)
    run = run_for(host)

    async def scenario() -> tuple[Any, bool, Any]:
        big = asyncio.ensure_future(
            host.invoke("fx.big", {"unit": "a", "count": 200_000}, run=run))
        assert await asyncio.to_thread(entered.wait, 5)
        small = await host.invoke("fx.echo", {"x": "small"}, run=run)
        still_held = not big.done() and not release.is_set()
        release.set()
        return small, still_held, await big

    small, still_held, big = asyncio.run(scenario())
    assert small.ok and small.content == "small"
    assert still_held  # the small call finished while the big output was being artifactized
    assert big.ok and big.truncated and len(big.artifacts) == 1


@pytest.mark.parametrize(("text", "off_loop"), [
    ("a" * 200_000, False),  # ASCII within the limit: nothing to excerpt, its encode a copy
    ("é" * 200_000, True),  # the encode is real work
    ("a" * 1_100_000, True),  # over the limit: excerpt and artifact
])
def test_step_12_hops_to_a_thread_only_for_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, off_loop: bool,
) -> None:
    from conftest import make_plugin, make_spec

    from toolhost import Tool, ToolOutput
    from toolhost._pipeline import steps

    tool = Tool(spec=make_spec(name="fx.read", maximum_output_bytes=1024 * 1024,
                               input_schema={"type": "object", "additionalProperties": False},
                               output_schema={
                                   "type": "object", "additionalProperties": False,
                                   "properties": {"content": {"type": "string"},
                                                  "bytes": {"type": "integer"}}}),
                call=lambda arguments, context: ToolOutput(
                    structured={"content": text, "bytes": len(text)}, content=text))
    hops: list[Any] = []
    to_thread = asyncio.to_thread

    async def counted(function: Any, *args: Any) -> Any:
        hops.append(function)
        return await to_thread(function, *args)

    monkeypatch.setattr(steps.asyncio, "to_thread", counted)
    with host_for({"fx-dist": make_plugin(tools=[tool])}, data_dir=tmp_path) as h:
        outcome = h.invoke_sync("fx.read", {}, run=h.start_run())
    assert outcome.ok and outcome.truncated is (len(text) > 1024 * 1024)
    assert (steps.limit_output in hops) is off_loop


def test_large_integers_count_at_their_length_against_the_limit(tmp_path: Path) -> None:
    # Ten 1,000-digit integers are 10 KB of JSON: over a 4 KiB limit, however few nodes.
    from conftest import make_plugin, make_spec

    from toolhost import Tool, ToolOutput

    tool = Tool(spec=make_spec(name="fx.digits", maximum_output_bytes=4096,
                               input_schema={"type": "object", "additionalProperties": False},
                               output_schema={
                                   "type": "object", "additionalProperties": False,
                                   "properties": {"n": {"type": "array",
                                                        "items": {"type": "integer"}}}}),
                call=lambda arguments, context: ToolOutput(structured={"n": [10**999] * 10},
                                                           content="ten numbers"))
    with host_for({"fx-dist": make_plugin(tools=[tool])}, data_dir=tmp_path) as h:
        outcome = h.invoke_sync("fx.digits", {}, run=h.start_run())
    assert outcome.ok and outcome.truncated and len(outcome.artifacts) == 1


@pytest.mark.parametrize(("idempotency", "code", "retryable"), [
    (Idempotency.IDEMPOTENT, "tool.upstream_unavailable.artifact_store", True),
    (Idempotency.NON_IDEMPOTENT,
     "tool.upstream_unavailable.artifact_store_may_have_taken_effect", False),
])
def test_an_artifact_store_outage_is_retryable_only_for_a_tool_safe_to_repeat(
    idempotency: Idempotency, code: str, retryable: bool
) -> None:
    # A generation call whose (charged) request was made, then whose artifact could not be
    # stored, must not be retried blindly; an idempotent export may be.
    from toolhost._model.artifacts import ArtifactStoreUnavailable
    from toolhost.testing import Harness

    def body(arguments: Any, context: Any) -> ToolOutput:
        raise ArtifactStoreUnavailable("the bucket s3://b/p did not answer a put")

    spec = make_spec(name="fx.store", idempotency=idempotency, allow_parallel=False)
    with Harness.over({"fx-dist": make_plugin(tools=[Tool(spec, call=body)])}) as h:
        outcome = h.invoke("fx.store")
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (code, retryable)
    assert "s3://" not in outcome.content
