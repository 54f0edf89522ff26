"""An MCP session's ``GET`` event stream lasts only while its token does: the front door checks
the token again every ``STREAM_RECHECK_S`` (as a new request would be) and ends the stream of
one removed from the token file; a token still in the file keeps its stream. Before, the
stream was one request, checked once when it opened: it stayed open for as long as the client
kept it, and, counted as in flight, kept its session from ever idling out.

A real ``toolhost serve --http`` on 127.0.0.1, the streams held by httpx as a client holds
them."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, run, write_tokens

from toolhost._mcp.http_front import STREAM_RECHECK_S

ADA, BOB = "ada-token-7f3e", "bob-token-91c2"
VERSION = "2025-11-25"
#: TOOLHOST_HTTP_SESSION_IDLE_S: a session with nothing in flight this long ends.
IDLE_S = 2.0
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": VERSION, "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}}


async def opened_stream(client: httpx.AsyncClient, url: str,
                        token: str) -> tuple[httpx.Response, dict[str, str]]:
    """A session of ``token``'s, and its GET stream, open (the answer's headers read); and
    the headers of a request in that session."""
    auth = {"Authorization": f"Bearer {token}"}
    opened = await client.post(url, json=INITIALIZE, headers={
        **auth, "Accept": "application/json, text/event-stream"})
    assert opened.status_code == 200, opened.text
    session = {**auth, "mcp-session-id": opened.headers["mcp-session-id"],
               "mcp-protocol-version": VERSION}
    initialized = await client.post(url, headers={**session, "Accept": "application/json, "
                                                  "text/event-stream"},
                                    json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert initialized.status_code == 202, initialized.text
    stream = await client.send(client.build_request("GET", url, headers={
        **session, "Accept": "text/event-stream"}), stream=True)
    assert stream.status_code == 200
    return stream, session


async def ended(stream: httpx.Response) -> None:
    """Until the server ends the stream (its body read to the end)."""
    async for _ in stream.aiter_raw():
        pass


def test_a_stream_ends_when_its_token_leaves_the_file(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.toml", (ADA, "ada", []), (BOB, "bob", []))
    people = Deployment(tmp_path, plugins="toolhost-math",
                        TOOLHOST_HTTP_TOKENS_FILE=str(tokens), TOOLHOST_LOG_LEVEL="info",
                        TOOLHOST_HTTP_SESSION_IDLE_S=str(IDLE_S))

    async def journey() -> None:
        async with people.http_server() as url, httpx.AsyncClient(timeout=60) as client:
            ada, adas_session = await opened_stream(client, url, ADA)
            bob, _ = await opened_stream(client, url, BOB)
            write_tokens(tokens, (BOB, "bob", []))  # Ada's token revoked
            revoked = time.monotonic()
            with anyio.fail_after(3 * STREAM_RECHECK_S):
                await ended(ada)
            assert time.monotonic() - revoked <= 3 * STREAM_RECHECK_S
            # Bob's token is still in the file: his stream outlives another check.
            with anyio.move_on_after(STREAM_RECHECK_S + 2) as waited:
                await ended(bob)
            assert waited.cancelled_caught, "a valid token's stream was ended"
            # Ada's session, no longer held by a stream, idled out: her token given back, it
            # is gone ("Session not found"), while Bob's stream still holds his.
            await anyio.sleep(IDLE_S + 1)
            write_tokens(tokens, (ADA, "ada", []), (BOB, "bob", []))
            ping = await client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                                     headers={**adas_session, "Accept": "application/json, "
                                              "text/event-stream"})
            assert ping.status_code == 404, ping.text
            await bob.aclose()
            await ada.aclose()

    run(journey)
    # Said once, for Ada's stream only.
    assert people.stderr().count("http.stream.revoked") == 1
    assert '"event": "http.stream.revoked", "level": "info", "principal": "ada"' in \
        people.stderr()
