"""A call whose form is open when `toolhost serve --http` stops, or when its session ends.

At the drain's end (SIGTERM, then ``TOOLHOST_HTTP_DRAIN_S``) each call left is cancelled
through its run and answers before uvicorn closes its stream (D238, D240). A call whose person
has the approval form open is then left waiting, as any call whose request is cancelled while
the person decides (mcp.md "Approvals" step 2, D218, D454): its answer is ``isError`` with the
pending invocation id and ``toolhost approve ID``, its row stays ``awaiting_approval`` for the
operator to decide later, and the pause is logged as ``mcp.awaiting_approval``. A call whose
person has the words form open ends cancelled (nobody declined, mcp.md "The person's own
words"), answered the same way. A call left waiting because its client ended the session while
the form was open answers nobody, but its pause is logged all the same.

Real servers (subprocesses) driven by the SDK's own client, on a 2025-11-25 session (the form
pushed as ``elicitation/create`` within the call)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from installed import install_fake_plugin

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types
from journeys.journey_support import Deployment, http_client, meta, run, text_of
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from toolhost._model import host_reasons as core_messages

FIXTURE = Path(__file__).with_name("mcp_fixture_plugin.py")

#: One more tool for the fixture plugin: ``fxw.note`` needs the person's own words (allowed by
#: the default policy, so only the words form is put).
NOTE = '''
    from toolhost import UserWords

    def note(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        _log(settings, "noted " + arguments["text"])
        return ToolOutput(structured={"text": arguments["text"]}, content=arguments["text"])

    text = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 200}},
            "required": ["text"], "additionalProperties": False}
    noted = _spec("fxw.note", text, text, side_effect=SideEffect.NONE, risk=Risk.LOW,
                  idempotency=Idempotency.IDEMPOTENT, required_scopes=())
    return [Tool(WRITE, call=write), Tool(SLOW, call=slow),
            Tool(noted, call=note, user_words=UserWords("It asks to note this.",
                                                        arguments=("text",)))]'''


class Silent:
    """A person who opens each form and never answers it (within the test)."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.forms: list[set[str]] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.forms.append(set(dict(params.requested_schema).get("properties") or {}))
        self.opened.set()
        await asyncio.sleep(300)
        return types.ElicitResult(action="decline")


def deployment(tmp_path: Path) -> Deployment:
    source = FIXTURE.read_text()
    last = "    return [Tool(WRITE, call=write), Tool(SLOW, call=slow)]"
    assert last in source
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-mcp", "fake_mcp", source.replace(last, NOTE))
    # A drain of one second, and a form the server would otherwise wait a minute on.
    return Deployment(tmp_path, plugins="fake-mcp", PYTHONPATH=str(site),
                      FXW_LOG=str(tmp_path / "fxw.log"), TOOLHOST_HTTP_DRAIN_S="1",
                      TOOLHOST_MCP_ELICITATION_TIMEOUT_S="60")


def logged(people: Deployment, event: str) -> list[dict[str, Any]]:
    """The server's log lines of ``event``."""
    lines = [json.loads(line) for line in people.stderr().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == event]


def test_at_the_drains_end_a_call_whose_approval_form_is_open_is_answered_left_waiting(
        tmp_path: Path) -> None:
    people = deployment(tmp_path)
    silent = Silent()
    answered: list[types.CallToolResult] = []

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, person=silent) as client:
            await client.list_tools()
            call = asyncio.ensure_future(
                client.call_tool("fxw.external_write", {"destination": "ops"}))
            await silent.opened.wait()
            people.servers[-1].terminate()  # SIGTERM: the form is still open at the drain's end
            answered.append(await call)

    run(journey)
    (result,) = answered
    (row,) = people.invocations()
    assert silent.forms == [{"approve"}]
    # Answered, before the server closed the stream: left waiting, with what to tell the
    # operator; the row waits for them.
    assert result.is_error
    assert meta(result, "status") == "awaiting_approval"
    assert meta(result, "invocationId") == row["id"]
    assert f"toolhost approve {row['id']}" in text_of(result)
    assert (row["state"], row["reason_code"]) == ("awaiting_approval", None)
    (paused,) = logged(people, "mcp.awaiting_approval")
    assert (paused["invocation_id"], paused["approve"]) == (
        row["id"], f"toolhost approve {row['id']}")
    # The operator decides it later, with the server stopped: it runs once.
    approved = people.toolhost("approve", row["id"])
    assert approved.returncode == 0, approved.stderr
    (row,) = people.invocations()
    assert row["state"] == "succeeded"
    assert (tmp_path / "fxw.log").read_text() == "wrote ops\n"


def test_at_the_drains_end_a_call_whose_words_form_is_open_is_answered_cancelled(
        tmp_path: Path) -> None:
    people = deployment(tmp_path)
    silent = Silent()
    answered: list[types.CallToolResult] = []

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, person=silent) as client:
            await client.list_tools()
            call = asyncio.ensure_future(client.call_tool("fxw.note", {"text": "the model's"}))
            await silent.opened.wait()
            people.servers[-1].terminate()
            answered.append(await call)

    run(journey)
    (result,) = answered
    (row,) = people.invocations()
    assert silent.forms == [{"text"}]
    assert result.is_error
    assert meta(result, "reasonCode") == core_messages.RUN_CANCELLED
    assert (row["state"], row["reason_code"], row["user_turn"]) == (
        "failed", core_messages.RUN_CANCELLED, None)
    assert json.loads(row["arguments"]) == {"text": "the model's"}
    assert not (tmp_path / "fxw.log").exists()  # nothing ran


def test_a_call_whose_request_is_cancelled_mid_form_is_left_waiting_and_logs_its_pause(
        tmp_path: Path) -> None:
    people = deployment(tmp_path)
    silent = Silent()

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, person=silent) as client:
            await client.list_tools()
            call = asyncio.ensure_future(
                client.call_tool("fxw.external_write", {"destination": "ops"}))
            await silent.opened.wait()
            call.cancel()  # the client gives up on it (notifications/cancelled): nobody answers
            await asyncio.gather(call, return_exceptions=True)
            for _ in range(600):  # the server lets the request go, and says so
                if logged(people, "mcp.awaiting_approval"):
                    break
                await asyncio.sleep(0.05)
            # The session goes on.
            assert (await client.call_tool("fxw.slow", {"seconds": 0})).is_error is False

    run(journey)
    row = people.invocations()[0]
    assert (row["tool_name"], row["state"], row["reason_code"]) == (
        "fxw.external_write", "awaiting_approval", None)
    (paused,) = logged(people, "mcp.awaiting_approval")
    assert (paused["invocation_id"], paused["approve"]) == (
        row["id"], f"toolhost approve {row['id']}")


def test_a_call_left_waiting_when_its_client_ends_the_session_mid_form_logs_its_pause(
        tmp_path: Path) -> None:
    people = deployment(tmp_path)
    silent = Silent()
    sessions: list[str] = []

    async def session_of(response: Any) -> None:
        if "mcp-session-id" in response.headers:
            sessions.append(response.headers["mcp-session-id"])

    async def journey() -> None:
        async with people.http_server() as url, http_client(None) as http:
            http.event_hooks["response"].append(session_of)
            async with streamable_http_client(url, http_client=http) as (read, write, *_), \
                    ClientSession(read, write, elicitation_callback=silent) as client:
                await client.initialize()
                call = asyncio.ensure_future(
                    client.call_tool("fxw.external_write", {"destination": "ops"}))
                await silent.opened.wait()
                # The person's client goes away, ending its session (DELETE) with the form open.
                ended = await http.delete(url, headers={"mcp-session-id": sessions[-1],
                                                        "mcp-protocol-version": "2025-11-25"})
                assert ended.status_code == 200
                for _ in range(600):  # the server lets the request go, and says so
                    if logged(people, "mcp.awaiting_approval"):
                        break
                    await asyncio.sleep(0.05)
                await asyncio.wait({call}, timeout=5)
                call.cancel()
                await asyncio.gather(call, return_exceptions=True)

    run(journey)
    (row,) = people.invocations()
    assert (row["state"], row["reason_code"]) == ("awaiting_approval", None)
    (paused,) = logged(people, "mcp.awaiting_approval")
    assert (paused["invocation_id"], paused["approve"]) == (
        row["id"], f"toolhost approve {row['id']}")
