"""A stdio MCP server written without the SDK that lists 1,024 tools whose names are long and
alike (``a``, ``b`` and ``_``: valid MCP names, and the worst case for a spelling comparison),
for tests/test_gateway_table_hint_cost.py. ``python gateway_many_names_upstream.py``.

Tools: ``answer`` (a text result at once), then the 1,023 others (each answers the same).
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

#: Half of them as long as an MCP name may be, half 64 characters.
NAMES = ["answer"] + ["b" + "".join(random.Random(i).choices("ab_", k=size - 1))
                      for i, size in enumerate([128, 64] * 511 + [128])]

out = sys.stdout.buffer


def answer(request_id: Any, result: dict[str, Any]) -> None:
    out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")
    out.flush()


def main() -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            answer(request_id, {"protocolVersion": params["protocolVersion"],
                                "capabilities": {"tools": {}},
                                "serverInfo": {"name": "many", "version": "1"}})
        elif method == "tools/list":
            answer(request_id, {"tools": [
                {"name": name, "inputSchema": {"type": "object", "properties": {},
                                               "additionalProperties": False}}
                for name in NAMES]})
        elif method == "tools/call":
            answer(request_id, {"content": [{"type": "text", "text": "answered"}]})
        elif request_id is not None:
            answer(request_id, {})


if __name__ == "__main__":
    main()
