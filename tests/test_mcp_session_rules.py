"""A session's rules on both transports: a call its handler refuses for its principal's
cap is counted with the front door's refusals, once; a second ``initialize`` on a session is
refused on either transport, and the session carries on; and the stdio bound on unanswered
requests is the operator's setting (TOOLHOST_MCP_STDIO_MAX_UNANSWERED).

Real servers: ``toolhost serve`` subprocesses on stdio and over HTTP, and, where a count the
process keeps is what is asserted, the server built in this process (``build_server``) behind
the real front door and uvicorn on a loopback socket, driven with httpx."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import make_plugin, make_spec, make_tool

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import httpx
import uvicorn
from journeys.journey_support import run
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from test_http_call_slots import call, open_session
from test_http_serve import ADA, MCP_HEADERS, deployment, post
from test_mcp_server import (  # noqa: F401 - the fixture, asked for by name
    INITIALIZE,
    Served,
    assert_no_traceback,
    calculate,
    finish,
    fixture_served_fixture,
    initialized,
    read_frames,
    write,
)

from toolhost import ToolOutput
from toolhost._composition import Host
from toolhost._mcp.config import ConfigError, ServeConfig
from toolhost._mcp.definitions import served_roster
from toolhost._mcp.http_front import BUSY_MESSAGE, FrontDoor, HttpPolicy
from toolhost._mcp.lifecycle import ALREADY_INITIALIZED
from toolhost._mcp.server import build_server
from toolhost._mcp.transport import TOO_MANY_REQUESTS
from toolhost._model.settings import Settings
from toolhost.testing import host_for

#: A second initialize: another version and capabilities than the session's own.
AGAIN = {"jsonrpc": "2.0", "id": 9, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "again", "version": "1"}}}
ALREADY = {"code": -32600, "message": ALREADY_INITIALIZED}


# ---------------------------------------------------------------------------- 1. D366's count


X_IN = {"type": "object", "properties": {"x": {"type": "string", "maxLength": 8}},
        "required": ["x"], "additionalProperties": False}
X_OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"],
         "additionalProperties": False}


class Bodies:
    """The tools' bodies: ``fx.held`` runs until released; ``fx.late`` notes that it ran."""

    def __init__(self) -> None:
        self.held_started = threading.Event()
        self.release = threading.Event()
        self.ran: list[str] = []

    def held(self, arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        self.held_started.set()
        self.release.wait(30)
        return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])

    def late(self, arguments: Mapping[str, Any], context: Any) -> ToolOutput:
        self.ran.append("fx.late")
        return ToolOutput(structured={"echo": arguments["x"]}, content=arguments["x"])


class ParkedHandler:
    """Server middleware standing between the SDK's dispatch and the ``fx.late`` handler: the
    handler waits until ``go``, so that it starts after its POST is over (the order a dropped
    POST gets when the session dispatches late, which no client can time from outside), and
    what it answered is noted."""

    def __init__(self) -> None:
        self.parked = asyncio.Event()
        self.go = asyncio.Event()
        self.answered: list[MCPError | None] = []

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method != "tools/call" or (ctx.params or {}).get("name") != "fx.late":
            return await call_next(ctx)
        self.parked.set()
        await self.go.wait()
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            self.answered.append(exc)
            raise
        self.answered.append(None)
        return result


@pytest.fixture
def bodies() -> Bodies:
    return Bodies()


@pytest.fixture
def host(tmp_path: Path, bodies: Bodies) -> Iterator[Host]:
    tools = [make_tool(make_spec(name=name, input_schema=X_IN, output_schema=X_OUT,
                                 timeout_s=60), call=body)
             for name, body in (("fx.held", bodies.held), ("fx.late", bodies.late))]
    with host_for({"toolhost-fx": make_plugin(("fx",), tools)},
                  data_dir=tmp_path / "data") as made:
        yield made


@contextlib.asynccontextmanager
async def served_over_http(host: Host, parked: ParkedHandler,
                           max_calls: int) -> AsyncIterator[tuple[str, FrontDoor]]:
    """This process's server for ``host``'s tools behind the front door, on a loopback socket
    (uvicorn, h11): its MCP URL and the door."""
    roster = served_roster(host.registry, None, {})
    server, sessions = build_server(host, roster, ServeConfig.from_settings(Settings(), roster))
    server.middleware.insert(0, parked)
    app = server.streamable_http_app(
        host="127.0.0.1",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    door = FrontDoor(app, HttpPolicy(allowed_hosts=("127.0.0.1:*",), allowed_origins=(),
                                     max_body_bytes=1 << 20, max_calls=max_calls),
                     ready=lambda: True, monotonic=time.monotonic)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(door, log_config=None, access_log=False, http="h11",
                                       ws="none", lifespan="on", timeout_graceful_shutdown=3))
    serving = asyncio.create_task(uv.serve(sockets=[sock]))
    try:
        while not uv.started:
            assert not serving.done(), "uvicorn did not start"
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp", door
    finally:
        parked.go.set()  # a test that failed first leaves no handler waiting
        uv.should_exit = True
        await serving
        sock.close()
        sessions.close()


def headers(sid: str | None = None) -> dict[str, str]:
    sent = {**MCP_HEADERS, "mcp-protocol-version": "2025-11-25"}
    if sid is not None:
        sent["mcp-session-id"] = sid
    return sent


def answers(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer (an SSE stream or one JSON body)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()]


async def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def test_a_call_its_handler_refuses_is_counted_once_with_the_doors_refusals(
        host: Host, bodies: Bodies) -> None:
    parked = ParkedHandler()

    async def journey() -> None:
        async with served_over_http(host, parked, max_calls=1) as (url, door), \
                httpx.AsyncClient(timeout=30) as client:
            opened = await client.post(url, json=INITIALIZE, headers=headers())
            sid = opened.headers["mcp-session-id"]
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await client.post(url, json=note, headers=headers(sid))).status_code == 202
            # fx.late passes the door (no call runs), its handler is held back, and its client
            # drops the POST: the door's hold on the slot is over before the handler's began.
            late = asyncio.create_task(client.post(url, json=call(2, "fx.late", {"x": "a"}),
                                                   headers=headers(sid)))
            await asyncio.wait_for(parked.parked.wait(), 30)
            late.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await late
            await until(lambda: door.calls_in_flight == 0, "the dropped POST held its slot")
            # Meanwhile fx.held takes the principal's one slot.
            held = asyncio.create_task(client.post(url, json=call(3, "fx.held", {"x": "b"}),
                                                   headers=headers(sid)))
            try:
                await refused_once(door, parked, bodies, client, url, sid)
            finally:  # whatever failed: fx.held ends, and its answer is collected
                bodies.release.set()
                done = await held
            assert done.status_code == 200
            (result,) = [a for a in answers(done) if a.get("id") == 3]
            assert result["result"]["isError"] is False
            await until(lambda: door.calls_in_flight == 0, "fx.held kept its slot")
            assert door.refused["too_many_calls"] == 2

    run(journey)
    assert bodies.ran == []  # neither fx.late ran: one refused in its handler, one at the door


async def refused_once(door: FrontDoor, parked: ParkedHandler, bodies: Bodies,
                       client: httpx.AsyncClient, url: str, sid: str) -> None:
    """While fx.held runs: fx.late's handler refused and counted, then the door's own."""
    await until(bodies.held_started.is_set, "fx.held never started")
    # fx.late's handler starts now: at the cap, it is refused there, and counted.
    parked.go.set()
    await until(lambda: parked.answered, "fx.late's handler never answered")
    (refusal,) = parked.answered
    assert refusal is not None
    assert (refusal.error.code, refusal.error.message) == (-32000, BUSY_MESSAGE)
    assert door.refused["too_many_calls"] == 1
    # The door's own refusal is counted beside it, once.
    busy = await client.post(url, json=call(4, "fx.late", {"x": "c"}), headers=headers(sid))
    assert (busy.status_code, busy.headers["retry-after"]) == (429, "1")
    assert door.refused["too_many_calls"] == 2


# ---------------------------------------------------------------------------- 2. initialize once


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    served = Served(tmp_path)
    yield served
    served.stop_leftovers()


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_a_second_initialize_on_stdio_is_refused_and_the_session_carries_on(
        served: Served, stdio: str) -> None:
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = initialized(served)
    write(process, AGAIN, {"jsonrpc": "2.0", "id": 10, "method": "ping"}, calculate(11, "6 * 7"))
    refused, pong, answered = read_frames(process, 3)
    assert refused == {"jsonrpc": "2.0", "id": 9, "error": ALREADY}
    assert pong == {"jsonrpc": "2.0", "id": 10, "result": {}}
    assert (answered["id"], answered["result"]["content"][0]["text"]) == (11, "42")
    # Refused again, however often it is sent: nothing of the first handshake was undone.
    write(process, {**AGAIN, "id": "again"})
    (again,) = read_frames(process, 1)
    assert again == {"jsonrpc": "2.0", "id": "again", "error": ALREADY}
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)


def test_a_second_initialize_over_http_is_refused_and_the_session_carries_on(
        tmp_path: Path) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            sid = await asyncio.to_thread(open_session, url)
            on_session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            again = await asyncio.to_thread(post, url, AGAIN, token=ADA, **on_session)
            assert again.status_code == 200
            assert answers(again) == [{"jsonrpc": "2.0", "id": 9, "error": ALREADY}]
            # The session is the one it was: it serves the next call.
            answered = await asyncio.to_thread(
                post, url, call(10, "math.calculate", {"expression": "6 * 7"}), token=ADA,
                **on_session)
            (result,) = answers(answered)
            assert (result["id"], result["result"]["content"][0]["text"]) == (10, "42")

    run(journey)


# ---------------------------------------------------------------------------- 3. the stdio bound


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_the_operator_sets_how_many_requests_a_stdio_client_may_leave_unanswered(
        fixture_served: Served, stdio: str) -> None:
    fixture_served.settings.update(TOOLHOST_MCP_STDIO=stdio, TOOLHOST_MCP_STDIO_MAX_UNANSWERED="1")
    process = initialized(fixture_served)
    slow = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "fxw.slow", "arguments": {"seconds": 5}}}
    # One call running is all this client may have unanswered: the ping is refused at once.
    write(process, slow, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    frames = {f["id"]: f for f in read_frames(process, 2)}
    assert frames[3] == {"jsonrpc": "2.0", "id": 3,
                         "error": {"code": -32000, "message": TOO_MANY_REQUESTS}}
    assert frames[2]["result"]["isError"] is False
    # The call answered, its place is free again.
    write(process, {"jsonrpc": "2.0", "id": 4, "method": "ping"})
    assert read_frames(process, 1) == [{"jsonrpc": "2.0", "id": 4, "result": {}}]
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)


@pytest.mark.parametrize("value", ["0", "1025", "-1", "64.0", "lots", "٣", "9" * 40])
def test_a_stdio_bound_out_of_range_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        ServeConfig.from_settings(Settings({"TOOLHOST_MCP_STDIO_MAX_UNANSWERED": value}), [])
    assert str(refused.value).startswith(
        "TOOLHOST_MCP_STDIO_MAX_UNANSWERED must be a whole number from 1 to 1024, not ")


@pytest.mark.parametrize(("value", "bound"), [(None, 64), ("", 64), ("1", 1), (" 1024 ", 1024)])
def test_the_stdio_bound_is_64_unless_set(value: str | None, bound: int) -> None:
    settings = {} if value is None else {"TOOLHOST_MCP_STDIO_MAX_UNANSWERED": value}
    assert ServeConfig.from_settings(Settings(settings), []).max_unanswered == bound


def test_serve_with_a_stdio_bound_out_of_range_exits_2_with_one_line(served: Served) -> None:
    served.settings["TOOLHOST_MCP_STDIO_MAX_UNANSWERED"] = "0"
    result = served.toolhost("serve")
    assert result.returncode == 2, result.stderr
    assert result.stderr == ("toolhost: TOOLHOST_MCP_STDIO_MAX_UNANSWERED must be a whole number "
                             "from 1 to 1024, not '0'\n")
    assert result.stdout == ""
