"""An MCP server written without the SDK whose messages cost the host far more parsed than
their bytes, for tests/test_gateway_bounds.py. ``python gateway_hostile_upstream.py MARK`` speaks
stdio; with ``--http PORT`` it speaks Streamable HTTP on 127.0.0.1 (JSON bodies, or an event
stream for a call whose ``events`` is true). ``MARK`` only names the process, so a test can
find it.

Tools: ``nested`` (structured content of ``mib`` MiB of nested empty arrays, ``[],`` repeated:
~100 bytes each once parsed; ``id_last`` puts the id after the result, as the TypeScript SDK
does), ``wide`` (``n`` small records of structured content, id last), ``echo``, and over stdio
``two_ids``: held while the server says its tools changed, then, when the host lists them, one
line whose head names the call and whose ``form`` (``duplicate``: a second "id" member last;
``escaped``: one spelled ``"\\u0069d"``, mid-line) names the listing, with a tool whose
description is 17 MiB, past a listing's budget; then the call's own answer.

Its listing, by the environment: ``LISTING_MIB`` MiB of nested empty arrays spread over 1,024
tools' input schemas; ``BIG_SCHEMA`` a tool ``big`` whose input schema is about that many
bytes (an enum of short strings); ``FLOOD`` a ``list_changed`` every 0.1 s once initialized;
``PAGES`` pages of one tool each, whose description is 3 MiB, the id of each answer by
``PAGE_ID`` (``string``: the number as a string, ``middle``: neither first nor last).

Over HTTP, ``EVENTS`` answers everything with an event stream, and ``FRAMING`` writes each
event with lines the SSE parser drops, each holding a quote (a comment, ``id``, ``event``,
``retry``, an unknown field), CR, LF and CRLF line ends, and the message in two data lines.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from typing import Any

LISTING_MIB = float(os.environ.get("LISTING_MIB", "0"))
BIG_SCHEMA = int(os.environ.get("BIG_SCHEMA", "0"))
FLOOD = bool(os.environ.get("FLOOD"))
LIST_REQUESTS = os.environ.get("LIST_REQUESTS")  # a file each tools/list request appends to
PAGES = int(os.environ.get("PAGES", "0"))
PAGE_ID = os.environ.get("PAGE_ID", "")
EVENTS = bool(os.environ.get("EVENTS"))
FRAMING = bool(os.environ.get("FRAMING"))

_lock = threading.Lock()


def closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


def listing() -> bytes:
    """The ``tools/list`` result, as JSON text."""
    if LISTING_MIB:
        each = int(LISTING_MIB * (1 << 20)) // 1024
        arrays = b"[" + b"[]," * (each // 3) + b"[]]"
        return b'{"tools":[' + b",".join(
            b'{"name":"t%d","inputSchema":{"type":"object","x":%s}}' % (i, arrays)
            for i in range(1024)) + b"]}"
    listed = [
        {"name": "nested", "inputSchema": closed({"mib": {"type": "number"},
                                                  "id_last": {"type": "boolean"},
                                                  "events": {"type": "boolean"}})},
        {"name": "wide", "inputSchema": closed({"n": {"type": "integer"},
                                                "events": {"type": "boolean"}})},
        {"name": "echo", "inputSchema": closed({"text": {"type": "string"},
                                                "events": {"type": "boolean"}})},
    ]
    if BIG_SCHEMA:
        members = [f"m{i:07d}" for i in range(BIG_SCHEMA // 11)]
        listed.append({"name": "big", "inputSchema": closed({"v": {"enum": members}})})
    return json.dumps({"tools": listed}).encode()


def answer(request_id: Any, result: dict[str, Any] | bytes, *, id_last: bool = False) -> bytes:
    """One JSON-RPC answer; ``result`` given as JSON text is written as it is."""
    text = result if isinstance(result, bytes) else json.dumps(result).encode()
    rid = json.dumps(request_id).encode()
    if id_last:
        return b'{"result":' + text + b',"jsonrpc":"2.0","id":' + rid + b"}"
    return b'{"jsonrpc":"2.0","id":' + rid + b',"result":' + text + b"}"


def page(request_id: Any, cursor: str | None) -> bytes:
    """One page of ``PAGES``: a tool with a 3 MiB description, the id as ``PAGE_ID`` says."""
    number = int(cursor or 0)
    result: dict[str, Any] = {"tools": [{"name": f"p{number}", "description": "d" * (3 << 20),
                                         "inputSchema": closed({})}]}
    if number + 1 < PAGES:
        result["nextCursor"] = str(number + 1)
    text = json.dumps(result).encode()
    if PAGE_ID == "string":
        return b'{"jsonrpc":"2.0","id":"%d","result":%s}' % (request_id, text)
    return b'{"result":%s,"id":%d,"page":%d,"jsonrpc":"2.0"}' % (text, request_id, number)


def two_ids(call_id: int, list_id: int, form: str) -> bytes:
    """A listing's answer whose head names the call ``call_id``; ``form`` as above."""
    tools = json.dumps({"tools": [{"name": "t", "description": "d" * (17 << 20),
                                   "inputSchema": closed({})}]}).encode()
    head = b'{"jsonrpc":"2.0","id":%d,"result":%s,' % (call_id, tools)
    if form == "duplicate":
        return head + b'"id":%d}' % list_id
    return head + b'"\\u0069d":%d,"x":0}' % list_id


def called(request_id: Any, name: str, arguments: dict[str, Any]) -> bytes:
    if name == "nested":
        count = int(float(arguments["mib"]) * (1 << 20)) // 3
        result = (b'{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":['
                  + b"[]," * count + b"[]]}}")
        return answer(request_id, result, id_last=bool(arguments.get("id_last")))
    if name == "wide":
        records = [{"i": i, "s": "v"} for i in range(int(arguments["n"]))]
        return answer(request_id, {"content": [{"type": "text", "text": "wide"}],
                                   "structuredContent": {"records": records}}, id_last=True)
    return answer(request_id, {"content": [{"type": "text", "text": f"echo {arguments}"}]})


def handled(message: dict[str, Any]) -> bytes | None:
    """The answer to one message of the client's (None for a notification)."""
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        return None
    if method == "initialize":
        return answer(request_id, {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "hostile", "version": "1"}})
    if method == "tools/list":
        if LIST_REQUESTS:
            with open(LIST_REQUESTS, "a") as seen:
                seen.write(f"{time.monotonic()}\n")
        if PAGES:
            return page(request_id, (message.get("params") or {}).get("cursor"))
        return answer(request_id, listing())
    if method == "tools/call":
        params = message["params"]
        return called(request_id, params["name"], params.get("arguments") or {})
    return answer(request_id, {})


# ---------------------------------------------------------------------------------- stdio


def send(line: bytes) -> None:
    with _lock:
        sys.stdout.buffer.write(line + b"\n")
        sys.stdout.buffer.flush()


def flood() -> None:
    while True:
        time.sleep(0.1)
        send(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')


def stdio() -> None:
    held: tuple[int, str] | None = None  # the call ``two_ids``, and its form
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, params = message.get("method"), message.get("params") or {}
        if method == "notifications/initialized" and FLOOD:
            threading.Thread(target=flood, daemon=True).start()
        if method == "tools/call" and params.get("name") == "two_ids":
            held = (message["id"], params["arguments"]["form"])
            send(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')
        elif method == "tools/list" and held is not None:
            call_id, form = held
            held = None
            send(two_ids(call_id, message["id"], form))
            send(answer(call_id, {"content": [{"type": "text", "text": "held"}]}))
        elif (line := handled(message)) is not None:
            send(line)


# ---------------------------------------------------------------------------------- HTTP


def event(message: bytes) -> bytes:
    """``message`` as one event of an event stream (``FRAMING`` as above)."""
    if not FRAMING:
        return b"event: message\ndata: " + message + b"\n\n"
    first, _, rest = message.partition(b",")  # an LF between members is JSON's white space
    return (b':"\r\nid: "7\revent: "x\nretry: "\r\nnote: "\r\nevent: message\r\n'
            b"data:" + first + b",\r\ndata: " + rest + b"\n\r\n")


async def respond(writer: asyncio.StreamWriter, status: str, headers: dict[str, str],
                  body: bytes = b"") -> None:
    headers = {**headers, "Connection": "close", "Content-Length": str(len(body))}
    writer.write(f"HTTP/1.1 {status}\r\n".encode() + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()).encode() + b"\r\n" + body)
    await writer.drain()


async def serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        verb = (await reader.readline()).decode().split(" ", 1)[0]
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length") or 0))
        if verb != "POST":
            await respond(writer, "405 Method Not Allowed", {})
            return
        message = json.loads(body)
        found = handled(message)
        if found is None:
            await respond(writer, "202 Accepted", {})
        elif EVENTS or ((message.get("params") or {}).get("arguments") or {}).get("events"):
            await respond(writer, "200 OK", {"Content-Type": "text/event-stream",
                                             "Mcp-Session-Id": "s1"}, event(found))
        else:
            await respond(writer, "200 OK", {"Content-Type": "application/json",
                                             "Mcp-Session-Id": "s1"}, found)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def http(port: int) -> None:
    server = await asyncio.start_server(serve_one, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if "--http" in sys.argv:
        asyncio.run(http(int(sys.argv[sys.argv.index("--http") + 1])))
    else:
        stdio()
