"""`toolhost show` names a waiting call's run's deadline, and `show` and `pending` say when it
has passed: an approval then runs nothing and ends the call failed (D222), so the operator
learns it before deciding, not from the outcome (D440). Through the real CLI with a fixture
plugin installed as a real distribution, as test_cli_approvals is."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

from test_cli import toolhost
from test_cli_approvals import env, row

__all__ = ["env"]  # the fixture, used by name

PASSED = (" (passed: an approval runs nothing and ends the call failed, "
          "tool.timeout.run_deadline_passed)")


def pause_in_run(env: dict[str, Any], run: str, timeout_s: int, destination: str) -> str:
    paused = toolhost("call", "--run", run, "--timeout", str(timeout_s), "fxw.external_write",
                      "--args", json.dumps({"destination": destination}), **env)
    assert paused.returncode == 3, paused.stderr
    return paused.stdout.strip()


def deadline_line(env: dict[str, Any], invocation_id: str) -> str:
    shown = toolhost("show", invocation_id, **env)
    assert shown.returncode == 0, shown.stderr
    (line,) = [s for s in shown.stdout.splitlines() if s.startswith("run deadline ")]
    return line


def test_show_and_pending_say_a_waiting_calls_run_deadline_has_passed(
    env: dict[str, Any],
) -> None:
    late = pause_in_run(env, "short", 3, "late")
    timely = pause_in_run(env, "long", 3600, "timely")
    unbounded = toolhost("call", "fxw.external_write", "--args",
                         json.dumps({"destination": "open"}), **env).stdout.strip()
    deadline = dt.datetime.fromisoformat(row(env, late)["run_deadline"])
    time.sleep(max(0.0, (deadline - dt.datetime.now(dt.UTC)).total_seconds()) + 0.2)

    assert deadline_line(env, late) == f"run deadline {deadline.isoformat()}{PASSED}"
    assert deadline_line(env, timely) == (
        f"run deadline {row(env, timely)['run_deadline']} (an approval after it runs nothing)")
    shown = toolhost("show", unbounded, **env)
    assert "run deadline" not in shown.stdout

    listed = toolhost("pending", **env)
    assert listed.returncode == 0 and listed.stderr == ""
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert lines[late].endswith('{"destination":"late"}  (its run\'s deadline passed: '
                                "approving runs nothing)")
    assert lines[timely].endswith('{"destination":"timely"}')
    assert lines[unbounded].endswith('{"destination":"open"}')
    # pending --json has the deadline too, as show --json has it.
    assert {frozenset(p) for p in json.loads(toolhost("pending", "--json", **env).stdout)} == {
        frozenset({"id", "tool", "version", "argument_digest", "created", "run_id",
                   "arguments", "policy", "run_deadline", "operator_directory"})}

    # What it said holds: the approval runs nothing, and the decided row's line is the bare time.
    approved = toolhost("approve", late, **env)
    assert approved.returncode == 1
    data = row(env, late)
    assert (data["state"], data["reason_code"]) == ("failed", "tool.timeout.run_deadline_passed")
    assert deadline_line(env, late) == f"run deadline {deadline.isoformat()}"
