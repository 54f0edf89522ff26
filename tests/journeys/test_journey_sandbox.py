"""Journeys through the sandbox: a person's agent writes a script, runs it (the person
approves each run), reads what it made, runs a second step on it, and hands the result back
as a file the client can read.

Under the default policy every sandbox.run_command needs approval (CODE_EXECUTION/HIGH).
Approved in the call, through the client's form, it is no pause: the run keeps its workspace,
so the command sees the files written before it and later calls see the files it wrote.
Approved by the operator (`toolhost approve ID`, elicitation off), the paused run lost its
workspace, so the command starts in an empty one; what it writes reaches the session's next
calls all the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types

from .journey_support import (
    Deployment,
    Person,
    Transport,
    artifact_uri,
    meta,
    ok,
    one_link,
    read_resource_bytes,
    resource_uris,
    run,
    text_of,
)

PLUGINS = "toolhost-workspace,toolhost-sandbox,toolhost-artifact"

GEN_SH = "printf 'name,qty\\napples,3\\npears,5\\n' > out.csv\n"
OUT_CSV = "name,qty\napples,3\npears,5\n"
#: The second step: counts out.csv's rows and repeats its last one.
SUMMARIZE = '{ echo "rows: $(($(wc -l < out.csv) - 1))"; tail -n 1 out.csv; } > result.txt'
RESULT_TXT = b"rows: 2\npears,5\n"


def _ran(result: types.CallToolResult, what: str) -> dict[str, Any]:
    """The structured result of a command that ran and exited 0."""
    done = ok(result)
    assert (done["exit_code"], done["timed_out"]) == (0, False), f"{what}: {done!r}"
    return done


def test_a_script_approved_in_the_client_builds_on_the_workspace_and_the_result_comes_back(
        tmp_path: Path, transport: Transport) -> None:
    deployment = Deployment(tmp_path, plugins=PLUGINS)
    person = Person()

    async def journey() -> None:
        async with deployment.session(transport, person=person) as client:
            ok(await client.call_tool("workspace.write_text",
                                      {"path": "gen.sh", "content": GEN_SH}))

            # The person approves the run in the client; the script is still there.
            _ran(await client.call_tool("sandbox.run_command", {"command": "sh gen.sh"}),
                 "sh gen.sh (approved in the call) should find gen.sh in the workspace")
            made = ok(await client.call_tool("workspace.read_text", {"path": "out.csv"}))
            assert made["content"] == OUT_CSV

            # A second step works on what the first made.
            _ran(await client.call_tool("sandbox.run_command", {"command": SUMMARIZE}),
                 "the second command should find out.csv")

            # The result leaves the workspace as a file the client can fetch.
            exported = await client.call_tool("artifact.export", {"path": "result.txt"})
            artifact = ok(exported)
            assert artifact["byte_count"] == len(RESULT_TXT)
            link = one_link(exported)
            assert link.uri == artifact_uri(artifact["id"])
            assert (link.name, link.mime_type, link.size) == (
                artifact["name"], artifact["media_type"], len(RESULT_TXT))

            assert client.initialize_result is not None
            assert client.initialize_result.capabilities.resources is not None
            content, mime_type = await read_resource_bytes(client, link.uri)
            assert content == RESULT_TXT
            assert mime_type == artifact["media_type"]
            assert await resource_uris(client) == [link.uri]

    run(journey)
    assert person.kinds() == ["approval", "approval"]
    assert person.approved_tools() == ["sandbox.run_command", "sandbox.run_command"]
    runs = [(r["tool_name"], r["state"]) for r in deployment.invocations()]
    assert runs == [("workspace.write_text", "succeeded"), ("sandbox.run_command", "succeeded"),
                    ("workspace.read_text", "succeeded"), ("sandbox.run_command", "succeeded"),
                    ("artifact.export", "succeeded")]


#: Self-contained: an operator-approved command starts in an empty workspace.
MAKE_TABLE = "printf 'a,b\\n1,2\\n' > table.csv"
TABLE_CSV = "a,b\n1,2\n"


def test_an_operator_approved_command_leaves_its_files_to_the_session(
        tmp_path: Path, transport: Transport) -> None:
    deployment = Deployment(tmp_path, plugins=PLUGINS, TOOLHOST_MCP_ELICITATION="off")
    person = Person()  # the client could ask, but the server must not

    async def journey() -> None:
        async with deployment.session(transport, person=person) as client:
            arguments = {"command": MAKE_TABLE}
            paused = await client.call_tool("sandbox.run_command", arguments)
            assert paused.is_error
            assert meta(paused, "status") == "awaiting_approval"
            invocation_id = meta(paused, "invocationId")
            assert isinstance(invocation_id, str) and invocation_id
            assert f"toolhost approve {invocation_id}" in text_of(paused)

            # The operator sees it pending and approves it at the command line.
            pending = await deployment.operator("pending", "--json")
            assert invocation_id in pending.stdout, pending
            approved = await deployment.operator("approve", invocation_id)
            assert approved.returncode == 0, approved

            # The same call again: the recorded result, not a second run.
            recorded = await client.call_tool("sandbox.run_command", arguments)
            _ran(recorded, "the recorded result of the approved command")
            assert meta(recorded, "invocationId") == invocation_id

            # The session's next calls see what the approved command wrote.
            read = await client.call_tool("workspace.read_text", {"path": "table.csv"})
            assert ok(read)["content"] == TABLE_CSV, "the approved command's file is missing"
            exported = await client.call_tool("artifact.export", {"path": "table.csv"})
            artifact = ok(exported)
            link = one_link(exported)
            assert link.uri == artifact_uri(artifact["id"])
            content, _ = await read_resource_bytes(client, link.uri)
            assert content == TABLE_CSV.encode()
            assert await resource_uris(client) == [link.uri]

            # The recorded result is returned once: the same call after that asks anew.
            again = await client.call_tool("sandbox.run_command", arguments)
            assert meta(again, "status") == "awaiting_approval"
            assert meta(again, "invocationId") != invocation_id

    run(journey)
    assert person.asked == []
    commands = [r["state"] for r in deployment.invocations()
                if r["tool_name"] == "sandbox.run_command"]
    assert commands == ["succeeded", "awaiting_approval"]


def test_a_command_approved_after_the_sessions_deadline_does_not_run(
        tmp_path: Path, transport: Transport) -> None:
    # The run's deadline is on the row: an approval that comes after it ends the call unrun,
    # whichever process approves it.
    deployment = Deployment(tmp_path, plugins=PLUGINS, TOOLHOST_MCP_ELICITATION="off",
                            TOOLHOST_MCP_RUN_TIMEOUT_S="2")

    async def journey() -> None:
        async with deployment.session(transport) as client:
            arguments = {"command": "touch ran"}
            paused = await client.call_tool("sandbox.run_command", arguments)
            invocation_id = meta(paused, "invocationId")
            assert meta(paused, "status") == "awaiting_approval"
            await anyio.sleep(2.2)
            late = await deployment.operator("approve", invocation_id, "--json")
            assert late.returncode == 1, late
            assert json.loads(late.stdout)["reason_code"] == "tool.timeout.run_deadline_passed"
            # The model is told once, in the same static words.
            told = await client.call_tool("sandbox.run_command", arguments)
            assert meta(told, "reasonCode") == "tool.timeout.run_deadline_passed"
            assert "deadline passed" in text_of(told)

    run(journey)
    (row,) = deployment.invocations()
    assert (row["state"], row["reason_code"], row["started_at"]) == (
        "failed", "tool.timeout.run_deadline_passed", None)
