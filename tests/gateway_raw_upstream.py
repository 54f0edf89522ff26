"""A stdio MCP server written without the SDK, for the transport's tests
(tests/test_gateway_stdio.py): it writes exactly the bytes a test needs, including what the
SDK's server never would. ``python gateway_raw_upstream.py`` with, in its environment,
``RAW_STAY=1`` to keep running after its stdin's end (SIGTERM is what ends it) and
``RAW_MARK`` a path the children it starts name (so a test can find them).

Tools: ``echo`` (the code points of ``text``, so what arrived is exact), ``id_last`` (a result
of ``n`` bytes whose ``id`` comes after it), ``spawn`` (a child in its process group that
ignores SIGTERM), ``die_leaving_child`` (a child holding stdout, then exit without answering),
``stop_reading`` (answers, then never reads stdin again), ``outre`` (structured content its own
output schema's backtracking pattern takes seconds to refuse), ``shout`` (``mib`` MiB on stderr
without a newline, then an answer).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

out = sys.stdout.buffer
MARK = os.environ.get("RAW_MARK", "raw-child")
SLEEPER = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def text(request_id: Any, value: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id,
            "result": {"content": [{"type": "text", "text": value}]}}


def call(request_id: Any, name: str, arguments: dict[str, Any]) -> None:
    if name == "echo":
        send(text(request_id, " ".join(f"{ord(c):x}" for c in arguments["text"])))
    elif name == "id_last":
        body = {"content": [{"type": "text", "text": "x" * int(arguments["n"])}]}
        out.write(json.dumps({"jsonrpc": "2.0", "result": body, "id": request_id}).encode()
                  + b"\n")
        out.flush()
    elif name == "spawn":
        subprocess.Popen([sys.executable, "-c", SLEEPER, MARK])
        time.sleep(0.3)  # its SIGTERM handler is in place
        send(text(request_id, "spawned"))
    elif name == "die_leaving_child":
        subprocess.Popen([sys.executable, "-c", SLEEPER, MARK])  # inherits our stdout
        os._exit(0)
    elif name == "outre":
        answer = text(request_id, "x")
        answer["result"]["structuredContent"] = {"s": "a" * 25 + "!"}
        send(answer)
    elif name == "shout":
        block = b"e" * (1 << 20)
        for _ in range(int(arguments["mib"])):
            sys.stderr.buffer.write(block)
        sys.stderr.buffer.flush()
        send(text(request_id, "shouted"))
    elif name == "stop_reading":
        send(text(request_id, "deaf from now on"))
        while True:
            time.sleep(1)


def main() -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [
                {"name": n, "inputSchema": {"type": "object"}}
                for n in ("echo", "id_last", "spawn", "die_leaving_child", "stop_reading",
                          "shout")] + [
                {"name": "outre", "inputSchema": {"type": "object"}, "outputSchema": {
                    "type": "object", "properties": {"s": {"type": "string",
                                                           "pattern": "^(a+)+$"}}}}]}})
        elif method == "tools/call":
            call(request_id, message["params"]["name"], message["params"].get("arguments", {}))
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
    while os.environ.get("RAW_STAY"):
        signal.pause()


if __name__ == "__main__":
    main()
