"""A call left ``running`` by a process that is gone, recovered once its run's deadline has
passed: its body had started, so it ends ``tool.internal.interrupted`` ("may or may not have
taken effect", D85), not retryable, and keeps the started time and owner of the process that
ran it; it is not taken over and refused as a call that never ran. Real host and SQLite store,
the fixture tools of ``test_run_deadline_passed``; the clock is moved past the deadline."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess

import pytest
from test_run_deadline_passed import (  # noqa: F401 - clock and harness: fixtures, by name
    DEADLINE_AT,
    RAN,
    SettableClock,
    clock,
    harness,
)

from toolhost._model import host_reasons as core_messages
from toolhost._model.invocations import InvocationRecord, InvocationState
from toolhost._pipeline.recovery import RecoveryAction
from toolhost.testing import DEFAULT_INSTANT, Harness

STARTED_AT = DEFAULT_INSTANT + dt.timedelta(seconds=5)


def _left_running(h: Harness, name: str) -> InvocationRecord:
    """The row a process killed in the middle of ``name``'s body leaves: ``running``, owned by
    a pid no process has, in a run whose deadline is ``DEADLINE_AT``."""
    pipeline = h.host.pipeline
    registered = h.host.registry.resolve(name, None)
    prepared = pipeline.prepare(registered, {"path": "again.txt"})
    dead = subprocess.Popen(["true"])  # a pid no process has once it is reaped
    dead.wait()
    record = InvocationRecord(
        id="b" * 32, run_id="r9", principal_id="tester", scopes=(),
        tool_name=prepared.tool, tool_version=prepared.version, arguments=prepared.arguments,
        argument_digest=prepared.digest, state=InvocationState.RUNNING,
        policy=pipeline.decide(registered).to_json(), created_at=DEFAULT_INSTANT,
        started_at=STARTED_AT, owner={"host": socket.gethostname(), "pid": dead.pid},
        run_deadline=DEADLINE_AT)
    pipeline.invocations.insert(record)
    return record


@pytest.mark.parametrize("rerun", [True, False], ids=["recover", "no-rerun"])
@pytest.mark.parametrize("name", ["fx.idempotent", "fx.read_only"])
def test_a_killed_call_recovered_after_its_runs_deadline_ends_interrupted_as_it_ran(
    harness: Harness, clock: SettableClock, name: str, rerun: bool,  # noqa: F811
) -> None:
    left = _left_running(harness, name)
    clock.at = DEADLINE_AT + dt.timedelta(seconds=1)
    (recovered,) = harness.host.recover(rerun=rerun)
    assert recovered.action is RecoveryAction.FAILED, recovered
    owner = left.owner
    assert owner is not None
    assert recovered.reason == (
        f"pid {owner['pid']} on {owner['host']} is gone; its run's deadline passed: failed "
        "tool.internal.interrupted (it may or may not have taken effect)")
    assert RAN == []  # not run again
    row = harness.record(left.id)
    assert (row.state, row.reason_code, row.retryable) == (
        InvocationState.FAILED, core_messages.INTERRUPTED, False)
    # The process that ran the body, and when it started, stay on the row.
    assert (row.started_at, row.owner) == (STARTED_AT, left.owner)
    assert row.failure_detail == {"owner": left.owner,
                                  "not_run_again": "its run's deadline passed"}
    assert row.finished_at == clock.at


def test_a_killed_call_recovered_before_its_runs_deadline_still_runs_again(
    harness: Harness, clock: SettableClock,  # noqa: F811
) -> None:
    left = _left_running(harness, "fx.idempotent")
    clock.at = DEADLINE_AT - dt.timedelta(seconds=1)
    (recovered,) = harness.host.recover()
    assert recovered.action is RecoveryAction.RERUN, recovered
    assert RAN == ["again.txt"]
    assert harness.record(left.id).state is InvocationState.SUCCEEDED
