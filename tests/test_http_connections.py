"""What a connection to ``toolhost serve --http`` can hold before any token is checked (D328):
a request's head has a deadline, an answer given before the body was read closes the
connection, an upgrade is a plain request, what any client can cause is logged once a minute,
and ``/readyz`` asks the stores at most once a second. Raw sockets against a real server, and
the front door alone for ``/readyz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, run, write_tokens

from toolhost._mcp.http_protocol import DISCARD_BYTES

TOKEN = "conn-token-5d1a"


def deployment(tmp_path: Path, **settings: str) -> Deployment:
    return Deployment(tmp_path, plugins="toolhost-math", **settings)


def with_a_token(tmp_path: Path, **settings: str) -> Deployment:
    """A deployment whose token file holds ``TOKEN`` (ada's, no scopes)."""
    return deployment(tmp_path, TOOLHOST_HTTP_TOKENS_FILE=str(write_tokens(
        tmp_path / "tokens.toml", (TOKEN, "ada", []))), **settings)


def port_of(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


async def connected(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def closed_by_server(reader: asyncio.StreamReader, within_s: float) -> bool:
    """Whether the server closes the connection within ``within_s`` (what it sent first is
    read and dropped)."""
    try:
        async with asyncio.timeout(within_s):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return True


async def status_of(port: int, request: bytes) -> bytes:
    reader, writer = await connected(port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(10):
            return (await reader.readline()).strip()
    finally:
        writer.close()


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


async def refused_then_sending(port: int, framing: bytes, block: bytes) -> tuple[bool, int]:
    """A POST without a token whose body ``framing`` announces, its 401 read, then ``block``
    written again and again: whether the server closed the connection within 10 s, and how
    many bytes were written by then."""
    reader, writer = await connected(port)
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                 b"\r\n" + framing + b"\r\n\r\n")
    await writer.drain()
    async with asyncio.timeout(10):
        assert (await reader.readline()).startswith(b"HTTP/1.1 401 ")
    sent = 0

    async def keep_sending() -> None:
        nonlocal sent
        with contextlib.suppress(ConnectionError):
            while True:
                writer.write(block)
                await writer.drain()
                sent += len(block)

    sending = asyncio.ensure_future(keep_sending())
    try:
        closed = await closed_by_server(reader, 10)
    finally:
        sending.cancel()
        writer.close()
    return closed, sent


def test_connections_that_never_finish_their_head_are_closed_and_free_their_slots(
        tmp_path: Path) -> None:
    """Before D328, uvicorn never timed out a connection still sending its first request's
    head: TOOLHOST_HTTP_MAX_CONNECTIONS of them (here 4) answered every other request 503,
    /healthz included, for as long as they were held."""
    people = deployment(tmp_path, TOOLHOST_HTTP_MAX_CONNECTIONS="4",
                        TOOLHOST_HTTP_HEAD_TIMEOUT_S="1")

    async def journey() -> None:
        async with people.http_server() as url:
            port = port_of(url)
            held = [await connected(port) for _ in range(4)]
            for n, (_, writer) in enumerate(held):
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" if n % 2 else b"G")
                await writer.drain()
            assert (await status_of(port, HEALTHZ)).startswith(b"HTTP/1.1 503 ")

            async def trickle(writer: asyncio.StreamWriter) -> None:
                with contextlib.suppress(ConnectionError):
                    while True:  # a byte now and then: uvicorn's keep-alive timer never runs
                        await asyncio.sleep(0.2)
                        writer.write(b"X")
                        await writer.drain()

            trickling = asyncio.ensure_future(trickle(held[1][1]))
            try:
                closed = await asyncio.gather(*(closed_by_server(r, 15) for r, _ in held))
            finally:
                trickling.cancel()
            assert closed == [True] * 4
            assert (await status_of(port, HEALTHZ)) == b"HTTP/1.1 200 OK"
            for _, writer in held:
                writer.close()

    run(journey)


def test_what_follows_an_answer_given_before_the_body_is_read_is_bounded(
        tmp_path: Path) -> None:
    """Before D328 the 401 below kept the connection alive, and h11 read and dropped the
    announced 100 GB for as long as they came (a core busy, from one unauthenticated
    connection). Now the connection is closed once DISCARD_BYTES more have come."""
    people = with_a_token(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            closed, sent = await refused_then_sending(
                port_of(url), b"Content-Length: 100000000000", b"x" * 65536)
            assert closed
            # What the kernel's buffers hold beyond the bound is the only slack.
            assert DISCARD_BYTES <= sent < DISCARD_BYTES + (16 << 20)

    run(journey)


def test_a_chunked_body_answered_early_is_not_read_on(tmp_path: Path) -> None:
    """h11 makes an event of each chunk: one-byte chunks cost a core 0.85 s a MiB, and a
    connection dropping them counted on bytes alone kept one busy (the review of D328)."""
    people = with_a_token(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            closed, sent = await refused_then_sending(
                port_of(url), b"Transfer-Encoding: chunked", b"1\r\nx\r\n" * 4096)
            assert closed
            assert sent < 8 << 20  # the kernel's buffers, at most

    run(journey)


def test_a_client_refused_before_its_body_was_read_gets_its_answer_and_keeps_its_connection(
        tmp_path: Path) -> None:
    """httpx sends a whole body before it reads the answer. Closing the connection right after
    an early 401 or 413 (the first version of D328) reset it under the client: it read no
    answer, or its next request on the pooled connection failed."""
    people = with_a_token(tmp_path, TOOLHOST_HTTP_MAX_BODY_BYTES="1048576")

    async def journey() -> None:
        async with people.http_server() as url:
            health = url.replace("/mcp", "/healthz")
            async with httpx.AsyncClient(timeout=30) as client:
                for n in range(12):
                    token, size, status = ((None, 2 << 20, 401) if n % 2
                                           else (TOKEN, 3 << 20, 413))
                    headers = {"Content-Type": "application/json"}
                    if token is not None:
                        headers["Authorization"] = f"Bearer {token}"
                    answer = await client.post(url, content=b" " * size, headers=headers)
                    assert answer.status_code == status
                    assert (await client.get(health)).status_code == 200

    run(journey)


def test_an_upgrade_is_a_plain_request_and_noise_is_logged_once(tmp_path: Path) -> None:
    """With a WebSocket library installed (wsproto is, here) uvicorn took the upgrade and
    logged an error for each; each malformed request and each connection past the cap was a
    warning line too. Now an upgrade is an HTTP request like any other, and each kind is one
    line a minute."""
    people = deployment(tmp_path, TOOLHOST_HTTP_MAX_CONNECTIONS="2")
    upgrade = (b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n"
               b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
               b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")

    async def journey() -> None:
        async with people.http_server() as url:
            port = port_of(url)
            for _ in range(20):
                assert not (await status_of(port, upgrade)).startswith(b"HTTP/1.1 101")
                assert (await status_of(port, b"NOT HTTP AT ALL\r\n\r\n")).startswith(
                    b"HTTP/1.1 400 ")
            held = [await connected(port) for _ in range(2)]
            for _ in range(20):
                assert (await status_of(port, HEALTHZ)).startswith(b"HTTP/1.1 503 ")
            for _, writer in held:
                writer.close()

    run(journey)
    log = people.stderr()
    for noise in ("Invalid HTTP request received", "Exceeded concurrency limit",
                  "Unsupported upgrade request", "ASGI callable returned without"):
        assert log.count(noise) <= 1, (noise, log)


def _door(ready: Any) -> Any:
    """A front door alone, whose stores answer as ``ready`` does."""
    from toolhost._mcp.http_front import FrontDoor, HttpPolicy

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app is never reached")

    return FrontDoor(app, HttpPolicy(allowed_hosts=("testserver",), allowed_origins=(),
                                     max_body_bytes=10, max_calls=1), ready=ready,
                     monotonic=time.monotonic)


def test_readyz_asks_the_stores_at_most_once_a_second() -> None:
    asked: list[int] = []
    lock = threading.Lock()

    def ready() -> bool:
        with lock:
            asked.append(1)
        return True

    door = _door(ready)

    async def ask() -> list[int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=door),
                                     base_url="http://testserver") as client:
            answers = await asyncio.gather(*(client.get("/readyz") for _ in range(50)))
            return [a.status_code for a in answers]

    assert asyncio.run(ask()) == [200] * 50
    assert len(asked) == 1


def test_readyz_with_a_record_that_hangs_says_not_ready_and_asks_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import toolhost._mcp.http_front as front

    monkeypatch.setattr(front, "READY_WAIT_S", 0.2)
    answer = threading.Event()
    asked: list[int] = []

    def hangs() -> bool:
        asked.append(1)
        answer.wait(10)
        return True

    door = _door(hangs)

    async def ask() -> tuple[list[int], int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=door),
                                     base_url="http://testserver") as client:
            waited = await asyncio.gather(*(client.get("/readyz") for _ in range(10)))
            answer.set()
            while asked and door._readiness._checking is not None:  # the check lands
                await asyncio.sleep(0.01)
            return [a.status_code for a in waited], (await client.get("/readyz")).status_code

    waited, after = asyncio.run(ask())
    assert waited == [503] * 10
    assert after == 200
    assert len(asked) == 1
