"""An approval (or a recovery's rerun) that cannot go on: the row is finished or left as it
was, never stuck where nothing but one command moves it.

- The run's workspace cannot be opened when an approved call starts (no file handles left, a
  workspaces directory gone or made unusable): the row was ``running`` already, and the error
  escaped ``approve`` with it left ``running`` under the live process; a second approve
  answered "running", deny refused, recover said "alive". Now the call ends
  ``workspace_unavailable`` (retryable, nothing ran) on its finished row. A recovery's rerun
  is the same.
- The record store refuses the approval's write: the approval was two writes, awaiting →
  approved → running, and a failure between them left the row ``approved``, which only
  ``toolhost approve ID`` would move (the inbox, a repeated MCP call and deny all refused it).
  Now it is one write: refused, the row is still awaiting approval for any of them, and the
  approve says in one line that the record store refused it.

Faults are real: a file where the workspaces directory belongs; a SQLite trigger that aborts
the row's move to ``running``, as a database refusing the write does.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import make_plugin, make_spec
from installed import install_fake_plugin
from test_cli_approvals import WRITER

from toolhost import Idempotency, Risk, SideEffect, Tool, ToolExecutionContext, ToolOutput
from toolhost._adapters.sqlite_db import DATABASE_NAME
from toolhost._model import host_reasons
from toolhost._model.errors import ToolhostError
from toolhost._model.invocations import InvocationState
from toolhost._pipeline.approvals import ApprovalNotRecorded
from toolhost._pipeline.recovery import RecoveryAction
from toolhost.testing import Harness, run_toolhost

SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"],
          "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}


class Sent:
    """A body that records each run (the effect an approved call has)."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def __call__(self, arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        self.runs.append(arguments["x"])
        return ToolOutput(structured={"echo": arguments["x"]}, content="sent")


@pytest.fixture
def sent() -> Sent:
    return Sent()


@pytest.fixture
def harness(tmp_path: Path, sent: Sent) -> Iterator[Harness]:
    """fx.send needs an approval (an external write, high risk: the default policy's
    cell); fx.put is idempotent and runs at once."""
    send = make_spec(name="fx.send", input_schema=SCHEMA, output_schema=OUT,
                     side_effect=SideEffect.EXTERNAL_WRITE, risk=Risk.HIGH,
                     idempotency=Idempotency.NON_IDEMPOTENT, allow_parallel=False)
    put = make_spec(name="fx.put", input_schema=SCHEMA, output_schema=OUT,
                    side_effect=SideEffect.WORKSPACE_WRITE, risk=Risk.LOW,
                    idempotency=Idempotency.IDEMPOTENT, allow_parallel=False)
    with Harness.over({"fx-dist": make_plugin(tools=[Tool(send, call=sent),
                                                     Tool(put, call=sent)])},
                      data_dir=tmp_path / "data") as h:
        yield h


@contextlib.contextmanager
def workspaces_unusable(data_dir: Path) -> Iterator[None]:
    """A file where the host's workspaces directory belongs: no run's workspace opens."""
    workspaces = data_dir / "workspaces"
    moved = data_dir / "workspaces.away"
    if workspaces.exists():
        workspaces.rename(moved)
    workspaces.write_text("not a directory")
    try:
        yield
    finally:
        workspaces.unlink()
        if moved.exists():
            moved.rename(workspaces)


# ---------------------------------------------------------------------------- the workspace


def test_an_approved_call_whose_workspace_cannot_be_opened_ends_on_its_row(
        harness: Harness, sent: Sent, tmp_path: Path) -> None:
    paused = harness.invoke("fx.send", x="wire")
    assert paused.status.value == "awaiting_approval"
    invocation_id = str(paused.invocation_id)
    with workspaces_unusable(tmp_path / "data"):
        outcome = harness.approve(invocation_id, "alice")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == host_reasons.WORKSPACE_UNAVAILABLE
    assert outcome.failure.retryable
    row = harness.record(invocation_id)
    assert (row.state, row.reason_code, row.approver) == (
        InvocationState.FAILED, host_reasons.WORKSPACE_UNAVAILABLE, "alice")
    assert row.failure_detail == {"problem": "the run's workspace could not be opened (EEXIST)"}
    assert sent.runs == []
    # Decided and finished: a second approve hands back the row, and nothing is left running.
    assert harness.approve(invocation_id, "alice").failure == outcome.failure
    assert harness.host.recover(rerun=False) == []


def test_a_rerun_whose_workspace_cannot_be_opened_ends_on_its_row(
        harness: Harness, sent: Sent, tmp_path: Path) -> None:
    # A row whose owner is gone (recorded before owners were), of an idempotent tool: recovery
    # takes it over and runs it again here, in a workspace it cannot open.
    done = harness.invoke("fx.put", x="k")
    store = harness.host.pipeline.invocations
    finished = harness.record(str(done.invocation_id))
    left = attrs.evolve(finished, id="left-running", state=InvocationState.RUNNING, owner=None,
                        finished_at=None, result_structured=None, result_content=None,
                        output_trust=None)
    store.insert(left)
    with workspaces_unusable(tmp_path / "data"):
        (recovered,) = harness.host.recover(rerun=True)
    assert recovered.action is RecoveryAction.RERUN
    assert recovered.outcome is not None and recovered.outcome.failure is not None
    assert recovered.outcome.failure.reason_code == host_reasons.WORKSPACE_UNAVAILABLE
    row = harness.record("left-running")
    assert (row.state, row.reason_code) == (InvocationState.FAILED,
                                            host_reasons.WORKSPACE_UNAVAILABLE)
    assert sent.runs == ["k"]  # the first call's run alone


# ---------------------------------------------------------------------------- the store


@contextlib.contextmanager
def running_refused(data_dir: Path) -> Iterator[None]:
    """The record's database refuses to let any row become ``running`` (a trigger that
    aborts the write, as a database that cannot take it does); every other write goes."""
    db = sqlite3.connect(data_dir / DATABASE_NAME)
    try:
        db.execute("CREATE TRIGGER refuse_running BEFORE UPDATE OF state ON tool_invocations "
                   "WHEN NEW.state = 'running' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        db.commit()
        yield
    finally:
        db.execute("DROP TRIGGER IF EXISTS refuse_running")
        db.commit()
        db.close()


def refused_approval(harness: Harness, tmp_path: Path) -> str:
    """A paused fx.send whose approval the store refused: its invocation id."""
    invocation_id = str(harness.invoke("fx.send", x="wire").invocation_id)
    with running_refused(tmp_path / "data"), pytest.raises(ApprovalNotRecorded) as refused:
        harness.approve(invocation_id, "alice")
    assert isinstance(refused.value, ToolhostError)  # the CLI's one line, the inbox's "again"
    assert str(refused.value) == (
        f"invocation {invocation_id} was not approved: the record store failed "
        "(IntegrityError); it still awaits approval, approve it again")
    return invocation_id


def test_an_approval_the_store_refuses_leaves_the_call_awaiting_approval(
        harness: Harness, sent: Sent, tmp_path: Path) -> None:
    invocation_id = refused_approval(harness, tmp_path)
    row = harness.record(invocation_id)
    # As it was: what the inbox offers both buttons for, a repeated MCP call asks about again,
    # and pending lists.
    assert (row.state, row.approver, row.decided_at) == (
        InvocationState.AWAITING_APPROVAL, None, None)
    store = harness.host.pipeline.invocations
    assert [p.id for p in store.pending(limit=10)] == [invocation_id]
    assert sent.runs == []
    # Approved again, once the store takes it: it runs once, approved by who approved it.
    outcome = harness.approve(invocation_id, "alice")
    assert outcome.status.value == "succeeded"
    assert sent.runs == ["wire"]
    assert harness.record(invocation_id).approver == "alice"


def test_a_call_whose_approval_the_store_refused_can_be_denied(
        harness: Harness, sent: Sent, tmp_path: Path) -> None:
    invocation_id = refused_approval(harness, tmp_path)
    assert harness.deny(invocation_id, "changed my mind").status.value == "denied"
    row = harness.record(invocation_id)
    assert (row.state, row.denial_reason) == (InvocationState.DENIED, "changed my mind")
    assert sent.runs == []


def test_a_row_left_approved_is_run_by_the_next_approve_with_its_approver(
        harness: Harness, sent: Sent) -> None:
    # A toolhost that wrote the approval apart (awaiting -> approved, then -> running) and
    # stopped between the two: D18's "picked up by the next approve", unchanged.
    invocation_id = str(harness.invoke("fx.send", x="wire").invocation_id)
    store = harness.host.pipeline.invocations
    assert store.transition(invocation_id, expected={InvocationState.AWAITING_APPROVAL},
                            to=InvocationState.APPROVED, approver="alice",
                            decided_at=harness.record(invocation_id).created_at)
    assert harness.approve(invocation_id, "bob").status.value == "succeeded"
    assert sent.runs == ["wire"]
    assert harness.record(invocation_id).approver == "alice"


def test_toolhost_approve_says_in_one_line_that_the_store_refused_it(tmp_path: Path) -> None:
    # Before: the database's own exception, a traceback, and the row left `approved`.
    site, data = tmp_path / "site", tmp_path / "data"
    install_fake_plugin(site, "fake-writer", "fake_writer", WRITER)

    def toolhost(*args: str) -> subprocess.CompletedProcess[str]:
        return run_toolhost(*args, data_dir=data, plugins="fake-writer", path=[site])

    paused = toolhost("call", "fxw.external_write", "--args", '{"destination": "x"}')
    assert paused.returncode == 3, paused.stderr
    invocation_id = paused.stdout.strip()
    with running_refused(data):
        refused = toolhost("approve", invocation_id)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"toolhost: invocation {invocation_id} was not approved: the record store failed "
        "(IntegrityError); it still awaits approval, approve it again\n")
    assert toolhost("pending").stdout.split()[0] == invocation_id
    approved = toolhost("approve", invocation_id)
    assert (approved.returncode, approved.stdout) == (0, "recorded x\n")
