"""A 2026-07-28 approval question still out when its session or server ends is taken back at
once, as its elicitation timeout would take it (D573): the call is left waiting, its row
`awaiting_approval` for `toolhost approve`, and the pause is logged as `mcp.awaiting_approval`
like every call left waiting (D567). Before, only the timeout's timer logged it, and a server
that stopped or a client that left first left the call waiting with no line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as types
from journeys.journey_support import run
from test_drain_answers_a_call_whose_form_is_open import deployment, logged


class Silent:
    """A person who never answers the question."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.set()
        await asyncio.sleep(300)
        return types.ElicitResult(action="decline")


def test_a_question_out_when_the_server_stops_leaves_its_call_waiting_and_logged(
    tmp_path: Path,
) -> None:
    people = deployment(tmp_path)
    silent = Silent()

    async def journey() -> None:
        async with people.http_server() as url, \
                people.modern_client("http", silent, url=url) as client:
            call = asyncio.ensure_future(
                client.call_tool("fxw.external_write", {"destination": "ops"}))
            await silent.asked.wait()
            people.servers[-1].terminate()
            await asyncio.to_thread(people.servers[-1].wait, 30)
            # The server is gone before the client leaves: the question was taken back by
            # its stop, not by the session's DELETE.
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)

    run(journey)
    assert [row["state"] for row in people.invocations()] == ["awaiting_approval"]
    assert len(logged(people, "mcp.awaiting_approval")) == 1


def test_a_question_out_when_the_stdio_client_leaves_leaves_its_call_waiting_and_logged(
    tmp_path: Path,
) -> None:
    people = deployment(tmp_path)
    silent = Silent()

    async def journey() -> None:
        async with people.modern_client("stdio", silent) as client:
            call = asyncio.ensure_future(
                client.call_tool("fxw.external_write", {"destination": "ops"}))
            await silent.asked.wait()
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)

    run(journey)
    assert [row["state"] for row in people.invocations()] == ["awaiting_approval"]
    assert len(logged(people, "mcp.awaiting_approval")) == 1
