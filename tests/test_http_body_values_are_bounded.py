"""What one POST can cost ``toolhost serve --http`` is bounded by its JSON values, not only by
its bytes, as a stdio line is (D555). An 8 MiB body of 2.8M empty objects in a ``tools/call``'s
``_meta`` was parsed by the front door and again by the SDK: ~2.7 s, ~370 MB of peak memory,
the event loop held ~2.7 s (``/healthz`` waited that long), and the call ran and wrote its row.
Now the body's values are counted before it is parsed, by the same count as a stdio line's,
and one past the bound is ``413`` with stdio's answer, ``-32700`` with a null id: nothing of
it parsed, run or recorded.

Real servers (subprocesses): raw HTTP (httpx) for what an attacker sends, the SDK's own client
for what a person's client sees; the front door alone for the bound's edge.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import Deployment, ok, run
from mcp.shared.exceptions import MCPError

from toolhost._mcp.frames import MAX_FRAME_VALUES
from toolhost._mcp.http_front import FrontDoor, HttpPolicy

#: stdio's answer to a line past its values (docs/mcp.md, "Bad input"), byte for byte.
PARSE_ERROR = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
MAX_BODY = 8 << 20
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}}


def _peak_mb(pid: int) -> float:
    """The process's peak resident memory so far (``VmHWM``), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = (row for row in status.splitlines() if row.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _call(arguments: bytes, meta: bytes | None = None) -> bytes:
    params = b'{"name":"math.calculate","arguments":' + arguments
    if meta is not None:
        params += b',"_meta":' + meta
    return b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + params + b"}}"


def _filling(unit: bytes, room: int) -> bytes:
    """A JSON array of ``unit`` as many times as fit in ``room`` bytes."""
    return b"[" + b",".join([unit] * ((room - 2) // (len(unit) + 1))) + b"]"


#: Hostile bodies within TOOLHOST_HTTP_MAX_BODY_BYTES (8 MiB), each past the values.
HOSTILE = {
    "empty objects in _meta": _call(b'{"expression":"1"}',
                                    b'{"x":' + _filling(b"{}", MAX_BODY - 200) + b"}"),
    "zeros in the arguments": _call(b'{"expression":"1","x":' + _filling(b"0", MAX_BODY - 200)
                                    + b"}"),
    "nested arrays": _call(b'{"expression":"1","x":' + b"[" * ((MAX_BODY - 200) // 2)
                           + b"]" * ((MAX_BODY - 200) // 2) + b"}"),
    "a bare array": _filling(b"0", MAX_BODY),
}


def math_only(tmp_path: Path) -> Deployment:
    """One server without authentication (loopback): every client is its one principal."""
    return Deployment(tmp_path, plugins="toolhost-math")


async def _session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    """The headers of a session opened and initialized with raw requests."""
    opened = await client.post(url, json=INITIALIZE, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-11-25"}
    done = await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                             headers=headers)
    assert done.status_code == 202
    return headers


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak memory is read from /proc")
def test_a_body_of_millions_of_values_is_refused_unparsed_and_the_session_goes_on(
        tmp_path: Path) -> None:
    server = math_only(tmp_path)

    async def journey() -> None:
        async with server.http_server() as url, httpx.AsyncClient(timeout=60) as client:
            headers = await _session(client, url)
            pid = server.servers[-1].pid
            for name, body in HOSTILE.items():
                assert len(body) <= MAX_BODY, name
                before = _peak_mb(pid)
                started = time.monotonic()
                refused = await client.post(url, content=body, headers=headers)
                took = time.monotonic() - started
                # As stdio answers such a line: -32700 with a null id, byte for byte.
                assert (refused.status_code, refused.headers["content-type"], refused.content) \
                    == (413, "application/json", PARSE_ERROR), name
                # Loose bounds: parsed, "empty objects in _meta" took ~370 MB and ~2.7 s.
                assert _peak_mb(pid) - before < 60, name
                assert took < 5, (name, took)
            # The session reads on, and a call within the bound runs.
            answered = await client.post(url, content=_call(b'{"expression":"6 * 7"}'),
                                         headers=headers)
            assert answered.status_code == 200
            assert '"toolhost/status":"succeeded"' in answered.text

    run(journey)
    assert [r["tool_name"] for r in server.invocations()] == ["math.calculate"]


def test_the_sdk_client_is_told_parse_error_and_its_session_goes_on(tmp_path: Path) -> None:
    server = math_only(tmp_path)

    async def journey() -> None:
        async with server.http_server() as url, server.session("http", url=url) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("math.calculate",
                                       {"expression": "1", "x": [{}] * (MAX_FRAME_VALUES + 1)})
            assert (refused.value.error.code, refused.value.error.message) == (
                -32700, "Parse error")
            assert ok(await client.call_tool("math.calculate", {"expression": "6 * 7"}))

    run(journey)
    assert len(server.invocations()) == 1


class _App:
    """The SDK's app, standing in: it notes each body it gets and answers 202."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.bodies.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def _post(door: FrontDoor, body: bytes) -> tuple[int, bytes]:
    scope = {"type": "http", "method": "POST", "path": "/mcp", "query_string": b"",
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    answer: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        else:
            answer["body"] += message.get("body", b"")

    await door(scope, receive, send)
    return answer["status"], answer["body"]


def _notification_of(values: int) -> bytes:
    """A notification of exactly ``values`` JSON values as a stdio line's are counted: the
    message, its three members' names and values, the one member of its params (a name, an
    array) and the zeros in that array."""
    return json.dumps({"jsonrpc": "2.0", "method": "notes/hello",
                       "params": {"x": [0] * (values - 9)}}, separators=(",", ":")).encode()


def _in_a_string(count: int) -> bytes:
    """A notification whose one string holds ``count`` of each character that opens a value
    outside strings."""
    return json.dumps({"jsonrpc": "2.0", "method": "notes/hello",
                       "params": {"text": "[{,:" * count}}).encode()


def test_the_bound_is_stdios_counted_before_the_body_is_parsed() -> None:
    app = _App()
    door = FrontDoor(app, HttpPolicy(allowed_hosts=("testserver",), allowed_origins=(),
                                     max_body_bytes=MAX_BODY, max_calls=16),
                     ready=lambda: True, monotonic=time.monotonic)
    within, past = _notification_of(MAX_FRAME_VALUES), _notification_of(MAX_FRAME_VALUES + 1)

    async def scenario() -> None:
        assert await _post(door, within) == (202, b"")
        assert await _post(door, past) == (413, PARSE_ERROR)
        # Brackets, braces, commas and colons inside a string open no value.
        assert await _post(door, _in_a_string(MAX_FRAME_VALUES)) == (202, b"")

    asyncio.run(asyncio.wait_for(scenario(), 30))
    # Nothing of the refused body reached the SDK's app.
    assert app.bodies == [within, _in_a_string(MAX_FRAME_VALUES)]
    assert door.refused == {"too_many_values": 1}
