"""An operator's directory is kept for an approval after the call's run has ended: `toolhost
call --workspace DIR` without `--run` pauses, its run ends with the command, and `toolhost
approve ID` runs the command in DIR (operator.md, "Runs and approvals"), once DIR passes every
rule a `--workspace` is checked by again; refused, the call stays awaiting approval. Real
processes, the real sandbox, one data directory per test."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import nothing_left
from test_cli import assert_no_traceback, toolhost
from test_cli_runs import call

from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._adapters.sqlite_db import DATABASE_NAME
from toolhost._composition import claim_served
from toolhost._model.settings import Settings

WRITES = {"command": "cat marker.txt; echo written > out.txt"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"TOOLHOST_DATA_DIR": str(tmp_path / "d"),
            "TOOLHOST_PLUGINS": "toolhost-workspace,toolhost-sandbox,toolhost-artifact"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "marker.txt").write_text("the operator's\n")
    return directory


def paused(env: dict[str, str], project: Path) -> str:
    code, out, err = call(env, "sandbox.run_command", WRITES, "--workspace", str(project))
    assert code == 3, err
    return out.strip()


def row(env: dict[str, str], invocation_id: str) -> dict[str, object]:
    shown = toolhost("show", invocation_id, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    found: dict[str, object] = json.loads(shown.stdout)
    return found


def test_an_approval_after_the_run_ended_runs_in_the_operators_directory(
    env: dict[str, str], project: Path, tmp_path: Path,
) -> None:
    invocation_id = paused(env, project)
    assert toolhost("runs", "list", env=env).stdout == ""  # the command's run has ended
    approved = toolhost("approve", invocation_id, "--json", env=env)
    assert approved.returncode == 0, approved.stderr
    structured = json.loads(approved.stdout)["structured"]
    assert structured["stdout"] == "the operator's\n", structured
    assert (project / "out.txt").read_text() == "written\n"
    # The approval's own registration of the run ends with the call: nothing is left.
    assert toolhost("runs", "list", env=env).stdout == ""
    assert nothing_left(tmp_path / "d" / "workspaces")


def test_a_directory_gone_or_swapped_for_a_link_is_refused_and_the_call_still_waits(
    env: dict[str, str], project: Path, tmp_path: Path,
) -> None:
    invocation_id = paused(env, project)
    moved = tmp_path / "moved"
    project.rename(moved)
    project.symlink_to(moved)
    swapped = toolhost("approve", invocation_id, env=env)
    assert swapped.returncode == 2
    assert swapped.stderr == (
        f"toolhost: invocation {invocation_id} was not run and still awaits approval: the "
        f"operator's directory {str(project)!r} the call paused in now leads to "
        f"{str(moved)!r}\n")
    project.unlink()
    gone = toolhost("approve", invocation_id, env=env)
    assert gone.returncode == 2 and "no longer exists" in gone.stderr, gone.stderr
    assert row(env, invocation_id)["state"] == "awaiting_approval"
    assert not (moved / "out.txt").exists()
    moved.rename(project)  # set right: the same approval now runs, in the directory
    assert toolhost("approve", invocation_id, env=env).returncode == 0
    assert (project / "out.txt").read_text() == "written\n"


def test_a_directory_nested_with_a_live_run_is_refused_until_that_run_ends(
    env: dict[str, str], project: Path,
) -> None:
    invocation_id = paused(env, project)
    inner = project / "inner"
    inner.mkdir()
    assert call(env, "workspace.write_text", {"path": "x.md", "content": "x"},
                "--run", "r1", "--workspace", str(inner))[0] == 0
    refused = toolhost("approve", invocation_id, env=env)
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        f"toolhost: invocation {invocation_id} was not run and still awaits approval: the "
        f"operator's directory the call paused in {str(project)!r} holds the workspace of run "
        "'r1'"), refused.stderr
    assert refused.stderr.endswith("(toolhost runs end r1)\n")
    assert row(env, invocation_id)["state"] == "awaiting_approval"
    assert toolhost("runs", "end", "r1", env=env).returncode == 0
    assert toolhost("approve", invocation_id, env=env).returncode == 0
    assert (project / "out.txt").exists()


def test_the_directory_a_server_still_serves_is_shared_one_inside_it_is_not(
    env: dict[str, str], project: Path, tmp_path: Path,
) -> None:
    settings = Settings.from_environ(env)
    first, second = paused(env, project), paused(env, project)
    # A server on the same directory: its sessions run there already, as the approval does.
    release = claim_served(settings, project, "a" * 32)
    try:
        assert toolhost("approve", first, env=env).returncode == 0
    finally:
        release()
    (project / "out.txt").unlink()
    served = project / "served"
    served.mkdir()
    release = claim_served(settings, served, "b" * 32)
    try:
        refused = toolhost("approve", second, env=env)
    finally:
        release()
    assert refused.returncode == 2
    assert f"holds the directory a toolhost serve (pid {os.getpid()}) serves" in refused.stderr
    assert not (project / "out.txt").exists()
    assert row(env, second)["state"] == "awaiting_approval"


def test_a_directory_recorded_on_another_machine_is_not_opened_here(
    project: Path, tmp_path: Path,
) -> None:
    registry = RunWorkspaces(tmp_path / "workspaces")
    elsewhere = {"host": "not-" + os.uname().nodename, "path": str(project)}
    workspace = registry.for_approval("r-elsewhere", elsewhere)
    try:
        assert workspace.root != project  # a workspace of the call's own, as D219 says
        assert not registry.registered("r-elsewhere")
    finally:
        workspace.close()


def recorded(env: dict[str, str], invocation_id: str, **changes: object) -> None:
    """The row's ``operator_directory`` edited as an operator or a damaged backup would."""
    with closing(sqlite3.connect(Path(env["TOOLHOST_DATA_DIR"]) / DATABASE_NAME)) as conn, conn:
        (text,) = conn.execute("SELECT operator_directory FROM tool_invocations WHERE id = ?",
                               (invocation_id,)).fetchone()
        value = {k: v for k, v in {**json.loads(text), **changes}.items() if v is not None}
        conn.execute("UPDATE tool_invocations SET operator_directory = ? WHERE id = ?",
                     (json.dumps(value), invocation_id))


def test_a_directory_the_system_cannot_reach_is_one_cut_line_and_the_call_still_waits(
    env: dict[str, str], project: Path,
) -> None:
    invocation_id = paused(env, project)
    recorded(env, invocation_id, path="/" + "a" * 300)  # past NAME_MAX: ENAMETOOLONG
    refused = toolhost("approve", invocation_id, env=env)
    assert_no_traceback(refused)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"toolhost: invocation {invocation_id} was not run and still awaits approval: the "
        f"operator's directory '/{'a' * 198}…' the call paused in cannot be reached "
        "(ENAMETOOLONG)\n")
    assert row(env, invocation_id)["state"] == "awaiting_approval"


def test_a_row_that_names_this_host_with_a_relative_path_is_damaged_and_runs_nowhere(
    env: dict[str, str], project: Path,
) -> None:
    invocation_id = paused(env, project)
    recorded(env, invocation_id, path="project")
    refused = toolhost("approve", invocation_id, env=env)
    assert (refused.returncode, refused.stderr) == (1, (
        f"toolhost: invocation {invocation_id} is damaged (operator_directory): its row was "
        "changed outside toolhost; restore it from a backup\n"))
    assert not (project / "out.txt").exists()


def test_another_directory_at_the_recorded_path_is_refused_and_the_call_still_waits(
    env: dict[str, str], project: Path, tmp_path: Path,
) -> None:
    invocation_id = paused(env, project)
    # The one it paused in moved away, another made at its path (recreated, or mounted over
    # it: a container with the host's name sees its own directory there).
    project.rename(tmp_path / "moved")
    project.mkdir()
    refused = toolhost("approve", invocation_id, env=env)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"toolhost: invocation {invocation_id} was not run and still awaits approval: the "
        f"operator's directory {str(project)!r} the call paused in cannot be told to be the "
        "one it paused in: it is another directory now, at the same path (deny the call, and "
        "make it again)\n")
    assert list(project.iterdir()) == []
    assert row(env, invocation_id)["state"] == "awaiting_approval"


@pytest.mark.parametrize(("changes", "why"), [
    ({"device": None, "inode": None}, "its row does not say which directory it was"),
    ({"boot": "another-boot"}, "was on this machine before it restarted"),
], ids=["recorded-without-identity", "another-boot"])
def test_a_directory_not_known_to_be_the_one_it_paused_in_is_refused(
    env: dict[str, str], project: Path, changes: dict[str, object], why: str,
) -> None:
    invocation_id = paused(env, project)
    recorded(env, invocation_id, **changes)
    refused = toolhost("approve", invocation_id, env=env)
    assert refused.returncode == 2 and why in refused.stderr, refused.stderr
    assert not (project / "out.txt").exists()


def test_show_and_approve_name_the_directory_the_approved_call_runs_in(
    env: dict[str, str], project: Path,
) -> None:
    invocation_id = paused(env, project)
    shown = toolhost("show", invocation_id, env=env)
    assert shown.returncode == 0, shown.stderr
    assert (f"directory    {project} on {socket.gethostname()} (an approval runs the call "
            "there, checked again first)\n") in shown.stdout
    approved = toolhost("approve", invocation_id, env=env)
    assert approved.returncode == 0, approved.stderr
    assert approved.stderr == (f"toolhost: invocation {invocation_id} runs in the operator's "
                               f"directory {project}\n")
    # Once decided it says where it ran; on another machine's row, that an approval here
    # runs the call in a workspace of its own.
    assert f"directory    {project} on {socket.gethostname()}\n" in toolhost(
        "show", invocation_id, env=env).stdout
    elsewhere = paused(env, project)
    recorded(env, elsewhere, host="not-" + socket.gethostname())
    assert (f"directory    {project} on not-{socket.gethostname()} (another machine: approved "
            "here, it runs in a workspace of its own)\n") in toolhost(
        "show", elsewhere, env=env).stdout
