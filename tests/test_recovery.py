"""What survives a kill, a pause and a failing database.

- A process killed with SIGKILL in the middle of a call leaves its row ``running``, owned by
  a process that is gone; ``recover`` settles it: a NON_IDEMPOTENT or CONDITIONALLY_IDEMPOTENT
  call ends ``tool.internal.interrupted`` and never runs again, an IDEMPOTENT or READ_ONLY one
  runs again here. A row whose owner is alive is left alone. (Real processes, really killed.)
- The workspace is discarded at a pause: a run that goes on after it starts from an empty one.
- The invocation store failing in the middle of a call never escapes ``Pipeline.invoke``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec

from toolhost import Idempotency, OutcomeStatus, Risk, SideEffect, Tool, ToolOutput
from toolhost._composition import Host
from toolhost._model.invocations import InvocationState
from toolhost._pipeline.approvals import InvocationStateError
from toolhost._pipeline.policy import Policy, PolicyAction
from toolhost._pipeline.recovery import RecoveryAction
from toolhost.testing import Harness, host_for

HERE = Path(__file__).resolve().parent

#: Called by ``rx.hook`` with its arguments: what a test does in the middle of a call.
HOOK: list[Callable[[Mapping[str, Any]], None]] = []

KEY = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"],
       "additionalProperties": False}
OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
       "additionalProperties": False}


def _blocking(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    """Appends the key to $RX_LOG; with $RX_BLOCK set, says so on stdout and blocks until the
    process is killed."""
    log = os.environ.get("RX_LOG")
    if log:
        with open(log, "a") as f:
            f.write(arguments["key"] + "\n")
    if os.environ.get("RX_BLOCK"):
        print("blocking", flush=True)
        threading.Event().wait()
    return ToolOutput(structured={"echo": arguments["key"]}, content=arguments["key"])


def _hook(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    for hook in HOOK:
        hook(arguments)
    return ToolOutput(structured={"echo": arguments["key"]}, content=arguments["key"])


def _spec(name: str, idempotency: Idempotency, **changes: Any) -> Any:
    fields: dict[str, Any] = dict(
        name=name, input_schema=KEY, output_schema=OUT, side_effect=SideEffect.WORKSPACE_WRITE,
        risk=Risk.LOW, idempotency=idempotency, allow_parallel=False, timeout_s=60)
    fields.update(changes)
    return make_spec(**fields)


PLUGIN = make_plugin(domains=["rx"], tools=[
    Tool(_spec("rx.write", Idempotency.NON_IDEMPOTENT), call=_blocking),
    Tool(_spec("rx.conditional", Idempotency.CONDITIONALLY_IDEMPOTENT), call=_blocking),
    Tool(_spec("rx.idempotent", Idempotency.IDEMPOTENT), call=_blocking),
    Tool(_spec("rx.read", Idempotency.READ_ONLY, side_effect=SideEffect.NONE,
               allow_parallel=True), call=_blocking),
    Tool(_spec("rx.hook", Idempotency.NON_IDEMPOTENT), call=_hook),
    Tool(_spec("rx.hook_read", Idempotency.READ_ONLY, side_effect=SideEffect.NONE,
               allow_parallel=True), call=_hook),
])
OTHER = make_plugin(domains=["other"], tools=[
    Tool(make_spec(name="other.echo"), call=lambda arguments, context: ToolOutput(
        structured={"echo": ""}, content=""))])

#: rx.read, a reader, is paused for approval in these tests.
READS_NEED_APPROVAL = Policy.configured({(SideEffect.NONE, Risk.LOW): PolicyAction.REQUIRE_APPROVAL})

CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_recovery import PLUGIN, READS_NEED_APPROVAL
from toolhost.testing import host_for
host = host_for({{"rx-dist": PLUGIN}}, data_dir=Path({data!r}), policy=READS_NEED_APPROVAL)
if sys.argv[1] == "invoke":
    host.invoke_sync(sys.argv[2], {{"key": "k"}})
else:
    host.approve_sync(sys.argv[2], "ops")
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "executions.log"
    monkeypatch.setenv("RX_LOG", str(path))
    monkeypatch.delenv("RX_BLOCK", raising=False)
    return path


@pytest.fixture
def host(data: Path) -> Iterator[Host]:
    h = host_for({"rx-dist": PLUGIN}, data_dir=data, policy=READS_NEED_APPROVAL)
    yield h
    h.close()


def kill_mid_call(tmp_path: Path, data: Path, *args: str,
                  while_running: Callable[[int], None] | None = None) -> int:
    """Run CHILD with ``args`` until its tool blocks, call ``while_running(pid)``, then
    SIGKILL it; returns its pid."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(HERE), data=str(data)))
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "RX_BLOCK": "1"})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "blocking\n"
        if while_running is not None:
            while_running(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    return proc.pid


def the_row(host: Host) -> Any:
    (row,) = host.pipeline.invocations.list()
    return row


# ---------------------------------------------------------------------- killed mid-call


@pytest.mark.parametrize("name", ["rx.write", "rx.conditional"])
def test_a_call_that_may_not_repeat_killed_mid_call_ends_interrupted_and_never_runs_again(
    tmp_path: Path, data: Path, log: Path, host: Host, name: str,
) -> None:
    def left_alone_while_alive(pid: int) -> None:
        (left,) = host.recover()
        assert (left.action, left.reason) == (
            RecoveryAction.LEFT, f"running in pid {pid} on {the_row(host).owner['host']}, alive")
        assert the_row(host).state is InvocationState.RUNNING

    pid = kill_mid_call(tmp_path, data, "invoke", name, while_running=left_alone_while_alive)
    row = the_row(host)
    assert (row.state, row.owner["pid"]) == (InvocationState.RUNNING, pid)
    idempotency = host.registry.resolve(name).spec.idempotency.value

    (settled,) = host.recover()
    assert (settled.invocation_id, settled.tool, settled.version, settled.action) == (
        row.id, name, "1.0.0", RecoveryAction.FAILED)
    assert settled.reason == (
        f"pid {pid} on {row.owner['host']} is gone; {idempotency}, never run again: failed "
        "tool.internal.interrupted (it may or may not have taken effect)")
    assert settled.outcome is not None and settled.outcome.failure is not None
    assert (settled.outcome.failure.reason_code, settled.outcome.failure.retryable,
            settled.outcome.content) == (
        "tool.internal.interrupted", False, "The call was interrupted before its result was "
        "recorded. It may or may not have taken effect: check before calling it again.")
    row = the_row(host)
    assert (row.state, row.reason_code, row.failure_kind, row.retryable) == (
        InvocationState.FAILED, "tool.internal.interrupted", "INTERNAL", False)
    assert row.failure_detail == {"owner": dict(row.owner),
                                  "not_run_again": f"{idempotency}, never run again"}
    assert log.read_text() == "k\n"  # the killed call's one execution, and no other

    # Settled, the row behaves like any finished one.
    assert host.recover() == []
    resumed = host_resume(host, row.id)
    assert (resumed.acted, resumed.outcome.status) == (False, OutcomeStatus.FAILED)
    with pytest.raises(InvocationStateError, match="is failed, not awaiting approval"):
        host.pipeline.deny(row.id, "ops", "late")
    assert log.read_text() == "k\n"


def test_an_idempotent_call_killed_mid_call_runs_again_here(
    tmp_path: Path, data: Path, log: Path, host: Host,
) -> None:
    pid = kill_mid_call(tmp_path, data, "invoke", "rx.idempotent")
    row = the_row(host)
    (rerun,) = host.recover()
    assert (rerun.action, rerun.reason) == (
        RecoveryAction.RERUN,
        f"pid {pid} on {row.owner['host']} is gone; IDEMPOTENT, so run again here: succeeded")
    assert rerun.outcome is not None and rerun.outcome.structured == {"echo": "k"}
    done = the_row(host)
    assert (done.state, done.result_content) == (InvocationState.SUCCEEDED, "k")
    assert done.owner == host.pipeline.invocations.owner()  # this process ran it
    assert log.read_text() == "k\nk\n"
    assert host.recover() == []


def test_without_rerun_an_idempotent_call_ends_interrupted_but_retryable(
    tmp_path: Path, data: Path, log: Path, host: Host,
) -> None:
    kill_mid_call(tmp_path, data, "invoke", "rx.idempotent")
    (settled,) = host.recover(rerun=False)
    assert settled.action is RecoveryAction.FAILED
    assert "; IDEMPOTENT, not run again here (safe to repeat): failed" in settled.reason
    row = the_row(host)
    assert (row.state, row.reason_code, row.retryable) == (
        InvocationState.FAILED, "tool.internal.interrupted", True)
    assert log.read_text() == "k\n"


def test_an_idempotent_call_whose_tool_is_not_registered_here_ends_interrupted(
    tmp_path: Path, data: Path, log: Path,
) -> None:
    kill_mid_call(tmp_path, data, "invoke", "rx.idempotent")
    with host_for({"other-dist": OTHER}, data_dir=data) as other:
        (settled,) = other.recover()
        assert settled.action is RecoveryAction.FAILED
        assert "; rx.idempotent 1.0.0 is not registered here: failed" in settled.reason
        assert (the_row(other).state, the_row(other).retryable) == (InvocationState.FAILED,
                                                                    False)
    assert log.read_text() == "k\n"


def test_an_idempotent_call_the_policy_now_denies_is_not_run_again(
    tmp_path: Path, data: Path, log: Path,
) -> None:
    kill_mid_call(tmp_path, data, "invoke", "rx.idempotent")
    deny = Policy.configured({(SideEffect.WORKSPACE_WRITE, Risk.LOW): PolicyAction.DENY})
    with host_for({"rx-dist": PLUGIN}, data_dir=data, policy=deny) as tightened:
        (settled,) = tightened.recover()
        assert settled.action is RecoveryAction.FAILED
        assert "; policy now denies WORKSPACE_WRITE/LOW: failed" in settled.reason
    assert log.read_text() == "k\n"


def test_a_read_killed_while_approved_runs_again_under_its_approval(
    tmp_path: Path, data: Path, log: Path, host: Host,
) -> None:
    paused = host.invoke_sync("rx.read", {"key": "k"})
    assert paused.paused and paused.invocation_id is not None
    kill_mid_call(tmp_path, data, "approve", paused.invocation_id)
    assert (the_row(host).state, the_row(host).approver) == (InvocationState.RUNNING, "ops")
    (rerun,) = host.recover()
    assert rerun.action is RecoveryAction.RERUN
    assert rerun.reason.endswith("; READ_ONLY, so run again here: succeeded")
    assert the_row(host).state is InvocationState.SUCCEEDED
    assert log.read_text() == "k\nk\n"


def test_racing_recoverers_run_a_killed_call_again_once(
    tmp_path: Path, data: Path, log: Path,
) -> None:
    kill_mid_call(tmp_path, data, "invoke", "rx.idempotent")
    hosts = [host_for({"rx-dist": PLUGIN}, data_dir=data) for _ in range(4)]
    barrier = threading.Barrier(len(hosts))
    reports: list[Any] = []

    def recover(h: Host) -> None:
        barrier.wait()
        reports.extend(h.recover())

    threads = [threading.Thread(target=recover, args=(h,)) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        # One recoverer takes the row over and runs it; any other that saw it running saw
        # it gone to that one (left: alive here) or taken (settled elsewhere).
        assert [r.action for r in reports].count(RecoveryAction.RERUN) == 1
        assert {r.action for r in reports} <= {RecoveryAction.RERUN, RecoveryAction.LEFT,
                                               RecoveryAction.SETTLED_ELSEWHERE}
        assert log.read_text() == "k\nk\n"
        assert the_row(hosts[0]).state is InvocationState.SUCCEEDED
    finally:
        for h in hosts:
            h.close()


def host_resume(host: Host, invocation_id: str) -> Any:
    import asyncio

    return asyncio.run(host.pipeline.resume(invocation_id, "ops"))


# ---------------------------------------------------------------------- defect 10: the pause


@pytest.fixture
def workspace_host(tmp_path: Path) -> Iterator[Harness]:
    with Harness.over(("toolhost-workspace", "toolhost-demo"),
                      data_dir=tmp_path / "ws-data") as harness:
        yield harness


def test_a_run_that_goes_on_after_a_pause_starts_from_an_empty_workspace(
    workspace_host: Harness,
) -> None:
    host = workspace_host.host
    run = host.local_run()
    wrote = host.invoke_sync("workspace.write_text", {"path": "notes.md", "content": "n"},
                             run=run)
    assert wrote.ok, wrote.content
    assert host.invoke_sync("workspace.read_text", {"path": "notes.md"}, run=run).ok
    root = run.workspace.root
    paused = host.invoke_sync("demo.external_write",
                              {"destination": "crm://x", "content": "c"}, run=run)
    assert paused.paused and paused.invocation_id is not None
    assert not root.exists()  # discarded at the pause
    assert host.approve_sync(paused.invocation_id, "ops").ok
    read = host.invoke_sync("workspace.read_text", {"path": "notes.md"}, run=run)
    assert read.failure is not None
    assert read.failure.reason_code == "tool.not_found.no_such_path"
    # The run goes on in a new, empty workspace of its own.
    assert host.invoke_sync("workspace.write_text", {"path": "b.md", "content": "b"},
                            run=run).ok
    listed = host.invoke_sync("workspace.list_files", {}, run=run).structured
    assert listed is not None and [e["path"] for e in listed["entries"]] == ["b.md"]
    host.end_run(run)


def test_an_operators_workspace_is_never_deleted_at_a_pause(
    workspace_host: Harness, tmp_path: Path,
) -> None:
    host = workspace_host.host
    mine = tmp_path / "mine"
    mine.mkdir()
    run = host.start_run(workspace=mine)
    assert host.invoke_sync("workspace.write_text", {"path": "notes.md", "content": "n"},
                            run=run).ok
    paused = host.invoke_sync("demo.external_write",
                              {"destination": "crm://x", "content": "c"}, run=run)
    assert paused.paused
    assert (mine / "notes.md").read_text() == "n"
    # Closed at the pause, reopened by the next call: the operator's files are where they were.
    assert host.invoke_sync("workspace.read_text", {"path": "notes.md"}, run=run).ok
    host.end_run(run)
    assert (mine / "notes.md").read_text() == "n"


def test_a_pause_while_another_call_of_the_run_executes_discards_when_it_ends(
    data: Path, log: Path,
) -> None:
    import asyncio

    writes_need_approval = Policy.configured(
        {(SideEffect.WORKSPACE_WRITE, Risk.LOW): PolicyAction.REQUIRE_APPROVAL})
    import toolhost_workspace.plugin

    with host_for({"rx-dist": PLUGIN, "toolhost-workspace": toolhost_workspace.plugin},
                  data_dir=data, policy=writes_need_approval) as host:
        run = host.start_run()
        assert host.invoke_sync("workspace.write_text", {"path": "a.md", "content": "a"},
                                run=run).paused is False
        root = run.workspace.root
        seen: list[bool] = []

        async def scenario() -> None:
            entered, release = asyncio.Event(), threading.Event()
            loop = asyncio.get_running_loop()

            def during(arguments: Mapping[str, Any]) -> None:
                loop.call_soon_threadsafe(entered.set)
                release.wait(10)
                seen.append((root / "a.md").exists())  # still there while this call runs

            HOOK.append(during)
            try:
                reader = asyncio.ensure_future(host.invoke("rx.hook_read", {"key": "r"},
                                                           run=run))
                await entered.wait()
                paused = await host.invoke("rx.write", {"key": "w"}, run=run)
                assert paused.paused
                assert root.exists()  # not under a call that is using it
                release.set()
                assert (await reader).ok
            finally:
                HOOK.clear()

        asyncio.run(scenario())
        assert seen == [True]
        assert not root.exists()  # discarded when the last call in it ended
        host.end_run(run)


# ---------------------------------------------------------------------- the store failing


class Unwritable:
    """The real store, whose next ``failures`` writes raise what SQLite raises for a database
    that became read-only."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _write(self) -> None:
        if self.failures:
            self.failures -= 1
            raise sqlite3.OperationalError("attempt to write a readonly database")

    def insert(self, record: Any) -> None:
        self._write()
        self.inner.insert(record)

    def transition(self, *args: Any, **kwargs: Any) -> bool:
        self._write()
        return bool(self.inner.transition(*args, **kwargs))

    def settle(self, *args: Any, **kwargs: Any) -> bool:
        self._write()
        return bool(self.inner.settle(*args, **kwargs))


@pytest.fixture
def unwritable(host: Host) -> Iterator[Unwritable]:
    store = Unwritable(host.pipeline.invocations)
    host.pipeline.invocations = store
    yield store
    HOOK.clear()


RECORD_STORE_TEXT = ("The host could not record this call, so it has no result and changed "
                     "nothing. Try again later.")


@pytest.mark.parametrize("name", ["rx.write", "rx.read", "other.nope"])
def test_a_store_failing_before_anything_ran_is_a_retryable_failure_with_no_row(
    host: Host, unwritable: Unwritable, log: Path, name: str,
) -> None:
    unwritable.failures = 1  # the running row, the pause, or the refusal's row
    outcome = host.invoke_sync(name, {"key": "k"})
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.kind.value, outcome.failure.retryable,
            outcome.content, outcome.invocation_id) == (
        "tool.upstream_unavailable.record_store", "UPSTREAM_UNAVAILABLE", True,
        RECORD_STORE_TEXT, None)
    assert outcome.failure.detail == {"exception": "OperationalError",
                                      "error": "attempt to write a readonly database"}
    assert host.pipeline.invocations.count() == 0
    assert not log.exists()


def test_a_policy_denial_whose_row_cannot_be_written_is_the_same_failure(data: Path) -> None:
    deny = Policy.configured({(SideEffect.WORKSPACE_WRITE, Risk.LOW): PolicyAction.DENY})
    with host_for({"rx-dist": PLUGIN}, data_dir=data, policy=deny) as denying:
        store = Unwritable(denying.pipeline.invocations)
        denying.pipeline.invocations = store
        store.failures = 1
        outcome = denying.invoke_sync("rx.write", {"key": "k"})
        assert outcome.failure is not None
        assert (outcome.status, outcome.failure.reason_code) == (
            OutcomeStatus.FAILED, "tool.upstream_unavailable.record_store")
        assert store.count() == 0


def test_a_read_whose_row_cannot_be_written_is_a_retryable_failure_with_no_row(
    data: Path,
) -> None:
    with host_for({"rx-dist": PLUGIN}, data_dir=data) as plain:  # a reader is allowed here
        store = Unwritable(plain.pipeline.invocations)
        plain.pipeline.invocations = store
        HOOK.append(lambda arguments: setattr(store, "failures", 1))
        try:
            read = plain.invoke_sync("rx.hook_read", {"key": "k"})
        finally:
            HOOK.clear()
        assert read.failure is not None
        assert (read.failure.reason_code, read.failure.retryable, read.invocation_id) == (
            "tool.upstream_unavailable.record_store", True, None)
        assert store.count() == 0


def test_a_write_whose_result_cannot_be_recorded_ends_interrupted_and_the_row_says_so(
    host: Host, unwritable: Unwritable,
) -> None:
    HOOK.append(lambda arguments: setattr(unwritable, "failures", 1))
    outcome = host.invoke_sync("rx.hook", {"key": "k"})
    assert outcome.failure is not None
    assert (outcome.failure.reason_code, outcome.failure.retryable, outcome.structured) == (
        "tool.internal.interrupted", False, None)
    row = the_row(host)
    assert (row.id, row.state, row.reason_code, row.result_content) == (
        outcome.invocation_id, InvocationState.FAILED, "tool.internal.interrupted", None)
    assert row.failure_detail == {"exception": "OperationalError",
                                  "error": "attempt to write a readonly database",
                                  "unrecorded_state": "succeeded"}


def test_a_database_unwritable_mid_call_leaves_the_row_running_until_recover_writes_it(
    host: Host,
) -> None:
    conn = host.pipeline.invocations._conn  # type: ignore[attr-defined]
    HOOK.append(lambda arguments: conn.execute("PRAGMA query_only = ON"))
    try:
        outcome = host.invoke_sync("rx.hook", {"key": "k"})
    finally:
        HOOK.clear()
        conn.execute("PRAGMA query_only = OFF")
    assert outcome.failure is not None
    assert outcome.failure.reason_code == "tool.internal.interrupted"
    row = the_row(host)
    assert (row.id, row.state) == (outcome.invocation_id, InvocationState.RUNNING)
    # The store is back: this process writes the end it could not write then (recover, as
    # `toolhost serve` runs it every TOOLHOST_RECOVER_INTERVAL_S), rather than leaving the row
    # running for as long as the process lives.
    (settled,) = host.recover()
    assert (settled.invocation_id, settled.action) == (row.id, RecoveryAction.FAILED)
    row = the_row(host)
    assert (row.state, row.reason_code) == (InvocationState.FAILED, "tool.internal.interrupted")
    assert host.recover() == []  # written once


# ------------------------------------------------------------------- recovery while serving


def test_a_server_settles_a_dead_processs_row_while_it_serves(
    tmp_path: Path, data: Path, log: Path, host: Host,
) -> None:
    # Several hosts on one database: a host that dies mid-call leaves a row that the others
    # settle while they keep serving, not only when one of them restarts.
    from toolhost._mcp.server import recover_every

    kill_mid_call(tmp_path, data, "invoke", "rx.write")
    assert the_row(host).state is InvocationState.RUNNING

    async def serving_a_while() -> None:
        recovery = asyncio.create_task(recover_every(host, 0.05))
        try:
            for _ in range(200):  # at most 10 s; settled after the first interval
                await asyncio.sleep(0.05)
                if the_row(host).state is not InvocationState.RUNNING:
                    return
        finally:
            recovery.cancel()

    asyncio.run(serving_a_while())
    row = the_row(host)
    assert (row.state, row.reason_code) == (InvocationState.FAILED, "tool.internal.interrupted")
