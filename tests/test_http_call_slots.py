"""`toolhost serve --http`: a call holds its principal's slot until the call ends, not only
while its POST is open (D366), and a frame stdio refuses is refused the same way (D368).

Real servers (subprocesses) driven with raw HTTP (httpx): what a client that drops its
connections, or sends a batch, does."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import run
from test_http_serve import ADA, INITIALIZE, MCP_HEADERS, deployment, post

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
INVALID_REQUEST = {"code": -32600, "message": "Invalid Request"}


def open_session(url: str) -> str:
    opened = post(url, INITIALIZE, token=ADA)
    sid = opened.headers["mcp-session-id"]
    assert post(url, INITIALIZED, token=ADA, **{"mcp-session-id": sid}).status_code == 202
    return sid


def call(rid: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


def dropped(url: str, sid: str, frame: dict[str, Any]) -> None:
    """POST ``frame`` and drop the connection half a second later, without cancelling."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {ADA}", "mcp-session-id": sid,
               "mcp-protocol-version": "2025-11-25"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url, content=json.dumps(frame).encode(), headers=headers, timeout=0.5)


def test_a_call_whose_post_was_dropped_keeps_its_principals_slot_until_it_ends(
        tmp_path: Path) -> None:
    people = deployment(tmp_path, TOOLHOST_HTTP_MAX_CALLS="1")

    async def journey() -> None:
        async with people.http_server() as url:
            sid = await asyncio.to_thread(open_session, url)
            await asyncio.to_thread(dropped, url, sid, call(2, "fxw.slow", {"seconds": 3}))
            # The dropped POST was no cancellation: the call runs on, and holds the one slot.
            busy = await asyncio.to_thread(post, url, call(3, "math.calculate",
                                                           {"expression": "1"}),
                                           token=ADA, **{"mcp-session-id": sid})
            assert (busy.status_code, busy.headers["retry-after"]) == (429, "1")
            # Once it has ended, the slot is the principal's again.
            deadline = time.monotonic() + 30
            while True:
                again = await asyncio.to_thread(post, url, call(4, "math.calculate",
                                                                {"expression": "2"}),
                                                token=ADA, **{"mcp-session-id": sid})
                if again.status_code != 429:
                    break
                assert time.monotonic() < deadline, "the slot was never given back"
                await asyncio.sleep(0.2)
            assert again.status_code == 200 and '"isError":false' in again.text

    run(journey)
    rows = {r["tool_name"]: r for r in people.invocations()}
    # The dropped call ran to its end and was recorded so: no row is left running.
    assert (rows["fxw.slow"]["state"], rows["math.calculate"]["state"]) == (
        "succeeded", "succeeded")
    assert len(people.invocations()) == 2


@pytest.mark.parametrize("body", [
    [],
    [{"jsonrpc": "2.0", "id": 11, "method": "ping"}],
    [call(13, "math.calculate", {"expression": "1+1"})],
    {"id": 14, "method": "ping"},
    {"jsonrpc": "1.0", "id": 15, "method": "ping"},
], ids=["empty batch", "batch", "batch with a call", "no jsonrpc", "jsonrpc 1.0"])
def test_a_frame_stdio_refuses_is_refused_as_on_stdio(tmp_path: Path, body: Any) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            sid = await asyncio.to_thread(open_session, url)
            answer = await asyncio.to_thread(post, url, body, token=ADA,
                                             **{"mcp-session-id": sid})
            rid = body.get("id") if isinstance(body, dict) else None
            assert answer.status_code == 400
            assert answer.json() == {"jsonrpc": "2.0", "id": rid, "error": INVALID_REQUEST}

    run(journey)
    assert people.invocations() == []
