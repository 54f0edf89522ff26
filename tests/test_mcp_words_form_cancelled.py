"""A words call (``Tool.user_words``) whose request ends while the person has the words form
open: the client cancels it (``notifications/cancelled``) or goes away. No row exists yet (the
form comes before the pipeline), so the MCP layer records the call itself: one row, ``failed``
``tool.cancelled.run_cancelled`` as any cancelled call's, the model's arguments and no user
turn, unrun, one log line, and the session goes on. The server runs in this process
(``mcp.Client(server)``, as in ``test_mcp_in_call``), driven by the SDK's own client over a
real host and SQLite record. Only a 2025 session holds the form open within the request: a
2026-07-28 client gets it in an ``InputRequiredResult``, and no request waits on it."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from typing import Any

import pytest

mcp = pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from test_mcp_cancelled_gated_call import cancelled, until  # noqa: E402
from test_mcp_in_call import SEEN, host, serve  # noqa: E402,F401
from test_mcp_session_rules import ParkedHandler, served_over_http  # noqa: E402
from test_mcp_words_journeys import MODEL, WORDS  # noqa: E402

from toolhost._composition import Host  # noqa: E402
from toolhost._model import host_reasons as core_messages  # noqa: E402

#: How long the person takes over the form: longer than the test waits to cancel.
READING_S = 1.0


class _SlowPerson:
    """A person who opens the words form, reads it for ``READING_S``, then gives their words
    (an answer that arrives after its request ended)."""

    def __init__(self) -> None:
        self.asked = 0

    def form_open(self) -> bool:
        return self.asked > 0

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked += 1
        await asyncio.sleep(READING_S)
        return WORDS


def _rows(host: Host) -> list[tuple[str, str | None, Any, str | None]]:  # noqa: F811
    """fx.remember's rows: state, reason code, arguments, user turn."""
    return [(r.state.value, r.reason_code, r.arguments, r.user_turn)
            for r in host.pipeline.invocations.list(tool_name="fx.remember")]


def _assert_recorded_cancelled(host: Host, logged: io.StringIO,  # noqa: F811
                               *errors: str) -> None:
    """One row, cancelled and unrun, with the model's arguments; its lines in the log: the
    question's end (how the server learnt of it, one of ``errors``), then the row's."""
    assert _rows(host) == [("failed", core_messages.RUN_CANCELLED, MODEL, None)]
    assert not [seen for seen in SEEN if seen[0] == "remember"]
    lines = [json.loads(line) for line in logged.getvalue().splitlines()]
    (ended,) = [e for e in lines if e["event"] == "mcp.words.unanswered"]
    assert ended["error"] in errors
    assert [e["reason_code"] for e in lines if e["event"] == "pipeline.failed"] == [
        core_messages.RUN_CANCELLED]
    assert "Traceback" not in logged.getvalue()


def test_a_words_call_cancelled_while_the_form_is_open_is_recorded_cancelled_once(
        host: Host, logged: io.StringIO) -> None:  # noqa: F811
    # Before: no row and no log line; the call the model made left no trace.
    server, _ = serve(host)
    slow = _SlowPerson()

    async def journey() -> None:
        async with mcp.Client(server, mode="legacy", elicitation_callback=slow) as c:
            await cancelled(c.call_tool("fx.remember", MODEL), slow.form_open,
                            lambda: bool(_rows(host)))
            # The person's late answer is for a request that is gone: nothing more recorded.
            await asyncio.sleep(READING_S)
            # The session goes on: the server is not held by the cancelled call.
            after = await c.call_tool("fx.write", {"path": "after.txt"})
            assert not after.is_error, after

    asyncio.run(journey())
    assert slow.asked == 1
    _assert_recorded_cancelled(host, logged, "CancelledError")


def test_a_words_call_whose_client_goes_away_while_the_form_is_open_is_recorded_cancelled(
        host: Host, logged: io.StringIO) -> None:  # noqa: F811
    # The client's connection closes under the call (a stdio client gone): the SDK answers the
    # question still out "Connection closed". Before: recorded user_declined, as though the
    # person had refused, against docs/mcp.md's "goes away mid-call: run_cancelled".
    server, _ = serve(host)
    slow = _SlowPerson()

    async def journey() -> asyncio.Future[Any]:
        async with mcp.Client(server, mode="legacy", elicitation_callback=slow) as c:
            call = asyncio.ensure_future(c.call_tool("fx.remember", MODEL))
            await until(slow.form_open, "the form was never put to the person")
        return call

    call = asyncio.run(journey())
    with contextlib.suppress(BaseException):  # the client's own error for a closed session
        call.result()
    _assert_recorded_cancelled(host, logged, "MCPError")


def test_a_words_call_whose_http_session_ends_while_the_form_is_open_is_recorded_cancelled(
        host: Host, logged: io.StringIO) -> None:  # noqa: F811
    # The client ends its session (DELETE) with the call out: the server cancels the call's
    # handler. Before: no row and no log line.
    slow = _SlowPerson()

    async def journey() -> None:
        async with served_over_http(host, ParkedHandler(), max_calls=16) as (url, _):
            async with streamable_http_client(url) as (read, write, *_), ClientSession(
                    read, write, elicitation_callback=slow) as session:
                await session.initialize()
                call = asyncio.ensure_future(session.call_tool("fx.remember", MODEL))
                await until(slow.form_open, "the form was never put to the person")
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            await until(lambda: bool(_rows(host)), "nothing was recorded")

    asyncio.run(journey())
    # Told by the session's end: its streams closing ("Connection closed") or its handler
    # cancelled, whichever reaches the call first; either way it ends as cancelled, once.
    _assert_recorded_cancelled(host, logged, "MCPError", "CancelledError")
