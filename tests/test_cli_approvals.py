"""`toolhost call` pausing, `pending`, `show`, `approve`, `deny`, `recover`: the approval flow
at the operator's surface, with a fixture plugin installed as a real distribution and a real
data directory, and a real process killed in the middle of an approved call."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from installed import install_fake_plugin
from test_cli import assert_no_traceback, toolhost

WRITER = '''
import os, sys, threading
from toolhost import (hookimpl, Domain, Tool, ToolSpec, ToolOutput, Kind, Source, TargetKind,
                      SideEffect, Risk, Idempotency, Trust)

IN = {"type": "object", "properties": {"destination": {"type": "string"}},
      "required": ["destination"], "additionalProperties": False}
OUT = {"type": "object", "properties": {"recorded": {"const": True}},
       "required": ["recorded"], "additionalProperties": False}
SPEC = ToolSpec(
    name="fxw.external_write", version="1.0.0", description="Records a write.",
    input_schema=IN, output_schema=OUT, kind=Kind.CAPABILITY, source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS, server_id=None, side_effect=SideEffect.EXTERNAL_WRITE,
    risk=Risk.HIGH, idempotency=Idempotency.NON_IDEMPOTENT, output_trust=Trust.INTERNAL_TOOL,
    required_scopes=("fxw.write",), timeout_s=60, maximum_output_bytes=4096,
    allow_parallel=False, deprecated=False,
)

def write(arguments, context):
    log = os.environ.get("FXW_LOG")
    if log:
        with open(log, "a") as f:
            f.write(arguments["destination"] + "\\n")
    if os.environ.get("FXW_BLOCK"):
        sys.stderr.write("blocking\\n")
        sys.stderr.flush()
        threading.Event().wait()  # until the process is killed
    return ToolOutput(structured={"recorded": True}, content="recorded " +
                      arguments["destination"])

@hookimpl
def toolhost_domains():
    return [Domain("fxw")]

@hookimpl
def toolhost_tools(settings):
    return [Tool(SPEC, call=write)]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, object]:
    install_fake_plugin(tmp_path / "site", "fake-writer", "fake_writer", WRITER)
    return {"env": {"TOOLHOST_PLUGINS": "fake-writer", "TOOLHOST_DATA_DIR": str(tmp_path / "d")},
            "site": tmp_path / "site"}


def test_pause_pending_approve(env: dict[str, object]) -> None:
    paused = toolhost("call", "fxw.external_write", "--args", '{"destination": "x"}', **env)
    assert paused.returncode == 3
    invocation_id = paused.stdout.strip()
    assert len(invocation_id) == 32
    assert paused.stderr == (f"toolhost: fxw.external_write awaits approval: toolhost approve "
                             f"{invocation_id}\n")

    pending = json.loads(toolhost("pending", "--json", **env).stdout)
    assert [(p["id"], p["tool"], p["version"]) for p in pending] == [
        (invocation_id, "fxw.external_write", "1.0.0")]
    assert pending[0]["argument_digest"].startswith("sha256:") and pending[0]["created"]

    approved = toolhost("approve", invocation_id, "--json", **env)
    assert approved.returncode == 0, approved.stderr
    outcome = json.loads(approved.stdout)
    assert (outcome["status"], outcome["content"], outcome["structured"]) == (
        "succeeded", "recorded x", {"recorded": True})
    assert outcome["invocation_id"] == invocation_id

    again = toolhost("approve", invocation_id, **env)
    assert (again.returncode, again.stdout) == (0, "recorded x\n")
    assert again.stderr == (f"toolhost: invocation {invocation_id} already finished (succeeded); "
                            "it did not run again\n")
    assert json.loads(toolhost("pending", "--json", **env).stdout) == []


def test_deny_and_the_errors_around_it(env: dict[str, object]) -> None:
    paused = toolhost("call", "fxw.external_write", "--args", '{"destination": "y"}', **env)
    invocation_id = paused.stdout.strip()
    denied = toolhost("deny", invocation_id, "--reason", "no", **env)
    assert denied.returncode == 0
    assert denied.stdout == (
        "An operator denied this call. Do not retry it; ask the user how to proceed.\n")
    late = toolhost("approve", invocation_id, **env)
    assert (late.returncode, late.stderr) == (1, f"toolhost: invocation {invocation_id} was "
                                                 "denied\n")
    missing = toolhost("approve", "nope", **env)
    assert (missing.returncode, missing.stderr) == (
        1, "toolhost: no invocation 'nope' (toolhost pending lists them)\n")
    no_reason = toolhost("deny", invocation_id, **env)
    assert no_reason.returncode == 2 and "Traceback" not in no_reason.stderr
    # Regression: a second deny dropped its reason without a word.
    again = toolhost("deny", invocation_id, "--reason", "not this week", "--approver", "bo",
                     **env)
    first = row(env, invocation_id)["approver"]
    assert (again.returncode, again.stderr) == (0, (
        f"toolhost: invocation {invocation_id} was already denied by {first} (no); this "
        "reason was not recorded\n"))
    assert row(env, invocation_id)["denial_reason"] == "no"


def test_call_json_on_pause_prints_the_pause(env: dict[str, object]) -> None:
    paused = toolhost("call", "fxw.external_write", "--args", '{"destination": "z"}', "--json",
                      **env)
    assert paused.returncode == 3
    data = json.loads(paused.stdout)
    assert data["status"] == "awaiting_approval"
    assert data["decision"] == {"action": "approval", "rule": "EXTERNAL_WRITE/HIGH"}


def with_env(env: dict[str, Any], **changes: str) -> dict[str, Any]:
    """The fixture's ``toolhost`` keywords with these settings changed."""
    return {**env, "env": {**env["env"], **changes}}


def popen(*args: str, env: dict[str, Any]) -> subprocess.Popen[str]:
    """``toolhost ARGS`` started, not waited for, with the fixture's settings and site."""
    full = {k: v for k, v in os.environ.items() if k != "TOOLHOST_PLUGINS"}
    full.update(env["env"])
    full["PYTHONPATH"] = os.pathsep.join(
        [str(env["site"]), *filter(None, [full.get("PYTHONPATH")])])
    return subprocess.Popen([sys.executable, "-m", "toolhost._cli", *args], env=full, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def pause(env: dict[str, Any], destination: str = "x") -> str:
    paused = toolhost("call", "fxw.external_write", "--args",
                      json.dumps({"destination": destination}), **env)
    assert paused.returncode == 3, paused.stderr
    return paused.stdout.strip()


def row(env: dict[str, Any], invocation_id: str) -> dict[str, Any]:
    shown = toolhost("show", invocation_id, "--json", **env)
    assert shown.returncode == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


# ------------------------------------------------------------------ defect 3


def test_approve_where_the_tool_is_not_registered_is_one_line_and_leaves_the_row_waiting(
    env: dict[str, Any], tmp_path: Path,
) -> None:
    invocation_id = pause(env)
    log = str(tmp_path / "executions.log")
    refused = toolhost("approve", invocation_id,
                       **with_env(env, TOOLHOST_PLUGINS="toolhost-math", FXW_LOG=log))
    assert_no_traceback(refused)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", f"toolhost: invocation {invocation_id} calls fxw.external_write 1.0.0, which is "
               "not registered here: approve it where its plugin is installed and enabled, or "
               "deny it\n")
    waiting = row(env, invocation_id)
    assert (waiting["state"], waiting["approver"], waiting["started_at"]) == (
        "awaiting_approval", None, None)
    assert not Path(log).exists()
    # Where the plugin is, the same row is approved and runs, once.
    approved = toolhost("approve", invocation_id, **with_env(env, FXW_LOG=log))
    assert (approved.returncode, approved.stdout) == (0, "recorded x\n")
    assert Path(log).read_text() == "x\n"


# ------------------------------------------------------------------ the policy, decided again


def test_approve_decides_the_policy_again_and_a_cell_now_deny_denies(
    env: dict[str, Any], tmp_path: Path,
) -> None:
    invocation_id = pause(env)
    log = str(tmp_path / "executions.log")
    approved = toolhost("approve", invocation_id, **with_env(
        env, TOOLHOST_POLICY='{"EXTERNAL_WRITE/HIGH": "deny"}', FXW_LOG=log))
    assert (approved.returncode, approved.stdout) == (
        1, "An operator denied this call. Do not retry it; ask the user how to proceed.\n")
    assert approved.stderr == (f"toolhost: invocation {invocation_id} did not run: the policy "
                               "now denies EXTERNAL_WRITE/HIGH\n")
    denied = row(env, invocation_id)
    assert (denied["state"], denied["denial_reason"], denied["policy"], denied["started_at"]) == (
        "denied", "policy now denies EXTERNAL_WRITE/HIGH",
        {"action": "deny", "rule": "EXTERNAL_WRITE/HIGH"}, None)
    assert not Path(log).exists()
    late = toolhost("approve", invocation_id, **env)
    assert (late.returncode, late.stderr) == (
        1, f"toolhost: invocation {invocation_id} was denied\n")


# ------------------------------------------------------------------ the operator's day


def test_an_empty_pending_says_so(env: dict[str, Any]) -> None:
    empty = toolhost("pending", **env)
    assert (empty.returncode, empty.stdout, empty.stderr) == (
        0, "no invocations await approval\n", "")


def test_pending_shows_enough_to_decide_and_is_bounded(env: dict[str, Any]) -> None:
    ids = [pause(env, d) for d in ("a", "b" * 200, "c")]
    listed = toolhost("pending", "--limit", "2", **env)
    assert listed.returncode == 0
    created = {p["id"]: p["created"] for p in json.loads(
        toolhost("pending", "--json", **env).stdout)}
    preview = '{"destination":"' + "b" * 63 + "…"
    assert len(preview) == 80
    assert listed.stdout == (
        f'{ids[0]}  fxw.external_write@1.0.0  {created[ids[0]]}  {{"destination":"a"}}\n'
        f"{ids[1]}  fxw.external_write@1.0.0  {created[ids[1]]}  {preview}\n")
    assert listed.stderr == ("toolhost: the oldest 2 are listed; more await approval "
                             f"(the next page: toolhost pending --after {ids[1]} --limit 2)\n")
    assert [p["id"] for p in json.loads(
        toolhost("pending", "--json", "--limit", "1", **env).stdout)] == ids[:1]
    bad = toolhost("pending", "--limit", "0", **env)
    assert bad.returncode == 2 and "at least 1" in bad.stderr
    assert_no_traceback(bad)


def test_pending_pages_after_the_last_id_it_printed(env: dict[str, Any]) -> None:
    ids = [pause(env, d) for d in ("a", "b", "c")]
    first = toolhost("pending", "--limit", "2", **env)
    assert [line.split()[0] for line in first.stdout.splitlines()] == ids[:2]
    # The next page is the command the first one printed, and it ends the listing.
    command = first.stderr.split("(the next page: ")[1].rstrip(")\n").split()
    assert command == ["toolhost", "pending", "--after", ids[1], "--limit", "2"]
    second = toolhost(*command[1:], **env)
    assert (second.returncode, second.stderr) == (0, "")
    assert [line.split()[0] for line in second.stdout.splitlines()] == ids[2:]
    # A page shorter than its limit is the last; past the end, the command says so.
    after_all = toolhost("pending", "--after", ids[2], **env)
    assert (after_all.returncode, after_all.stdout, after_all.stderr) == (
        0, f"no invocations await approval after {ids[2]}\n", "")
    assert [p["id"] for p in json.loads(
        toolhost("pending", "--json", "--after", ids[0], **env).stdout)] == ids[1:]
    # A decided row still marks its place: paging survives approvals made between pages.
    assert toolhost("deny", ids[1], "--reason", "no", **env).returncode == 0
    assert [line.split()[0] for line in toolhost(
        "pending", "--after", ids[1], **env).stdout.splitlines()] == ids[2:]
    unknown = toolhost("pending", "--after", "nope", **env)
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (
        1, "", "toolhost: no invocation 'nope' (toolhost pending lists them)\n")
    assert_no_traceback(unknown)


def test_pending_prints_the_row_as_show_does_and_escapes_what_does_not_print(
    env: dict[str, Any],
) -> None:
    # pending reads the listed columns' stored text, not records: the same values show has.
    destination = "crm://acme\u202e\nmoc.live\x1b[2J é"
    invocation_id = pause(env, destination)
    data = row(env, invocation_id)
    listed = toolhost("pending", **env)
    assert listed.stdout == (
        f"{invocation_id}  fxw.external_write@1.0.0  {data['created_at']}  "
        '{"destination":"crm://acme\\u202e\\nmoc.live\\u001b[2J é"}\n')
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", data["created_at"])
    (shown,) = json.loads(toolhost("pending", "--json", **env).stdout)
    assert shown == {
        "id": invocation_id, "tool": "fxw.external_write", "version": "1.0.0",
        "argument_digest": data["argument_digest"], "created": data["created_at"],
        "run_id": data["run_id"], "arguments": {"destination": destination},
        "policy": data["policy"], "run_deadline": data["run_deadline"],
        "operator_directory": data["operator_directory"]}
    assert data["policy"]["rule"] == "EXTERNAL_WRITE/HIGH"


def test_show_prints_the_arguments_and_state_and_escapes_what_does_not_print(
    env: dict[str, Any],
) -> None:
    destination = "crm://acme\u202e\nmoc.live\x1b[2J"
    invocation_id = pause(env, destination)
    shown = toolhost("show", invocation_id, **env)
    assert shown.returncode == 0 and shown.stderr == ""
    lines = shown.stdout.splitlines()
    assert lines[:4] == [f"invocation   {invocation_id}", "tool         fxw.external_write 1.0.0",
                         "state        awaiting_approval",
                         "policy       approval (EXTERNAL_WRITE/HIGH)"]
    assert lines[-4:] == ["arguments", "{",
                          '  "destination": "crm://acme\\u202e\\nmoc.live\\u001b[2J"', "}"]
    assert any(re.fullmatch(r"digest       sha256:[0-9a-f]{64}", line) for line in lines)
    assert "\u202e" not in shown.stdout and "\x1b" not in shown.stdout
    data = row(env, invocation_id)
    assert (data["id"], data["state"], data["arguments"], data["owner"]) == (
        invocation_id, "awaiting_approval", {"destination": destination}, None)
    missing = toolhost("show", "nope", **env)
    assert (missing.returncode, missing.stderr) == (
        1, "toolhost: no invocation 'nope' (toolhost pending lists them)\n")


# ------------------------------------------------------------------ defect 4: kill -9, recover


def test_a_call_killed_while_approved_is_recovered_never_run_again_and_settled(
    env: dict[str, Any], tmp_path: Path,
) -> None:
    invocation_id = pause(env)
    log = str(tmp_path / "executions.log")
    proc = popen("approve", invocation_id, env=with_env(env, FXW_BLOCK="1", FXW_LOG=log))
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline() == "blocking\n"  # the tool is executing now
        running = row(env, invocation_id)
        owner = running["owner"]
        assert (running["state"], owner["pid"], running["owner_state"]) == (
            "running", proc.pid, "alive")
        # A live owner's row is left alone.
        alive = toolhost("recover", **env)
        assert alive.stdout == (
            f"{invocation_id}  fxw.external_write@1.0.0  left: running in pid {proc.pid} on "
            f"{owner['host']}, alive\n")
        assert row(env, invocation_id)["state"] == "running"
        # So is a second approve: it says where the call is running, and runs nothing.
        second = toolhost("approve", invocation_id, **with_env(env, FXW_LOG=log))
        assert (second.returncode, second.stdout, second.stderr) == (
            1, "This call was approved and is running. Its result is recorded when it "
               "finishes.\n",
            f"toolhost: invocation {invocation_id} is already running in pid {proc.pid} on "
            f"{owner['host']} (alive); it did not run again\n")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert Path(log).read_text() == "x\n"

    stranded = toolhost("pending", **env)
    assert stranded.stdout == "no invocations await approval\n"
    assert stranded.stderr == ("toolhost: 1 invocation(s) were left running by a process that "
                               "is gone: toolhost recover settles them\n")
    recovered = toolhost("recover", **env)
    assert (recovered.returncode, recovered.stdout) == (0, (
        f"{invocation_id}  fxw.external_write@1.0.0  failed: pid {proc.pid} on {owner['host']} "
        "is gone; NON_IDEMPOTENT, never run again: failed tool.internal.interrupted (it may or "
        "may not have taken effect)\n"))
    settled = row(env, invocation_id)
    assert (settled["state"], settled["reason_code"], settled["retryable"]) == (
        "failed", "tool.internal.interrupted", False)
    assert settled["message"] == ("The call was interrupted before its result was recorded. It "
                                  "may or may not have taken effect: check before calling it "
                                  "again.")

    # Settled, the row behaves: nothing runs again, nothing is pending, nothing to recover.
    again = toolhost("approve", invocation_id, **with_env(env, FXW_LOG=log))
    assert (again.returncode, again.stdout, again.stderr) == (
        1, settled["message"] + "\n",
        f"toolhost: invocation {invocation_id} already finished (failed); it did not run again\n")
    denied = toolhost("deny", invocation_id, "--reason", "late", **env)
    assert (denied.returncode, denied.stderr) == (
        1, f"toolhost: invocation {invocation_id} is failed, not awaiting approval\n")
    assert toolhost("pending", **env).stderr == ""
    assert toolhost("recover", **env).stdout == (
        "nothing to recover: no invocation is left running\n")
    assert json.loads(toolhost("recover", "--json", "--no-rerun", **env).stdout) == []
    assert Path(log).read_text() == "x\n"


# ------------------------------------------------------------------ defect 6


def test_the_external_write_override_is_on_the_row_and_its_warning_beats_the_log_level(
    env: dict[str, Any],
) -> None:
    loosened = with_env(env, TOOLHOST_POLICY='{"EXTERNAL_WRITE/HIGH": "allow"}',
                        TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE="1", TOOLHOST_LOG_LEVEL="error")
    ran = toolhost("call", "fxw.external_write", "--args", '{"destination": "o"}', "--json",
                   **loosened)
    assert ran.returncode == 0, ran.stderr
    outcome = json.loads(ran.stdout)
    assert outcome["decision"] == {"action": "allow", "rule": "EXTERNAL_WRITE/HIGH",
                                   "override": "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE"}
    assert row(env, outcome["invocation_id"])["policy"] == outcome["decision"]
    (line,) = ran.stderr.splitlines()
    event = json.loads(line)
    assert (event["event"], event["level"], event["cell"]) == (
        "policy.loosened", "warning", "EXTERNAL_WRITE/HIGH: approval -> allow")


# ------------------------------------------------------------------ #26 item 5: Ctrl-C


def test_ctrl_c_during_approve_records_the_call_cancelled_as_serve_does(
    env: dict[str, Any], tmp_path: Path,
) -> None:
    # Regression: Ctrl-C while the approved call ran left its row `running`, later settled
    # by `recover` as "may or may not have taken effect"; serve records run_cancelled.
    invocation_id = pause(env)
    proc = popen("approve", invocation_id, env=with_env(env, FXW_BLOCK="1"))
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline() == "blocking\n"  # the tool is executing now
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout
    settled = row(env, invocation_id)
    assert (settled["state"], settled["reason_code"]) == ("failed", "tool.cancelled.run_cancelled")
    assert "cancel" in stdout.lower()
    nothing = toolhost("recover", **env)
    assert nothing.stdout == "nothing to recover: no invocation is left running\n"
