"""The operator's side of a run's life (D221, D222, D227): a named run (``call --run``) goes on
across commands and through ``toolhost approve`` until ``runs end``; ``--timeout`` is the
run's deadline, which an approval after it cannot outlive; ``--user-turn`` is the one input at
USER trust; ``tools --format --pin`` shows the catalog a pinned client sees. Real first-party
plugins, real processes, one data directory per test."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest
from conftest import nothing_left
from test_cli import assert_no_traceback, toolhost


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"TOOLHOST_DATA_DIR": str(tmp_path / "d"),
            "TOOLHOST_PLUGINS": "toolhost-workspace,toolhost-sandbox,toolhost-artifact"}


def sleep_past(deadline: str) -> None:
    """Sleep until a run's deadline (ISO 8601, as ``show --json`` gives it) has passed."""
    left = dt.datetime.fromisoformat(deadline) - dt.datetime.now(dt.UTC)
    time.sleep(max(left.total_seconds(), 0) + 0.2)


def call(env: dict[str, str], name: str, arguments: dict[str, object], *extra: str) -> (
        tuple[int, str, str]):
    result = toolhost("call", name, "--args", json.dumps(arguments), *extra, env=env)
    assert_no_traceback(result)
    return result.returncode, result.stdout, result.stderr


def test_a_named_run_keeps_its_workspace_across_commands_until_it_ends(
    env: dict[str, str], tmp_path: Path,
) -> None:
    assert call(env, "workspace.write_text", {"path": "a.md", "content": "hi"},
                "--run", "r1")[0] == 0
    assert call(env, "workspace.read_text", {"path": "a.md"}, "--run", "r1")[:2] == (0, "hi\n")
    listed = toolhost("runs", "list", "--json", env=env)
    assert json.loads(listed.stdout) == [{"run_id": "r1", "directory": None, "workspace": True}]
    ended = toolhost("runs", "end", "r1", env=env)
    assert (ended.returncode, ended.stdout) == (0, "ended r1\n")
    assert toolhost("runs", "list", env=env).stdout == ""
    again = toolhost("runs", "end", "r1", env=env)
    assert again.returncode == 1 and again.stderr.startswith("toolhost: no run 'r1' is live")
    # A new command of the run starts it afresh: the ended workspace is gone.
    assert call(env, "workspace.read_text", {"path": "a.md"}, "--run", "r1")[0] == 1
    toolhost("runs", "end", "r1", env=env)
    assert nothing_left(tmp_path / "d" / "workspaces")


def test_an_unnamed_run_ends_with_its_command(env: dict[str, str], tmp_path: Path) -> None:
    assert call(env, "workspace.write_text", {"path": "a.md", "content": "hi"})[0] == 0
    assert toolhost("runs", "list", env=env).stdout == ""
    assert nothing_left(tmp_path / "d" / "workspaces")


def test_an_approved_command_becomes_the_named_runs_workspace(env: dict[str, str]) -> None:
    # Before the pause: written, then lost with the pause.
    call(env, "workspace.write_text", {"path": "before.md", "content": "x"}, "--run", "r2")
    code, out, _ = call(env, "sandbox.run_command",
                        {"command": "printf 'a,b\\n1,2\\n' > table.csv"}, "--run", "r2")
    assert code == 3
    approved = toolhost("approve", out.strip(), env=env)
    assert approved.returncode == 0, approved.stderr
    assert call(env, "workspace.read_text", {"path": "table.csv"}, "--run", "r2")[:2] == (
        0, "a,b\n1,2\n\n")
    assert call(env, "workspace.read_text", {"path": "before.md"}, "--run", "r2")[0] == 1
    exported = toolhost("call", "artifact.export", "--args", '{"path": "table.csv"}',
                        "--run", "r2", "--json", env=env)
    assert json.loads(exported.stdout)["attachments"][0]["name"] == "table.csv"
    assert toolhost("runs", "end", "r2", env=env).returncode == 0


def test_a_call_approved_after_the_runs_deadline_does_not_run(env: dict[str, str]) -> None:
    # Room for the command's start-up, which the deadline counts (D518); then past it.
    code, out, _ = call(env, "sandbox.run_command", {"command": "touch ran"},
                        "--run", "r3", "--timeout", "5")
    assert code == 3
    asked = json.loads(toolhost("show", out.strip(), "--json", env=env).stdout)
    sleep_past(asked["run_deadline"])
    late = toolhost("approve", out.strip(), "--json", env=env)
    assert late.returncode == 1, late.stderr
    outcome = json.loads(late.stdout)
    assert (outcome["status"], outcome["reason_code"], outcome["retryable"]) == (
        "failed", "tool.timeout.run_deadline_passed", False)
    # Nothing ran: the command's file is in no workspace of the run.
    assert call(env, "workspace.read_text", {"path": "ran"}, "--run", "r3")[0] == 1
    shown = json.loads(toolhost("show", out.strip(), "--json", env=env).stdout)
    assert shown["run_deadline"] and shown["state"] == "failed"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_one_line(env: dict[str, str],
                                                             value: str) -> None:
    result = toolhost("call", "workspace.list_files", "--args", "{}", "--timeout", value,
                      env=env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1].startswith("toolhost:")


def test_tools_format_pins_a_version_under_its_name() -> None:
    env = {"TOOLHOST_PLUGINS": "toolhost-artifact"}
    latest = json.loads(toolhost("tools", "--format", "openai", env=env).stdout)
    pinned = json.loads(toolhost("tools", "--format", "openai", "--pin",
                                 "artifact.export=1.0.0", env=env).stdout)
    assert [t["function"]["name"] for t in pinned] == ["artifact-export"]
    assert "content" in latest[0]["function"]["parameters"]["properties"]
    assert list(pinned[0]["function"]["parameters"]["properties"]) == ["path"]


@pytest.mark.parametrize(("pin", "says"), [
    ("artifact.export", "--pin expects NAME=VERSION"),
    ("artifact.export=9.9.9", "artifact.export has no version 9.9.9 (registered: 1.0.0, 2.0.0)"),
    ("math.calculate=1.0.0", "math.calculate is not served"),
])
def test_a_bad_pin_is_one_line(pin: str, says: str) -> None:
    env = {"TOOLHOST_PLUGINS": "toolhost-artifact"}
    for command in (["tools", "--format", "openai"], ["serve"]):
        result = toolhost(*command, "--pin", pin, env=env)
        assert result.returncode == 2, (command, result.stderr)
        assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert_no_traceback(result)
