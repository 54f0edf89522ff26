"""What an HTTP upstream may not do to the host (D313), against a hostile Streamable HTTP server
written without the SDK, on 127.0.0.1 in a thread of the test, answering each request with the
bytes a test needs: a gzip bomb, a body past the bound, redirects with large bodies."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")

from toolhost._adapters.mcp_upstream import McpUpstreams
from toolhost._model.upstream import ServerState, UpstreamError, UpstreamFailure, UpstreamServer

MAX_RESULT = 128 * 1024
BOUND = 2 * MAX_RESULT + (1 << 20)  # max_line_bytes(MAX_RESULT): 1,310,720
TOOLS = ("echo", "slow", "bomb", "big_json", "redirect_json", "redirect_text", "cut_short")


class Hostile:
    """The server: what it did is in ``events``."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.accept_encodings: list[str] = []
        self.bomb_text = 8 * 1024 * 1024
        self.redirect_bytes = 32 * 1024 * 1024
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self.handle, "127.0.0.1", 0), self.loop).result(10)
        self.port = self.server.sockets[0].getsockname()[1]

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    @staticmethod
    def result(rid: Any, text: str) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": rid, "result": {
            "content": [{"type": "text", "text": text}], "isError": False}}).encode()

    @staticmethod
    async def send(writer: asyncio.StreamWriter, status: str, headers: dict[str, str],
                   body: bytes = b"", length: int | None = None, fill: bytes = b"") -> None:
        headers = {**headers, "Connection": "close",
                   "Content-Length": str(len(body) if length is None else length)}
        writer.write(f"HTTP/1.1 {status}\r\n".encode() + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()).encode() + b"\r\n" + body)
        await writer.drain()
        if length is not None:  # a body of `length` bytes of `fill`, as the peer reads it
            block = fill * (1 << 20)
            for start in range(0, length, len(block)):
                writer.write(block[:length - start])
                await writer.drain()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, _ = (await reader.readline()).decode().split(" ", 2)
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length") or 0))
            self.accept_encodings.append(headers.get("accept-encoding", ""))
            if method != "POST":
                await self.send(writer, "405 Method Not Allowed", {})
                return
            message = json.loads(body)
            rid, verb = message.get("id"), message.get("method")
            js = {"Content-Type": "application/json", "Mcp-Session-Id": "s1"}
            if rid is None:
                await self.send(writer, "202 Accepted", {})
            elif verb == "initialize":
                await self.send(writer, "200 OK", js, json.dumps({"jsonrpc": "2.0", "id": rid,
                    "result": {"protocolVersion": message["params"]["protocolVersion"],
                               "capabilities": {"tools": {}},
                               "serverInfo": {"name": "hostile", "version": "0"}}}).encode())
            elif verb == "tools/list":
                await self.send(writer, "200 OK", js, json.dumps({"jsonrpc": "2.0", "id": rid,
                    "result": {"tools": [{"name": t, "inputSchema": {
                        "type": "object", "additionalProperties": False}} for t in TOOLS]}}
                ).encode())
            elif verb == "ping":
                await self.send(writer, "200 OK", js,
                                json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}).encode())
            else:
                await self.tool(writer, path, rid, message["params"]["name"], js)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            self.events.append(f"peer went: {type(exc).__name__}")
        finally:
            writer.close()

    async def tool(self, writer: asyncio.StreamWriter, path: str, rid: Any, name: str,
                   js: dict[str, str]) -> None:
        if name == "echo":
            await self.send(writer, "200 OK", js, self.result(rid, "echo"))
        elif name == "slow":
            await asyncio.sleep(3)
            await self.send(writer, "200 OK", js, self.result(rid, "slow done"))
        elif name == "bomb":  # gzip: far under the bound on the wire, far past it decoded
            head, tail = self.result(rid, "\0").split(b"\\u0000")
            packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
            wire = packer.compress(head) + packer.compress(b"A" * self.bomb_text) \
                + packer.compress(tail) + packer.flush()
            self.events.append(f"bomb: {len(wire)} bytes on the wire")
            await self.send(writer, "200 OK", {**js, "Content-Encoding": "gzip"}, wire)
        elif name == "cut_short":  # JSON that ends before its last brace
            await self.send(writer, "200 OK", js, self.result(rid, "cut")[:-1])
        elif name == "big_json":
            await self.send(writer, "200 OK", js, length=BOUND + 1, fill=b" ")
        elif name == "redirect_json":  # a same-origin 307 whose JSON body is past the bound
            await self.send(writer, "307 Temporary Redirect",
                            {"Location": path, "Content-Type": "application/json"},
                            length=self.redirect_bytes, fill=b" ")
        elif name == "redirect_text" and "redirected" in self.events:
            await self.send(writer, "200 OK", js, self.result(rid, "after the redirect"))
        elif name == "redirect_text":  # the same, as text/plain, once
            self.events.append("redirected")
            await self.send(writer, "307 Temporary Redirect",
                            {"Location": path, "Content-Type": "text/plain"},
                            length=self.redirect_bytes, fill=b"r")
            self.events.append("redirect_text: the whole body was read")


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    server = Hostile()
    yield server
    server.close()


@contextlib.contextmanager
def connected(hostile: Hostile) -> Iterator[McpUpstreams]:
    upstreams = McpUpstreams(
        (UpstreamServer(name="h", url=f"http://127.0.0.1:{hostile.port}/mcp"),),
        max_result_bytes=MAX_RESULT)
    try:
        upstreams.start(30)
        assert upstreams.status()[0].state is ServerState.CONNECTED, upstreams.status()
        yield upstreams
    finally:
        upstreams.close()


async def call(upstreams: McpUpstreams, tool: str, delay: float = 0.0) -> str | UpstreamError:
    await asyncio.sleep(delay)
    try:
        return (await upstreams.call("h", tool, {}, timeout_s=30)).text
    except UpstreamError as exc:
        return exc


def test_a_gzipped_json_body_is_refused_unread(hostile: Hostile) -> None:
    """8 MiB of text gzipped to ~8 KiB was decoded and held whole (the bound counted the bytes
    on the wire): answers are asked for unencoded, and one encoded anyway is not read."""
    with connected(hostile) as upstreams:
        refused = asyncio.run(call(upstreams, "bomb"))
        assert asyncio.run(call(upstreams, "echo")) == "echo"
    assert isinstance(refused, UpstreamError), refused
    assert (refused.failure, refused.detail) == (
        UpstreamFailure.PROTOCOL,
        "Failed to parse JSON response: an answer encoded 'gzip', which was not asked for")
    assert hostile.accept_encodings and set(hostile.accept_encodings) == {"identity"}


def test_a_redirects_json_body_past_the_bound_fails_its_call_alone(hostile: Hostile) -> None:
    """The SDK reads a followed 307's body with ``aread`` outside any handler: a refusal there
    ended the SDK's task group, so the call beside it (``slow``) was lost too and the server
    went unreachable. A redirect's body is not read now."""
    hostile.redirect_bytes = 3 * 1024 * 1024
    with connected(hostile) as upstreams:
        async def both() -> list[str | UpstreamError]:
            return list(await asyncio.gather(call(upstreams, "slow"),
                                             call(upstreams, "redirect_json", 0.5)))

        beside, _ = asyncio.run(both())
        assert beside == "slow done", beside
        assert upstreams.status()[0].state is ServerState.CONNECTED


def test_a_redirects_body_is_not_read(hostile: Hostile) -> None:
    """A same-origin 307 with a text/plain body was drained whole by the SDK before it
    followed it (32 MiB here; any size)."""
    with connected(hostile) as upstreams:
        asyncio.run(call(upstreams, "redirect_text"))
    assert "redirect_text: the whole body was read" not in hostile.events, hostile.events


def test_an_answer_past_the_bound_leaves_no_traceback_in_the_logs(
        hostile: Hostile, caplog: pytest.LogCaptureFixture) -> None:
    """The SDK logs ``logger.exception("Error parsing JSON response")`` for ResponseTooLarge:
    ``toolhost call``'s stderr (logging's last resort) and ``toolhost serve``'s (WARNING)
    showed the traceback for every refused answer; one line now."""
    with caplog.at_level(logging.WARNING), connected(hostile) as upstreams:
        refused = asyncio.run(call(upstreams, "big_json"))
    assert isinstance(refused, UpstreamError) and refused.failure is UpstreamFailure.TOO_LARGE
    noisy = [r for r in caplog.records if r.exc_info is not None]
    assert noisy == [], [(r.name, r.getMessage(), r.exc_info[1]) for r in noisy if r.exc_info]
    assert "an MCP server's answer was refused: a message of more than 1310720 bytes" in [
        r.getMessage() for r in caplog.records]


def test_an_answer_that_is_not_json_rpc_is_one_escaped_log_line(
        hostile: Hostile, caplog: pytest.LogCaptureFixture) -> None:
    """The SDK logged the pydantic error of an unreadable JSON answer with its traceback, a
    repr of the server's bytes in it, on the operator's stderr for every such call: one
    escaped line now, and the call still fails ``protocol`` with the parser's words."""
    with caplog.at_level(logging.WARNING), connected(hostile) as upstreams:
        refused = asyncio.run(call(upstreams, "cut_short"))
    assert isinstance(refused, UpstreamError) and refused.failure is UpstreamFailure.PROTOCOL
    assert "EOF while parsing" in refused.detail, refused.detail
    noisy = [r for r in caplog.records if r.exc_info is not None]
    assert noisy == [], [(r.name, r.getMessage(), r.exc_info[1]) for r in noisy if r.exc_info]
    (said,) = [r.getMessage() for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert said.startswith("an MCP server's answer was not JSON-RPC: ValidationError: "), said
    assert "\n" not in said and "EOF while parsing" in said, said


def test_a_normal_call_through_the_bounded_transport(hostile: Hostile) -> None:
    """What is fine: a small JSON answer arrives."""
    with connected(hostile) as upstreams:
        assert asyncio.run(call(upstreams, "echo")) == "echo"
