"""What one MCP client can make `toolhost serve` hold or do on stdio: at most MAX_IN_FLIGHT
requests unanswered at once, a request holding its place until its answer is written or the SDK
settles it unanswered, never on a cancel alone (D367), a line that is not UTF-8 is a parse error and never runs
(D369), and a progress token is echoed only while it is short (D370).

The limits through their streams and functions, and in front of the SDK's own dispatcher; the
wire through real `toolhost serve` subprocesses, on both stdio transports (the loop's and the
SDK's)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import threading
import time
import types
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import mcp.types as mcp_types
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from test_mcp_server import (
    PARSE_ERROR,
    Served,
    assert_no_traceback,
    calculate,
    finish,
    initialized,
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


def request(rid: int | str, method: str = "tools/list") -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCRequest(jsonrpc="2.0", id=rid, method=method))


def answer(rid: int) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=rid, result={}))


def cancelled(rid: int | str) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": rid}))


def settle_unanswered(admitted: SessionMessage) -> Any:
    """What the SDK's dispatcher does for a request it settles with nothing written."""
    assert isinstance(admitted.metadata, ServerMessageMetadata)
    assert admitted.metadata.on_request_unanswered is not None
    return admitted.metadata.on_request_unanswered()


def test_a_request_past_the_limit_is_refused_until_one_is_answered_or_settled() -> None:
    async def main() -> tuple[list[Any], list[Any]]:
        wire_in, client_reads = anyio.create_memory_object_stream[Any](100)
        server_writes, wire_out = anyio.create_memory_object_stream[Any](100)
        reads, writes = in_flight(client_reads, server_writes, limit=2)
        # Closed whatever happens: a stream left open warns in whichever test runs next.
        async with wire_in, client_reads, server_writes, wire_out:
            for item in (request(1), request(2), request(3), ValueError("unreadable"),
                         cancelled(1), request(4)):
                await wire_in.send(item)
            got = [await reads.receive() for _ in range(4)]  # 1, 2, the error, the cancel
            with anyio.move_on_after(0.2):  # 4 is read and refused: a cancel alone frees nothing
                got.append(await reads.receive())
            await settle_unanswered(got[0])  # the SDK settles 1 unanswered: one more may come
            await settle_unanswered(got[0])  # (once: a second call gives nothing more back)
            await wire_in.send(request(5))
            await wire_in.send(request(6))
            got.append(await reads.receive())
            with anyio.move_on_after(0.2):  # 6 is read and refused: 2 and 5 are unanswered
                got.append(await reads.receive())
            await writes.send(answer(2))  # the server answers 2: one more may come
            await wire_in.send(request(7))
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
    assert got[3].message.method == "notifications/cancelled"  # the server hears it
    assert [g.message.id for g in got[4:]] == [5, 7]
    # Each admitted request is handed on with its own hook; nothing else carries one.
    requests = [g for g in got if isinstance(g, SessionMessage)
                and isinstance(g.message, mcp_types.JSONRPCRequest)]
    assert [r.message.id for r in requests] == [1, 2, 5, 7]
    assert all(isinstance(r.metadata, ServerMessageMetadata) for r in requests)
    assert got[3].metadata is None
    # 3, 4 and 6 were refused at once, in the order read; 2's answer went out as written.
    refusals = [w.message for w in written if isinstance(w.message, mcp_types.JSONRPCError)]
    assert [(r.id, r.error.code, r.error.message) for r in refusals] == [
        (3, -32000, TOO_MANY_REQUESTS), (4, -32000, TOO_MANY_REQUESTS),
        (6, -32000, TOO_MANY_REQUESTS)]
    assert [w.message.id for w in written
            if isinstance(w.message, mcp_types.JSONRPCResponse)] == [2]


@contextlib.asynccontextmanager
async def dispatched(limit: int, out_buffer: float, handled: list[Any]) -> AsyncIterator[
        tuple[Any, Any]]:
    """The SDK's own dispatcher reading through ``in_flight``: what the client writes and what
    it reads. A request ``slow`` runs until it is cancelled; any other is answered at once."""
    wire_in, client_reads = anyio.create_memory_object_stream[Any](100)
    server_writes, wire_out = anyio.create_memory_object_stream[Any](out_buffer)
    reads, writes = in_flight(client_reads, server_writes, limit=limit)
    dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(reads, writes)

    async def on_request(dctx: Any, method: str, params: Mapping[str, Any] | None) -> dict[
            str, Any]:
        handled.append(dctx.request_id)
        if method == "slow":
            await anyio.sleep_forever()
        return {}

    async def on_notify(dctx: Any, method: str, params: Mapping[str, Any] | None) -> None:
        pass

    # Closed whatever happens: a stream left open warns in whichever test runs next.
    async with wire_in, client_reads, server_writes, wire_out, anyio.create_task_group() as tg:
        await tg.start(dispatcher.run, on_request, on_notify)
        yield wire_in, wire_out
        await wire_out.aclose()  # the client goes away: nothing waits on it any more
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(("rid", "cancel_id"), [(5, 5), (5, "5"), ("5", 5)],
                         ids=["same id", "integer cancelled as string", "string cancelled as integer"])
def test_a_request_the_sdk_cancels_gives_its_place_back_whatever_type_the_cancel_names_it(
        rid: int | str, cancel_id: int | str) -> None:
    # The SDK matches a cancel's id as coerce_request_id does ("5" is 5), cancels the request
    # and never answers it; its place must come back, or `limit` such requests wedge the
    # session for good (every later request refused).
    handled: list[Any] = []

    async def main() -> tuple[Any, list[Any]]:
        async with dispatched(2, 100, handled) as (wire_in, wire_out):
            for _ in range(2):  # the same id twice: each is its own request, settled in turn
                await wire_in.send(request(rid, "slow"))
                await anyio.wait_all_tasks_blocked()
                await wire_in.send(cancelled(cancel_id))
                await anyio.wait_all_tasks_blocked()
            await wire_in.send(request(7))
            with anyio.fail_after(5):
                first = (await wire_out.receive()).message
            await anyio.wait_all_tasks_blocked()
            rest = []
            with contextlib.suppress(anyio.WouldBlock):
                while True:
                    rest.append(wire_out.receive_nowait().message)
            return first, rest

    first, rest = anyio.run(main)
    assert isinstance(first, mcp_types.JSONRPCResponse), first  # not TOO_MANY_REQUESTS
    assert first.id == 7
    assert rest == []  # the cancelled requests are never answered
    assert handled == [rid, rid, 7]


def test_a_cancel_after_the_answer_gives_no_place_back_while_the_answer_waits() -> None:
    # A cancel that comes after the handler returned is ignored by the SDK: the answer is still
    # written, and waits (its task and bytes held) until the client reads. Such pairs from a
    # client that never reads grew the server without bound, never refused (~22 KB a pair).
    handled: list[Any] = []

    async def main() -> tuple[list[Any], list[Any]]:
        async with dispatched(2, 0, handled) as (wire_in, wire_out):  # the client never reads
            for rid in range(1, 7):
                await wire_in.send(request(rid))
                await anyio.wait_all_tasks_blocked()  # answered: the answer waits on the client
                await wire_in.send(cancelled(rid))
                await anyio.wait_all_tasks_blocked()
            ran = list(handled)
            with anyio.fail_after(5):  # now the client reads: 1, 2 answered, 3 refused
                written = [(await wire_out.receive()).message for _ in range(3)]
            return ran, written

    ran, written = anyio.run(main)
    assert ran == [1, 2]  # the third was refused, and the reading stopped behind it
    assert sorted((type(w).__name__, w.id) for w in written) == [
        ("JSONRPCError", 3), ("JSONRPCResponse", 1), ("JSONRPCResponse", 2)]


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_a_client_that_writes_without_reading_gets_every_request_answered_once(
        served: Served, stdio: str) -> None:
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = initialized(served)
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


def frames_until_quiet(process: Any, writing: threading.Thread) -> list[dict[str, Any]]:
    """Every frame the server writes until ``writing`` has ended and the wire is quiet."""
    assert process.stdout is not None
    frames: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1.5)
        if not ready:
            if not writing.is_alive():
                return frames
            continue
        line = process.stdout.readline()
        assert line, "the server closed stdout early"
        frames.append(json.loads(line))
    raise AssertionError("the server never went quiet")


@pytest.mark.parametrize("stdio", ["auto", "sdk"])
def test_a_client_that_cancels_each_request_it_never_reads_is_still_bounded(
        served: Served, stdio: str) -> None:
    # Each tools/list is cancelled just after its handler has answered: the SDK ignores such a
    # cancel and the answer waits on the full pipe. Giving the place back on the cancel let the
    # server hold every such answer (77 -> 144 MB for 3,000 pairs), and refuse none.
    served.settings["TOOLHOST_MCP_STDIO"] = stdio
    process = initialized(served)
    count = 600

    def pairs() -> None:
        for i in range(count):
            write(process, {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/list"})
            time.sleep(0.003)
            write(process, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": 100 + i}})

    writer = threading.Thread(target=pairs, daemon=True)
    writer.start()
    writer.join(count * 0.003 + 3)  # nothing read meanwhile (the server may stop reading)
    answers = frames_until_quiet(process, writer)
    ids = [a["id"] for a in answers]
    assert len(ids) == len(set(ids)) and set(ids) <= set(range(100, 100 + count))
    refused = [a for a in answers if "error" in a]
    assert refused, "no request was held back: every cancel gave a place back"
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
    process = initialized(served)
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
