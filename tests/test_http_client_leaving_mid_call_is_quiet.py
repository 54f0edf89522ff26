"""A client that gives up on a call and ends its session, the ordinary way the SDK's client
leaves mid-call (``notifications/cancelled``, then ``DELETE`` as it leaves), costs the server's
log no traceback and no line at error level, and leaves no call running.

The SDK answers a notification's POST ``202`` before it hands the notification to the session;
a ``DELETE`` the server read in the same moment closed the session's streams in between
("Error handling POST request" with ``ClosedResourceError``, then uvicorn's "Exception in ASGI
application" for the 500 the SDK started on the answered request). A real ``toolhost serve
--http`` (a subprocess): the SDK's own client, many sessions giving up on sandbox commands while
the others' are approved and started (a busy server reads both requests at once), and raw
HTTP/1.1 pipelining both requests, which makes that order certain."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from installed import install_fake_plugin
from journeys.journey_support import Deployment, Person, run

#: Sessions leaving at once: before the fix, most of them logged both tracebacks.
SESSIONS = 20
TOOL = "sandbox.run_command"
FIXTURE = Path(__file__).with_name("mcp_fixture_plugin.py")
VERSION = "2025-11-25"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": VERSION, "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


def _loud_lines(text: str) -> list[str]:
    """The server's log lines at error level or above, and any traceback (a call left waiting
    says so at warning level, as it should: ``mcp.awaiting_approval``)."""
    loud = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            if "Traceback" in line:
                loud.append(line)
            continue
        if not isinstance(record, dict):
            continue
        if record.get("level") in ("error", "critical") or "exception" in record:
            loud.append(line)
    return loud


def test_a_client_that_cancels_a_call_and_leaves_costs_no_traceback(tmp_path: Path) -> None:
    people = Deployment(tmp_path, plugins="toolhost-sandbox", TOOLHOST_HTTP_MAX_CALLS="100")

    async def person(url: str) -> None:
        someone = Person()
        async with people.session("http", url=url, person=someone) as client, \
                anyio.create_task_group() as call:
            call.start_soon(client.call_tool, TOOL, {"command": "sleep 30"})
            while not someone.asked:
                await anyio.sleep(0.01)
            # Approved, the client gives up on its call (notifications/cancelled) while the
            # others' commands are being approved and started ...
            call.cancel_scope.cancel()
        # ... and leaves: DELETE

    async def journey() -> None:
        async with people.http_server() as url, anyio.create_task_group() as everyone:
            for _ in range(SESSIONS):
                everyone.start_soon(person, url)

    run(journey)  # the server stopped on SIGTERM, exit 0, no traceback
    assert _loud_lines(people.stderr()) == []
    rows = [r for r in people.invocations() if r["tool_name"] == TOOL]
    assert len(rows) == SESSIONS
    # None is left running: a call given up on once its approval arrived ended recorded as
    # cancelled; one given up on before the answer was taken is left waiting for the
    # operator (D454).
    assert {(r["state"], r["reason_code"]) for r in rows} <= {
        ("failed", "tool.cancelled.run_cancelled"), ("awaiting_approval", None)}, rows


def test_a_delete_right_behind_a_cancellation_waits_for_it_to_be_handed_over(
        tmp_path: Path) -> None:
    """The same two requests on one connection, pipelined (HTTP/1.1): the server starts the
    DELETE the moment the notification's 202 is written, ahead of the notification's handover,
    every time. The notification reaches the session first, the DELETE ends it (200), the log
    stays quiet, and the call ends recorded as cancelled."""
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-mcp", "fake_mcp", FIXTURE.read_text())
    started = tmp_path / "fxw.log"
    people = Deployment(tmp_path, plugins="fake-mcp", PYTHONPATH=str(site), FXW_LOG=str(started))

    def leave_mid_call(url: str, number: int) -> list[bytes]:
        with httpx.Client(timeout=30) as client:
            opened = client.post(url, json=INITIALIZE, headers=MCP_HEADERS)
            session = opened.headers["mcp-session-id"]
            headers = {**MCP_HEADERS, "mcp-session-id": session,
                       "mcp-protocol-version": VERSION}
            assert client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                               headers=headers).status_code == 202
            with ThreadPoolExecutor(1) as pool:
                call = pool.submit(client.post, url, headers=headers, json={
                    "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "fxw.slow", "arguments": {"seconds": 3}}})
                deadline = time.monotonic() + 30  # the call's body has begun
                while (started.read_text().count("started") if started.exists() else 0) < number:
                    assert time.monotonic() < deadline, "fxw.slow never started"
                    time.sleep(0.05)
                cancel = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                     "params": {"requestId": 2}}).encode()
                host, port = url.split("/")[2].split(":")
                common = (f"Host: {host}:{port}\r\nmcp-session-id: {session}\r\n"
                          f"mcp-protocol-version: {VERSION}\r\n"
                          "Accept: application/json, text/event-stream\r\n")
                with socket.create_connection((host, int(port)), timeout=30) as raw:
                    raw.sendall(
                        f"POST /mcp HTTP/1.1\r\n{common}Content-Type: application/json\r\n"
                        f"Content-Length: {len(cancel)}\r\n\r\n".encode() + cancel
                        + f"DELETE /mcp HTTP/1.1\r\n{common}Connection: close\r\n\r\n".encode())
                    answers = b""
                    while chunk := raw.recv(65536):
                        answers += chunk
                call.result()
        return [line.split(b" ")[1] for line in answers.split(b"\r\n")
                if line.startswith(b"HTTP/1.1 ")]

    async def journey() -> None:
        async with people.http_server() as url:
            for number in range(1, 4):
                statuses = await anyio.to_thread.run_sync(leave_mid_call, url, number)
                assert statuses == [b"202", b"200"]

    run(journey)  # the server stopped on SIGTERM, exit 0, no traceback
    assert _loud_lines(people.stderr()) == []
    rows = people.invocations()
    assert len(rows) == 3
    assert {(r["tool_name"], r["state"], r["reason_code"]) for r in rows} == {
        ("fxw.slow", "failed", "tool.cancelled.run_cancelled")}, rows
