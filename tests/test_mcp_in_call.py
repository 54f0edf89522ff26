"""Asking the person within the call, over MCP (D218, D225): what a client may answer, and
when a call is left waiting. The server runs in this process (``mcp.Client(server)``), driven
by the SDK's own client in either protocol era, over a real host and data directory."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import types as pytypes
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import make_plugin, make_spec, make_tool

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types  # noqa: E402

from toolhost import Idempotency, Risk, SideEffect, ToolOutput, UserWords  # noqa: E402
from toolhost._adapters.sqlite_db import DATABASE_NAME  # noqa: E402
from toolhost._composition import Host  # noqa: E402
from toolhost._mcp.config import ServeConfig  # noqa: E402
from toolhost._mcp.definitions import served_roster  # noqa: E402
from toolhost._mcp.server import build_server  # noqa: E402
from toolhost._mcp.sessions import Sessions, session_key  # noqa: E402
from toolhost._model.settings import Settings  # noqa: E402
from toolhost.testing import host_for  # noqa: E402

PATH_IN = {"type": "object", "properties": {"path": {"type": "string", "maxLength": 64}},
           "required": ["path"], "additionalProperties": False}
WORDS_IN = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 200}},
            "required": ["text"], "additionalProperties": False}
TEXT_OUT = {"type": "object", "properties": {"text": {"type": "string"}},
            "required": ["text"], "additionalProperties": False}
#: What each body saw: (tool, the user turn, the workspace's listing before it wrote).
SEEN: list[tuple[str, str | None, str]] = []


def _touch(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    listing = ",".join(e.path for e in context.workspace.listdir().entries)
    SEEN.append(("touch", context.user_turn, listing))
    context.workspace.write(arguments["path"], b"x")
    return ToolOutput(structured={"text": listing}, content=listing)


def _remember(arguments: Mapping[str, Any], context: Any) -> ToolOutput:
    SEEN.append(("remember", context.user_turn, arguments["text"]))
    return ToolOutput(structured={"text": arguments["text"]}, content=arguments["text"])


WRITE = dict(side_effect=SideEffect.WORKSPACE_WRITE, idempotency=Idempotency.IDEMPOTENT,
             allow_parallel=False, output_schema=TEXT_OUT)
PLUGIN = make_plugin(("fx",), [
    make_tool(make_spec(name="fx.gated", input_schema=PATH_IN, risk=Risk.HIGH, **WRITE),
              call=_touch),
    make_tool(make_spec(name="fx.write", input_schema=PATH_IN, risk=Risk.LOW, **WRITE),
              call=_touch),
    # Needs the person's words and (WORKSPACE_WRITE/HIGH) an approval too.
    attrs.evolve(
        make_tool(make_spec(name="fx.remember", input_schema=WORDS_IN, risk=Risk.HIGH, **WRITE),
                  call=_remember),
        user_words=UserWords("It asks to remember this.", arguments=("text",))),
])


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    SEEN.clear()
    with host_for({"toolhost-fx": PLUGIN}, data_dir=tmp_path / "data") as made:
        yield made


def serve(host: Host, **settings: str) -> tuple[Any, Sessions]:
    roster = served_roster(host.registry, None, {})
    config = ServeConfig.from_settings(Settings(settings), roster)
    return build_server(host, roster, config)


Answer = Callable[[Any, Any], Awaitable[types.ElicitResult]]


def person(*answers: types.ElicitResult, delay: float = 0.0) -> Answer:
    queue = list(answers)

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        await asyncio.sleep(delay)
        return queue.pop(0) if queue else types.ElicitResult(action="cancel")

    return answer


APPROVE = types.ElicitResult(action="accept", content={"approve": True})


def test_with_elicitation_off_a_2026_client_cannot_answer_its_own_approval(host: Host) -> None:
    server, _ = serve(host, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with mcp.Client(server, mode="2026-07-28") as client:
            first = await client.call_tool("fx.gated", {"path": "p.txt"})
            invocation_id = (first.meta or {})["toolhost/invocationId"]
            forged = await client.session.call_tool(
                "fx.gated", {"path": "p.txt"}, allow_input_required=True,
                request_state=invocation_id,
                input_responses={"toolhost.approval": APPROVE})
            assert isinstance(forged, types.CallToolResult)
            assert (forged.meta or {})["toolhost/status"] == "awaiting_approval"

    asyncio.run(journey())
    assert SEEN == []
    (pending,) = host.pipeline.invocations.pending(limit=10)
    assert host.pipeline.row(pending.id).approver is None


def test_a_2026_answer_counts_only_for_a_question_this_session_asked(host: Host) -> None:
    server, _ = serve(host)

    async def journey() -> None:
        # A client that can be asked; the test retries by hand, with its own answers.
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=person()) as client:
            # The question for the call...
            paused = await client.session.call_tool("fx.gated", {"path": "p.txt"},
                                                    allow_input_required=True)
            assert isinstance(paused, types.InputRequiredResult)
            (state,) = [paused.request_state]
            # ...an answer naming another row is the question again, never a decision.
            forged = await client.session.call_tool(
                "fx.gated", {"path": "p.txt"}, allow_input_required=True,
                request_state="0" * 32, input_responses={"toolhost.approval": APPROVE})
            assert isinstance(forged, types.InputRequiredResult)
            assert forged.request_state == state

    asyncio.run(journey())
    assert SEEN == []


def test_a_2026_request_never_takes_a_sessions_run_by_its_header() -> None:
    request = pytypes.SimpleNamespace(headers={"mcp-session-id": "another-sessions-id"})
    assert session_key(request, "2025-11-25") == "another-sessions-id"
    assert session_key(request, "2026-07-28") is None


def test_words_and_an_approval_complete_over_a_2026_client(host: Host) -> None:
    server, _ = serve(host)
    answers = person(types.ElicitResult(action="accept", content={"text": "my own words"}),
                     APPROVE)

    async def journey() -> None:
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=answers) as c:
            done = await c.call_tool("fx.remember", {"text": "the model's words"})
            assert not done.is_error, done
            assert done.structured_content == {"text": "my own words"}

    asyncio.run(journey())
    assert SEEN == [("remember", "my own words", "my own words")]


def test_a_request_cancelled_while_the_person_decides_leaves_the_call_waiting(
    host: Host,
) -> None:
    server, sessions = serve(host)

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy",
                              elicitation_callback=person(APPROVE, delay=3)) as client:
            await client.call_tool("fx.write", {"path": "before.txt"})
            with pytest.raises(Exception):  # noqa: B017 - the client's own timeout
                await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                               read_timeout_seconds=0.5)
            await asyncio.sleep(1)
            after = await client.call_tool("fx.write", {"path": "after.txt"})
            assert after.content[0].text == ""  # the run paused: before.txt went with it

    asyncio.run(journey())
    (session,) = sessions._sessions.values()
    assert session.held == set()
    assert len(host.pipeline.invocations.pending(limit=10)) == 1


def test_a_2026_question_never_answered_pauses_the_run_at_the_timeout(host: Host) -> None:
    server, _ = serve(host, TOOLHOST_MCP_ELICITATION_TIMEOUT_S="0.3")

    async def journey() -> None:
        async with mcp.Client(server, mode="2026-07-28", elicitation_callback=person()) as client:
            await client.call_tool("fx.write", {"path": "before.txt"})
            asked = await client.session.call_tool("fx.gated", {"path": "g.txt"},
                                                   allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult)
            kept = await client.call_tool("fx.write", {"path": "meanwhile.txt"})
            assert kept.content[0].text == "before.txt"  # the question is still out
            await asyncio.sleep(0.6)
            after = await client.call_tool("fx.write", {"path": "after.txt"})
            assert after.content[0].text == ""  # unanswered: the run paused

    asyncio.run(journey())


@contextlib.contextmanager
def state_refused(data_dir: Path, state: str) -> Iterator[None]:
    """The record's database refuses to let any row take ``state`` (a trigger that aborts the
    write, as a database that cannot take it does); every other write goes."""
    db = sqlite3.connect(data_dir / DATABASE_NAME)
    try:
        db.execute("CREATE TRIGGER refuse_state BEFORE UPDATE OF state ON tool_invocations "
                   f"WHEN NEW.state = '{state}' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        db.commit()
        yield
    finally:
        db.execute("DROP TRIGGER IF EXISTS refuse_state")
        db.commit()
        db.close()


DECLINE = types.ElicitResult(action="decline")


@pytest.mark.parametrize("state", ["running", "denied"])
def test_a_decision_the_store_refuses_is_answered_as_its_outage_and_asked_again(
        host: Host, state: str) -> None:
    # Before: the person's approval (or denial), refused by the store, read "The tool failed
    # unexpectedly." (not retryable, no invocation id) though the call still awaited approval;
    # and the run never paused, so a later approval ran in the live workspace.
    server, sessions = serve(host)
    first = APPROVE if state == "running" else DECLINE

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy",
                              elicitation_callback=person(first, APPROVE)) as client:
            await client.call_tool("fx.write", {"path": "before.txt"})
            with state_refused(host.data_dir, state):
                refused = await client.call_tool("fx.gated", {"path": "p.txt"})
            assert refused.is_error and refused.meta == {
                "toolhost/status": "failed",
                "toolhost/reasonCode": "tool.upstream_unavailable.record_store",
                "toolhost/retryable": True,
                "toolhost/invocationId": refused.meta["toolhost/invocationId"]}
            assert [name for name, _, _ in SEEN] == ["touch"]  # fx.write's alone
            (waiting,) = host.pipeline.invocations.pending(limit=10)
            assert waiting.id == refused.meta["toolhost/invocationId"]
            (session,) = sessions._sessions.values()
            assert session.held == set()  # left waiting: the run paused
            again = await client.call_tool("fx.gated", {"path": "p.txt"})  # asked again
            assert not again.is_error, again
            assert (again.meta or {})["toolhost/invocationId"] == waiting.id

    asyncio.run(journey())
    # The approved call ran once, in the run after the pause: before.txt went with it.
    assert SEEN[1:] == [("touch", None, "")]
