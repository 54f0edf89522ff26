"""What one MCP client can make `toolhost serve` hold or do on stdio: at most MAX_IN_FLIGHT
requests unanswered at once (D367), a line that is not UTF-8 is a parse error and never runs
(D369), and a progress token is echoed only while it is short (D370).

The limits through their streams and functions; the wire through real `toolhost serve`
subprocesses, on both stdio transports (the loop's and the SDK's)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import types
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as mcp_types
from mcp.shared.message import SessionMessage
from test_mcp_server import (
    INITIALIZE,
    INITIALIZED,
    PARSE_ERROR,
    Served,
    assert_no_traceback,
    calculate,
    finish,
    read_frames,
    send,
    write,
)

from toolhost._mcp.progress import MAX_TOKEN, request_progress, usable_token
from toolhost._mcp.transport import TOO_MANY_REQUESTS, in_flight
from toolhost._pipeline import progress


@pytest.fixture
def served(tmp_path: Path) -> Any:
    served = Served(tmp_path)
    yield served
    served.stop_leftovers()


def request(rid: int, method: str = "tools/list") -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCRequest(jsonrpc="2.0", id=rid, method=method))


def answer(rid: int) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=rid, result={}))


def cancelled(rid: int) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": rid}))


def test_a_request_past_the_limit_is_refused_until_one_is_answered_or_cancelled() -> None:
    async def main() -> tuple[list[Any], list[Any]]:
        wire_in, client_reads = anyio.create_memory_object_stream[Any](100)
        server_writes, wire_out = anyio.create_memory_object_stream[Any](100)
        reads, writes = in_flight(client_reads, server_writes, limit=2)
        for item in (request(1), request(2), request(3), ValueError("unreadable"),
                     cancelled(1), request(4), request(5)):
            await wire_in.send(item)
        got = [await reads.receive() for _ in range(5)]  # 1, 2, the error, the cancel, 4
        with anyio.move_on_after(0.2):  # 5 is read and refused: 2 and 4 are unanswered
            got.append(await reads.receive())
        await writes.send(answer(2))  # the server answers 2: one more may come
        await wire_in.send(request(6))
        got.append(await reads.receive())
        await wire_in.aclose()
        with pytest.raises(anyio.EndOfStream):
            await reads.receive()
        await reads.aclose()
        await writes.aclose()
        written = []
        while True:
            try:
                written.append(wire_out.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                await wire_out.aclose()
                return got, written

    got, written = anyio.run(main)
    assert [getattr(getattr(g, "message", None), "id", g) for g in got[:2]] == [1, 2]
    assert isinstance(got[2], ValueError)
    assert got[3].message.method == "notifications/cancelled"  # the server hears it too
    assert [g.message.id for g in got[4:]] == [4, 6]
    # 3 and 5 were refused at once, in the order read; 2's answer went out as written.
    refusals = [w.message for w in written if isinstance(w.message, mcp_types.JSONRPCError)]
    assert [(r.id, r.error.code, r.error.message) for r in refusals] == [
        (3, -32000, TOO_MANY_REQUESTS), (5, -32000, TOO_MANY_REQUESTS)]
    assert [w.message.id for w in written
            if isinstance(w.message, mcp_types.JSONRPCResponse)] == [2]


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_a_client_that_writes_without_reading_gets_every_request_answered_once(
        served: Served, stdio: str) -> None:
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = served.popen()
    write(process, INITIALIZE)
    read_frames(process, 1)
    write(process, INITIALIZED)
    count = 3000
    flood = b"".join(json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/list"})
                     .encode() + b"\n" for i in range(count))
    writer = threading.Thread(target=send, args=(process, flood), daemon=True)
    writer.start()
    time.sleep(3)  # nothing read meanwhile: the answers fill the pipe, the requests wait
    answers = read_frames(process, count)
    writer.join(30)
    assert sorted(a["id"] for a in answers) == list(range(100, 100 + count))
    refused = [a for a in answers if "error" in a]
    assert refused, "no request was held back"
    assert all(a["error"] == {"code": -32000, "message": TOO_MANY_REQUESTS} for a in refused)
    write(process, calculate(7, "17 * 23"))  # and the client is served as soon as it reads
    (last,) = read_frames(process, 1)
    assert (last["id"], last["result"]["content"][0]["text"]) == (7, "391")
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_a_line_that_is_not_utf8_is_a_parse_error_and_never_runs(served: Served,
                                                                  stdio: str) -> None:
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = served.popen()
    write(process, INITIALIZE)
    read_frames(process, 1)
    write(process, INITIALIZED)
    send(process, json.dumps(calculate(5, "6 * 7")).encode().replace(b"6 * 7", b"6 \xff 7")
         + b"\n")
    write(process, calculate(6, "17 * 23"))
    refused, answered = read_frames(process, 2)
    assert refused == PARSE_ERROR
    assert (answered["id"], answered["result"]["content"][0]["text"]) == (6, "391")
    code, out, err = finish(process)
    assert (code, out) == (0, "")
    assert_no_traceback(err)
    assert [json.loads(r["arguments"]) for r in served.rows()] == [{"expression": "17 * 23"}]


@pytest.mark.parametrize(("token", "usable"), [
    ("t", True), ("x" * MAX_TOKEN, True), ("x" * (MAX_TOKEN + 1), False), ("x" * 2_000_000, False),
    (7, True), (10 ** MAX_TOKEN - 1, True), (10 ** MAX_TOKEN, False), (-(10 ** 5000), False),
    (True, False), (1.5, False), ({"a": 1}, False),
], ids=["short", "longest string", "one too long", "2 MB", "integer", "largest integer",
        "one digit too many", "5,000 digits", "boolean", "float", "object"])
def test_a_progress_token_is_a_short_string_or_integer(token: Any, usable: bool) -> None:
    assert usable_token(token) is usable


def test_a_long_progress_token_gets_no_progress_and_the_call_runs() -> None:
    reports: list[Any] = []

    async def report_progress(*args: Any) -> None:
        reports.append(args)

    async def scenario() -> object:
        ctx = types.SimpleNamespace(meta={"progress_token": "x" * 2_000_000},
                                    session=types.SimpleNamespace(report_progress=report_progress))
        async with request_progress(ctx):
            return progress._SINK.get()

    assert asyncio.run(scenario()) is None
    assert reports == []
