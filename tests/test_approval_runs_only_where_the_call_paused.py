"""An approved call runs where it paused or not at all (D516), also once its run's id is used
again: a call of run R1 pauses in the operator's directory A, `toolhost runs end R1` ends R1,
and a command names R1 afresh in directory B, or with no directory (a workspace the host
makes). That is another run (D536): `toolhost approve` refuses in one line, exit 2, the call
still awaiting approval, and nothing is written in either place; once that run is ended too,
the approval runs the call in A as a run of its own (D509). A command cannot move a live run
to another directory either: the calls paused in it recorded where it was. Real `toolhost`
processes, the real sandbox, one data directory per test."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import toolhost
from test_cli_runs import call
from test_operator_directory_approval import WRITES, env, project, row

from toolhost import WorkspaceUnavailable
from toolhost._adapters.run_workspaces import RunWorkspaces

__all__ = ["env", "project"]  # the fixtures, shared with the D509 tests

NOTE = {"path": "note.md", "content": "the new run's"}


@pytest.fixture
def other(tmp_path: Path) -> Path:
    directory = tmp_path / "other"
    directory.mkdir()
    (directory / "marker.txt").write_text("the other directory's\n")
    return directory


def paused_in_run(env: dict[str, str], *where: str) -> str:
    code, out, err = call(env, "sandbox.run_command", WRITES, "--run", "r1", *where)
    assert code == 3, err
    return out.strip()


def refused_line(invocation_id: str, now: str, then: str) -> str:
    return (f"toolhost: invocation {invocation_id} was not run and still awaits approval: run "
            f"'r1' is live in {now}, but the call paused {then}: it would run elsewhere; deny "
            "it, or end the run (toolhost runs end r1) and approve it again\n")


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_an_approval_after_the_run_is_named_afresh_in_another_directory_is_refused(
    env: dict[str, str], project: Path, other: Path,
) -> None:
    invocation_id = paused_in_run(env, "--workspace", str(project))
    assert toolhost("runs", "end", "r1", env=env).returncode == 0
    assert call(env, "workspace.write_text", NOTE, "--run", "r1", "--workspace", str(other))[0] == 0
    refused = toolhost("approve", invocation_id, env=env)
    assert (refused.returncode, refused.stderr) == (2, refused_line(
        invocation_id, f"the operator's directory {str(other)!r}", f"in {str(project)!r}"))
    assert row(env, invocation_id)["state"] == "awaiting_approval"
    assert files(other) == ["marker.txt", "note.md"] and files(project) == ["marker.txt"]
    # The new run ended too, the approval runs the call where it paused, as a run of its own.
    assert toolhost("runs", "end", "r1", env=env).returncode == 0
    approved = toolhost("approve", invocation_id, env=env)
    assert approved.returncode == 0, approved.stderr
    assert (project / "out.txt").read_text() == "written\n"
    assert files(other) == ["marker.txt", "note.md"]


def test_an_approval_after_the_run_is_named_afresh_without_a_directory_is_refused(
    env: dict[str, str], project: Path,
) -> None:
    invocation_id = paused_in_run(env, "--workspace", str(project))
    assert toolhost("runs", "end", "r1", env=env).returncode == 0
    assert call(env, "workspace.write_text", NOTE, "--run", "r1")[0] == 0
    refused = toolhost("approve", invocation_id, env=env)
    assert (refused.returncode, refused.stderr) == (2, refused_line(
        invocation_id, "a workspace the host makes", f"in {str(project)!r}"))
    assert row(env, invocation_id)["state"] == "awaiting_approval"
    assert files(project) == ["marker.txt"]
    # The new run's workspace is untouched: only its own file is there.
    listed = call(env, "workspace.list_files", {}, "--run", "r1")
    assert listed[0] == 0 and "note.md" in listed[1] and "out.txt" not in listed[1], listed


def test_a_call_paused_in_a_workspace_the_host_made_never_runs_in_an_operators_directory(
    env: dict[str, str], other: Path,
) -> None:
    invocation_id = paused_in_run(env)
    assert toolhost("runs", "end", "r1", env=env).returncode == 0
    assert call(env, "workspace.write_text", NOTE, "--run", "r1", "--workspace", str(other))[0] == 0
    refused = toolhost("approve", invocation_id, env=env)
    assert (refused.returncode, refused.stderr) == (2, refused_line(
        invocation_id, f"the operator's directory {str(other)!r}",
        "not in an operator's directory on this host"))
    assert files(other) == ["marker.txt", "note.md"]
    assert row(env, invocation_id)["state"] == "awaiting_approval"


def test_an_approval_while_the_run_is_live_where_the_call_paused_runs_there(
    env: dict[str, str], project: Path,
) -> None:
    invocation_id = paused_in_run(env, "--workspace", str(project))
    approved = toolhost("approve", invocation_id, env=env)
    assert approved.returncode == 0, approved.stderr
    assert approved.stderr == (f"toolhost: invocation {invocation_id} runs in the operator's "
                               f"directory {project}\n")
    assert (project / "out.txt").read_text() == "written\n"
    assert "r1" in toolhost("runs", "list", env=env).stdout  # the run goes on


@pytest.mark.parametrize("first", ["directory", "host's"])
def test_a_live_run_is_not_moved_to_another_directory(
    env: dict[str, str], project: Path, other: Path, first: str,
) -> None:
    where = ["--workspace", str(project)] if first == "directory" else []
    invocation_id = paused_in_run(env, *where)
    code, _, err = call(env, "workspace.write_text", NOTE, "--run", "r1",
                        "--workspace", str(other))
    now = (f"the operator's directory {str(project)!r}" if where
           else "a workspace the host makes")
    assert (code, err) == (2, (
        f"toolhost: --workspace: run 'r1' is live in {now}, not in {str(other)!r}: a run's "
        "workspace stays where it started; name the run without a directory, or end it first "
        "(toolhost runs end r1)\n"))
    assert files(other) == ["marker.txt"]
    # The run is where it was, so the paused call's approval still runs there.
    assert toolhost("approve", invocation_id, env=env).returncode == 0
    assert (project / "out.txt").exists() is bool(where)
    assert not (other / "out.txt").exists()


def test_the_registry_decides_the_approval_once_for_every_asker(
    tmp_path: Path, project: Path, other: Path,
) -> None:
    """``approval_refusal`` (approve's and the inbox's question before the row is taken) and
    ``for_approval`` (the approval itself, another process) give the same line."""
    root = tmp_path / "workspaces"
    paused_in = RunWorkspaces(root).start("r", project)[0]
    recorded = paused_in.recorded_directory()
    paused_in.close()
    assert RunWorkspaces(root).end("r")
    RunWorkspaces(root).start("r", other)[0].close()  # named afresh elsewhere
    approver = RunWorkspaces(root)
    line = approver.approval_refusal("r", recorded, lambda _: None)
    assert line is not None and line.startswith(
        f"run 'r' is live in the operator's directory {str(other)!r}, but the call paused in "
        f"{str(project)!r}")
    with pytest.raises(WorkspaceUnavailable) as refused:
        approver.for_approval("r", recorded, lambda _: None)
    assert str(refused.value) == line
    assert RunWorkspaces(root).live() == [("r", other, False)]  # the new run left as it was


def test_recover_runs_a_call_that_never_paused_in_its_runs_live_directory_again(
    env: dict[str, str], project: Path,
) -> None:
    # A row no approval decided never paused, so it names no place: recovery runs it where
    # its run is live, as it started (D561), not refused as "paused elsewhere" (D559).
    import json
    import socket
    import sqlite3
    from contextlib import closing

    from toolhost._model.data_layout import DATABASE_NAME

    assert call(env, "workspace.write_text", NOTE, "--run", "r1",
                "--workspace", str(project))[0] == 0
    (project / "note.md").unlink()
    gone = json.dumps({"host": socket.gethostname(), "pid": 999_999, "start": 1,
                       "boot": "00000000-0000-0000-0000-000000000000", "pid_ns": "pid:[1]"},
                      sort_keys=True, separators=(",", ":"))
    database = Path(env["TOOLHOST_DATA_DIR"]) / DATABASE_NAME
    with closing(sqlite3.connect(database)) as conn, conn:  # as a SIGKILL mid-call leaves it
        conn.execute("UPDATE tool_invocations SET state = 'running', owner = ?, finished_at = "
                     "NULL, result_structured = NULL, result_content = NULL, output_trust = "
                     "NULL, failure_kind = NULL, reason_code = NULL, retryable = NULL", (gone,))
    recovered = toolhost("recover", env=env)
    assert recovered.returncode == 0, recovered.stderr
    assert (project / "note.md").read_text() == NOTE["content"], recovered.stdout
