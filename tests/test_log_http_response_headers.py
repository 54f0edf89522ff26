"""httpx's debug lines about a response reach ``serve``'s log without its cookie or its
secret-named headers.

httpcore, under httpx (the gateway's HTTP upstream), logs each response's headers at ``debug``
as a list of ``(bytes, bytes)`` pairs: ``[(b'Set-Cookie', b'...'), (b'X-Api-Key', b'...')]``.
A fresh process configured as ``serve`` configures it, at ``debug``, with a real httpx client
asking a real loopback HTTP server that answers with a session cookie and an API key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

#: What ``serve`` configures before anything logs, at ``debug``.
SERVE_AT_DEBUG = """
from toolhost._mcp.server import _configure_stdlib_logging
from toolhost._pipeline.log import configure_logging
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT

configure_logging(FixedClock(DEFAULT_INSTANT), level="debug", json=True)
_configure_stdlib_logging("debug")
"""


def logged_at_debug(script: str) -> list[dict[str, Any]]:
    """The log lines of a fresh process, configured as ``serve`` is at ``debug``, that runs
    ``script``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLHOST_", "AWS_"))}
    done = subprocess.run([sys.executable, "-c", SERVE_AT_DEBUG + script], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return [json.loads(line) for line in done.stderr.splitlines()]


SESSION, KEY, SENT = "SESSIONsecret42", "APIKEYsecret42", "SENTcookie42"

#: A loopback server that answers with a session cookie and an API key; httpx asks it once,
#: sending a cookie of its own.
REQUEST = f"""
import http.server, threading
import httpx

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Set-Cookie", "session={SESSION}; Path=/; HttpOnly")
        self.send_header("X-Api-Key", "{KEY}")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
threading.Thread(target=server.serve_forever, daemon=True).start()
httpx.get(f"http://127.0.0.1:{{server.server_address[1]}}/", headers={{"Cookie": "sid={SENT}"}},
          timeout=30)
server.shutdown()
"""


def test_httpcores_response_header_pairs_carry_no_cookie_or_key() -> None:
    # Regression: "receive_response_headers.complete return_value=(b'HTTP/1.0', 200, b'OK',
    # [..., (b'Set-Cookie', b'session=SESSIONsecret42; Path=/; HttpOnly'), (b'X-Api-Key',
    # b'APIKEYsecret42'), ...])": the name was followed by a comma, not a colon.
    lines = logged_at_debug(REQUEST)
    said = "\n".join(json.dumps(line) for line in lines)
    for secret in (SESSION, KEY, SENT):
        assert secret not in said
    (headers,) = [line["event"] for line in lines if line["logger"] == "httpcore.http11"
                  and line["event"].startswith("receive_response_headers.complete")]
    assert "(b'Set-Cookie', b'[redacted]')" in headers
    assert "(b'X-Api-Key', b'[redacted]')" in headers
    assert "(b'Content-Length', b'0')" in headers
