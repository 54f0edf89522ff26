"""Each principal's request bodies in flight are bounded (D333): twice the largest body, over
all its requests until each ends. Before, one token's concurrent largest bodies were each
held, parsed and copied on the event loop: 16 bodies of 8 MiB held ``/healthz`` for 6.7 s,
and a thousand connections could hold 8 GiB. The front door alone, driven as uvicorn drives
it (each ASGI message scripted); a real server in test_http_serve.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import write_tokens

from toolhost._mcp.http_auth import TokenFile
from toolhost._mcp.http_front import FrontDoor, HttpPolicy

#: The largest body of these doors: a principal's bodies in flight hold at most twice that.
LARGEST = 40
#: A body of exactly LARGEST bytes that the door reads as a JSON-RPC message (a notification:
#: no answer due; the door refuses what is not one, D368).
FULL = b'{"jsonrpc":"2.0","method":"notes/hello"}'
assert len(FULL) == LARGEST


class HeldApp:
    """The SDK's app, standing in: it notes each body it gets and answers when released."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.release = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        self.bodies.append(message["body"])
        await self.release.wait()
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def holding(self, count: int) -> None:
        while len(self.bodies) < count:
            await asyncio.sleep(0.001)


def door_for(app: Any, tokens: TokenFile | None = None) -> FrontDoor:
    return FrontDoor(app, HttpPolicy(allowed_hosts=("testserver",), allowed_origins=(),
                                     max_body_bytes=LARGEST, max_calls=16, tokens=tokens),
                     ready=lambda: True, monotonic=time.monotonic)


async def post(door: FrontDoor, chunks: list[bytes], *, declared: bool = True,
               token: str | None = None,
               extra: tuple[tuple[bytes, bytes], ...] = ()) -> tuple[int, dict[str, str], int]:
    """One POST of ``chunks`` (with its Content-Length, or chunked): its status, headers, and
    how many of its chunks the door read."""
    headers = [(b"host", b"testserver"), (b"content-type", b"application/json"), *extra]
    if declared:
        headers.append((b"content-length", str(sum(map(len, chunks))).encode()))
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    read = 0
    answer: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        nonlocal read
        if read == len(chunks):
            await asyncio.Event().wait()  # the connection stays open, silent
        read += 1
        return {"type": "http.request", "body": chunks[read - 1],
                "more_body": read < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers,
             "query_string": b""}
    await door(scope, receive, send)
    return answer["status"], answer["headers"], read


@contextlib.asynccontextmanager
async def in_flight(*requests: Awaitable[Any]) -> AsyncIterator[list[asyncio.Task[Any]]]:
    tasks = [asyncio.ensure_future(r) for r in requests]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_a_body_past_its_principals_budget_is_429_and_never_reaches_the_app() -> None:
    async def scenario() -> None:
        app = HeldApp()
        door = door_for(app)
        async with in_flight(post(door, [FULL]), post(door, [FULL])) as held:
            await app.holding(2)
            status, headers, read = await post(door, [b"{}"])
            assert (status, headers.get("retry-after"), read) == (429, "1", 0)
            assert door.refused["body_budget"] == 1
            app.release.set()
            assert [(await t)[0] for t in held] == [202, 202]
        # Given back when the requests ended: the next one passes.
        assert (await post(door, [FULL]))[0] == 202
        assert app.bodies == [FULL, FULL, FULL]

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_chunked_body_is_counted_as_it_arrives() -> None:
    async def scenario() -> None:
        app = HeldApp()
        door = door_for(app)
        chunked = [b'{"jsonrpc":"2.0",', b'"method":"notes/one"}']
        async with in_flight(post(door, [FULL]), post(door, chunked, declared=False)) as held:
            await app.holding(2)
            # 78 held: 2 more fit, 3 more would pass 80: refused there, the rest unread.
            status, _, read = await post(door, [b'{"', b'b":', b"1}"], declared=False)
            assert (status, read) == (429, 2)
            app.release.set()
            assert [(await t)[0] for t in held] == [202, 202]
        # Every share was given back, the refused request's too: two largest fit at once.
        app.release = asyncio.Event()
        async with in_flight(post(door, [FULL]), post(door, [FULL])) as again:
            await app.holding(4)
            app.release.set()
            assert [(await t)[0] for t in again] == [202, 202]

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_declared_length_past_the_largest_body_is_413_before_a_byte_is_read() -> None:
    async def scenario() -> None:
        app = HeldApp()
        door = door_for(app)
        status, _, read = await post(door, [FULL + b" "])
        assert (status, read) == (413, 0)
        assert app.bodies == []

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_one_principals_full_budget_leaves_anothers_alone(tmp_path: Path) -> None:
    tokens = TokenFile(write_tokens(tmp_path / "tokens.toml", ("tok-ada", "ada", []),
                                    ("tok-bob", "bob", [])))

    async def scenario() -> None:
        app = HeldApp()
        door = door_for(app, tokens)
        async with in_flight(post(door, [FULL], token="tok-ada"),
                             post(door, [FULL], token="tok-ada")):
            await app.holding(2)
            assert (await post(door, [b"{}"], token="tok-ada"))[0] == 429
            async with in_flight(post(door, [FULL], token="tok-bob")):
                await app.holding(3)
            app.release.set()

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_declared_length_beside_chunked_framing_is_not_taken_for_the_body() -> None:
    """``Content-Length: 0`` with ``Transfer-Encoding: chunked``: the server frames the body
    by its chunks, and a whole body went past the count (the review of D333)."""
    async def scenario() -> None:
        app = HeldApp()
        door = door_for(app)
        lying = ((b"content-length", b"0"), (b"transfer-encoding", b"chunked"))
        async with in_flight(post(door, [FULL]), post(door, [FULL])) as held:
            await app.holding(2)
            status, _, read = await post(door, [b"{}"], declared=False, extra=lying)
            assert (status, read) == (429, 1)
            app.release.set()
            assert [(await t)[0] for t in held] == [202, 202]

    asyncio.run(asyncio.wait_for(scenario(), 10))
