"""A stdio MCP server written without the SDK that answers a call with the line it is told to,
for tests/test_gateway_stdio.py: what no SDK server would write (JSON cut short, a lone
surrogate's escape, JSON that is no JSON-RPC answer). ``python gateway_unreadable_upstream.py``.

Tools: ``say`` (its answer is the ``line`` argument as it is, each ``{id}`` in it the call's
request id as JSON), ``echo`` (the ``text`` argument, as a text result).
"""

from __future__ import annotations

import json
import sys
from typing import Any

out = sys.stdout.buffer


def send(line: bytes) -> None:
    out.write(line + b"\n")
    out.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode())


def main() -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            answer(request_id, {"protocolVersion": params["protocolVersion"],
                                "capabilities": {"tools": {}},
                                "serverInfo": {"name": "unreadable", "version": "1"}})
        elif method == "tools/list":
            answer(request_id, {"tools": [
                {"name": name, "inputSchema": {"type": "object"}} for name in ("say", "echo")]})
        elif method == "tools/call" and params["name"] == "say":
            line = params["arguments"]["line"].replace("{id}", json.dumps(request_id))
            send(line.encode())
        elif method == "tools/call":
            answer(request_id, {"content": [{"type": "text",
                                             "text": params["arguments"]["text"]}]})
        elif request_id is not None:
            answer(request_id, {})


if __name__ == "__main__":
    main()
