"""A call a person approved within the call (an MCP client's elicitation, D218) is recorded
with the place its run had, as a call that pauses is: `toolhost serve`'s operator's directory
(TOOLHOST_MCP_WORKSPACE), or none for a workspace the host makes. So `toolhost recover`,
finding it running after its server was killed, runs it again in that directory while its
run is still live there (D561's never-paused calls run there too). One approved in a
workspace the host makes is never run in an operator's directory: once its run is ended and
named afresh in one (D536: another run), recovery refuses it as an approval would (D559),
and nothing is written there.

A real `toolhost serve` over stdio, driven by the MCP SDK's client, which accepts the
elicitation; the server SIGKILLed with its session's run still registered; the row then put
back to `running` under a process that is gone, as a SIGKILL mid-body leaves it (the body is
too quick to be killed in); real `toolhost` commands after it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from test_cli import toolhost

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolhost._adapters.sqlite_db import DATABASE_NAME

NOTE = {"path": "note.md", "content": "approved within the call\n"}
#: A process that is gone, as a row's owner records one.
GONE = json.dumps({"host": socket.gethostname(), "pid": 999_999, "start": 1,
                   "boot": "00000000-0000-0000-0000-000000000000", "pid_ns": "pid:[1]"},
                  sort_keys=True, separators=(",", ":"))


def _children() -> list[int]:
    """This process's children (the server the SDK's client started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            found.append(int(entry.name))
    return found


def approved_within_the_call(env: dict[str, str], tmp_path: Path) -> str:
    """One workspace.write_text approved through the client's elicitation, then the server
    SIGKILLed: the call's id."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    child.update(TOOLHOST_CONFIG="", **env)

    async def approve(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async def journey() -> str:
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "toolhost._cli", "serve"], env=child)
        found: list[str] = []
        with (tmp_path / "serve.err").open("a") as errlog, \
                contextlib.suppress(Exception, asyncio.CancelledError):
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write, elicitation_callback=approve) as session:
                await session.initialize()
                result = await session.call_tool("workspace.write_text", NOTE)
                meta = result.meta or {}
                assert meta["toolhost/status"] == "succeeded", result
                found.append(meta["toolhost/invocationId"])
                for pid in _children():
                    os.kill(pid, signal.SIGKILL)  # its session's run stays registered
        (invocation_id,) = found
        return invocation_id

    return asyncio.run(journey())


def as_killed_mid_call(env: dict[str, str], invocation_id: str) -> None:
    with closing(sqlite3.connect(Path(env["TOOLHOST_DATA_DIR"]) / DATABASE_NAME)) as conn, conn:
        conn.execute("UPDATE tool_invocations SET state = 'running', owner = ?, finished_at = "
                     "NULL, result_structured = NULL, result_content = NULL, output_trust = "
                     "NULL, failure_kind = NULL, reason_code = NULL, retryable = NULL "
                     "WHERE id = ?", (GONE, invocation_id))


def recovered(env: dict[str, str]) -> dict[str, Any]:
    done = toolhost("recover", "--json", env=env)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert isinstance(row, dict)
    return row


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "project").mkdir()
    return {"TOOLHOST_DATA_DIR": str(tmp_path / "d"), "TOOLHOST_PLUGINS": "toolhost-workspace",
            # workspace.write_text (WORKSPACE_WRITE/MEDIUM, IDEMPOTENT) asks the person.
            "TOOLHOST_POLICY": json.dumps({"WORKSPACE_WRITE/MEDIUM": "approval"})}


def test_a_call_approved_within_it_runs_again_in_its_runs_live_directory(
    env: dict[str, str], tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    invocation_id = approved_within_the_call(
        {**env, "TOOLHOST_MCP_WORKSPACE": str(project)}, tmp_path)
    shown = json.loads(toolhost("show", invocation_id, "--json", env=env).stdout)
    assert shown["operator_directory"]["path"] == str(project) and shown["decided_at"]
    (run_id, where) = toolhost("runs", "list", env=env).stdout.split()
    assert (run_id, where) == (shown["run_id"], str(project))  # live there still
    (project / "note.md").unlink()
    as_killed_mid_call(env, invocation_id)
    row = recovered(env)
    assert (row["action"], row["outcome"]["status"]) == ("rerun", "succeeded"), row
    assert (project / "note.md").read_text() == NOTE["content"]
    toolhost("runs", "end", run_id, env=env)


def test_a_call_approved_within_it_in_a_workspace_the_host_made_never_runs_in_a_directory(
    env: dict[str, str], tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    invocation_id = approved_within_the_call(env, tmp_path)
    shown = json.loads(toolhost("show", invocation_id, "--json", env=env).stdout)
    run_id = shown["run_id"]
    assert shown["operator_directory"] is None and shown["decided_at"]
    # The run ended, and its id named afresh in the operator's directory: another run.
    assert toolhost("runs", "end", run_id, env=env).returncode == 0
    named = toolhost("call", "workspace.list_files", "--args", "{}", "--run", run_id,
                     "--workspace", str(project), env=env)
    assert named.returncode == 0, named.stderr
    as_killed_mid_call(env, invocation_id)
    row = recovered(env)
    outcome = row["outcome"]
    assert (row["action"], outcome["status"], outcome["reason_code"]) == (
        "rerun", "failed", "tool.upstream_unavailable.workspace_unavailable"), row
    assert list(project.iterdir()) == []
    toolhost("runs", "end", run_id, env=env)
