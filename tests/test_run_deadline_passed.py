"""A call made after its run's deadline passed runs nothing (D222's rule, at invoke): it ends
``tool.timeout.run_deadline_passed``, not retryable, on one ``failed`` row, whatever its
idempotency, and a call that would need an approval is not paused for one. A deadline that
passes while the body runs is still a timeout (``tool.timeout.deadline``). Real host, real
SQLite, fixture tools; the run's deadline is moved past with the host's clock, as a later
``toolhost call --run R`` finds it, and the CLI through a real child process."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec, make_tool
from test_cli_runs import sleep_past

from toolhost import Idempotency, OutcomeStatus, Risk, SideEffect, ToolExecutionContext, ToolOutput
from toolhost._model import host_reasons as core_messages
from toolhost._model.invocations import InvocationState
from toolhost._testing.cli import run_toolhost
from toolhost.testing import DEFAULT_INSTANT, Harness

#: Every body that started, so a test can tell that a call did not run.
RAN: list[str] = []

PATH_IN = {"type": "object", "properties": {"path": {"type": "string", "maxLength": 64}},
           "required": ["path"], "additionalProperties": False}
TEXT_OUT = {"type": "object", "properties": {"text": {"type": "string"}},
            "required": ["text"], "additionalProperties": False}


class SettableClock:
    """The host's clock, moved by the test."""

    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def now(self) -> dt.datetime:
        return self.at


def _touch(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    RAN.append(arguments["path"])
    context.workspace.write(arguments["path"], b"x")
    return ToolOutput(structured={"text": arguments["path"]}, content=arguments["path"])


def _waits(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
    """Starts, then waits for its call's cancellation (its deadline) for as long as it may."""
    RAN.append(arguments["path"])
    context.cancellation.wait(30)
    return ToolOutput(structured={"text": "late"}, content="late")


def _writer(name: str, idempotency: Idempotency, risk: Risk = Risk.LOW, call: Any = _touch,
            timeout_s: float = 10) -> Any:
    return make_tool(make_spec(
        name=name, input_schema=PATH_IN, output_schema=TEXT_OUT,
        side_effect=SideEffect.WORKSPACE_WRITE, risk=risk, idempotency=idempotency,
        allow_parallel=idempotency is Idempotency.READ_ONLY, timeout_s=timeout_s), call=call)


#: One WORKSPACE_WRITE/LOW tool (the default policy allows it) per idempotency class.
ALLOWED = {
    "fx.read_only": Idempotency.READ_ONLY,
    "fx.idempotent": Idempotency.IDEMPOTENT,
    "fx.conditional": Idempotency.CONDITIONALLY_IDEMPOTENT,
    "fx.once": Idempotency.NON_IDEMPOTENT,
}
PLUGIN = make_plugin(("fx",), [
    *(_writer(name, idempotency) for name, idempotency in ALLOWED.items()),
    # WORKSPACE_WRITE/HIGH: the default policy asks for an approval.
    _writer("fx.gated", Idempotency.NON_IDEMPOTENT, Risk.HIGH),
    _writer("fx.waits_read_only", Idempotency.READ_ONLY, call=_waits),
    _writer("fx.waits_once", Idempotency.NON_IDEMPOTENT, call=_waits),
])


#: The deadline of the runs ``_past_its_deadline`` starts.
DEADLINE_AT = DEFAULT_INSTANT + dt.timedelta(seconds=60)


@pytest.fixture
def clock() -> SettableClock:
    return SettableClock(DEFAULT_INSTANT)


@pytest.fixture
def harness(tmp_path: Path, clock: SettableClock) -> Iterator[Harness]:
    RAN.clear()
    with Harness.over({"toolhost-fx": PLUGIN}, clock=clock, data_dir=tmp_path / "data") as h:
        yield h


def _past_its_deadline(h: Harness, clock: SettableClock, run_id: str = "r1") -> Any:
    """Run ``run_id`` started with a 60 s deadline, then taken up again 61 s later, as the
    next ``toolhost call --run`` does: the run keeps its earlier deadline, now passed. The
    file ``before.txt`` was written in its workspace before the deadline."""
    first = h.start_run(run_id=run_id, timeout_s=60)
    assert h.call("fx.idempotent", {"path": "before.txt"}, run=first).ok
    RAN.clear()
    clock.at = DEFAULT_INSTANT + dt.timedelta(seconds=61)
    late = h.start_run(run_id=run_id)
    assert late.deadline_at == DEADLINE_AT
    return late


def _assert_ended_unrun(h: Harness, outcome: Any) -> None:
    assert outcome.status is OutcomeStatus.FAILED, outcome
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (
        core_messages.RUN_DEADLINE_PASSED, False)
    assert outcome.content == core_messages.MESSAGES[core_messages.RUN_DEADLINE_PASSED]
    assert RAN == []
    row = h.record(str(outcome.invocation_id))
    assert (row.state, row.reason_code, row.retryable) == (
        InvocationState.FAILED, core_messages.RUN_DEADLINE_PASSED, False)
    assert row.failure_detail == {"run_deadline": DEADLINE_AT.isoformat()}
    assert row.finished_at is not None


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_a_call_after_the_runs_deadline_ends_unrun_and_not_retryable(
    harness: Harness, clock: SettableClock, name: str,
) -> None:
    run = _past_its_deadline(harness, clock)
    rows_before = len(harness.host.pipeline.invocations.list())
    outcome = harness.call(name, {"path": "late.txt"}, run=run)
    _assert_ended_unrun(harness, outcome)
    # Exactly one more row, and none left running.
    rows = harness.host.pipeline.invocations.list()
    assert len(rows) == rows_before + 1
    assert not [r for r in rows if r.state is InvocationState.RUNNING]
    harness.end_run(run)


@pytest.mark.parametrize("hold", [False, True], ids=["pause", "asked-within-the-call"])
def test_a_call_that_needs_an_approval_after_the_runs_deadline_is_not_paused(
    harness: Harness, clock: SettableClock, hold: bool,
) -> None:
    run = _past_its_deadline(harness, clock)
    outcome = harness.call("fx.gated", {"path": "late.txt"}, run=run, hold=hold)
    _assert_ended_unrun(harness, outcome)
    row = harness.record(str(outcome.invocation_id))
    assert (row.started_at, row.approver, row.arguments) == (None, None, {"path": "late.txt"})
    assert row.argument_digest  # the call as step 4 prepared it, with its policy decision
    assert row.policy is not None and row.policy["action"] == "approval"
    assert not [r for r in harness.host.pipeline.invocations.list()
                if r.state is InvocationState.AWAITING_APPROVAL]
    # Not a pause: the run's workspace was not discarded.
    assert [e.path for e in run.workspace.listdir().entries] == ["before.txt"]
    harness.end_run(run)


@pytest.mark.parametrize(("name", "code"), [
    ("fx.waits_read_only", core_messages.DEADLINE),
    ("fx.waits_once", core_messages.DEADLINE_MAY_HAVE_TAKEN_EFFECT),
])
def test_a_run_deadline_reached_while_the_body_runs_is_still_a_timeout(
    harness: Harness, name: str, code: str,
) -> None:
    # Not retryable: a retry in the run would end run_deadline_passed
    # (test_body_cut_off_by_run_deadline.py).
    run = harness.start_run(timeout_s=0.5)
    started = time.monotonic()
    outcome = harness.call(name, {"path": "slow"}, run=run)
    assert time.monotonic() - started < 25  # stopped at the run's deadline, not the body's wait
    assert RAN == ["slow"]
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable) == (code, False)
    harness.end_run(run)


def test_the_cli_ends_a_call_after_the_named_runs_deadline_unrun(tmp_path: Path) -> None:
    data = tmp_path / "d"
    plugins = "toolhost-math,toolhost-sandbox,toolhost-workspace"

    def call(name: str, arguments: Mapping[str, Any], *extra: str) -> Any:
        return run_toolhost("call", name, "--args", json.dumps(arguments), "--run", "r1",
                            "--json", *extra, data_dir=data, plugins=plugins)

    # Room for the command's start-up, which the deadline counts (D518); then past it.
    first = call("math.calculate", {"expression": "1+1"}, "--timeout", "5")
    assert first.returncode == 0, first.stderr
    shown = run_toolhost("show", json.loads(first.stdout)["invocation_id"], "--json",
                         data_dir=data, plugins=plugins)
    sleep_past(json.loads(shown.stdout)["run_deadline"])
    for _ in range(2):  # the same answer each time: a retry is useless
        late = call("math.calculate", {"expression": "1+1"})
        assert late.returncode == 1, late.stderr
        outcome = json.loads(late.stdout)
        assert (outcome["status"], outcome["reason_code"], outcome["retryable"]) == (
            "failed", "tool.timeout.run_deadline_passed", False)
    # A command that would need an approval is not left waiting for one (exit 3) either.
    gated = call("sandbox.run_command", {"command": "touch ran"})
    assert gated.returncode == 1, gated.stderr
    outcome = json.loads(gated.stdout)
    assert (outcome["status"], outcome["reason_code"], outcome["retryable"]) == (
        "failed", "tool.timeout.run_deadline_passed", False)
    shown = run_toolhost("show", outcome["invocation_id"], "--json", data_dir=data,
                         plugins=plugins)
    assert json.loads(shown.stdout)["state"] == "failed"
    assert run_toolhost("runs", "end", "r1", data_dir=data, plugins=plugins).returncode == 0
