"""What the libraries ``toolhost serve`` runs log through Python's ``logging`` (the MCP SDK,
uvicorn, httpx) is written as toolhost's own lines are: redacted, so no secret reaches stderr
that way either.

httpx logs every request's URL at ``info``, and a gateway upstream's URL may carry a password
or an API key. A real ``toolhost serve --http`` with a real upstream (tests/gateway_upstream.py
over HTTP) whose URL carries both; and, in a fresh process, the serve's logging configuration
with httpx requesting a real loopback server, a library's exception and an odd level."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from gateway_support import port_open, text_of, wait_for
from journeys.journey_support import Deployment, free_port, run

UPSTREAM = Path(__file__).with_name("gateway_upstream.py")
PASSWORD, KEY, BEARER = "PW-IN-URL-91", "QUERY-KEY-77", "TOKEN-IN-TRACEBACK-5"
SECRETS = (PASSWORD, KEY, BEARER, "PW-IN-ARGS-3", "PW-ODD-LEVEL-4")

#: A process configured as ``serve`` configures it, then the libraries log.
LIBRARIES = f"""
import http.server, logging, sys, threading
import httpx
from toolhost._mcp.server import _configure_stdlib_logging
from toolhost._pipeline.log import configure_logging
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT

class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *args):
        pass

configure_logging(FixedClock(DEFAULT_INSTANT), level="info", json=True)
_configure_stdlib_logging("info")
server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]
httpx.get(f"http://svc:{PASSWORD}@127.0.0.1:{{port}}/mcp?api_key={KEY}", timeout=30)
try:
    raise ValueError("upstream refused Authorization: Bearer {BEARER}")
except ValueError:
    logging.getLogger("mcp.server").exception("call to %s failed", "https://u:PW-IN-ARGS-3@h/")
logging.getLogger("uvicorn.error").log(25, "odd level, password=PW-ODD-LEVEL-4")
server.shutdown()
"""


def test_the_libraries_records_are_redacted_on_stderr(tmp_path: Path) -> None:
    # Regression: a plain StreamHandler wrote them, past the redactor: "INFO httpx: HTTP
    # Request: GET http://svc:PW-IN-URL-91@127.0.0.1:.../mcp?api_key=QUERY-KEY-77 ...".
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    done = subprocess.run([sys.executable, "-c", LIBRARIES], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert not [line for line in done.stderr.splitlines() if any(s in line for s in SECRETS)]
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    by_logger = {line["logger"]: line for line in lines}
    request = by_logger["httpx"]
    assert request["level"] == "info"
    assert "GET http://svc:***@127.0.0.1:" in request["event"]
    assert "/mcp?api_key=[redacted]" in request["event"]
    failed = by_logger["mcp.server"]
    assert (failed["level"], failed["event"]) == ("error", "call to https://u:***@h/ failed")
    assert "Traceback" in failed["exception"]
    assert "Authorization: Bearer [redacted]" in failed["exception"]
    odd = by_logger["uvicorn.error"]
    assert (odd["level"], odd["event"]) == ("info", "odd level, password=[redacted]")


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[int]:
    """tests/gateway_upstream.py's ``tracker`` over Streamable HTTP, on a loopback port."""
    port = free_port()
    with (tmp_path / "upstream.err").open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, str(UPSTREAM), "tracker", "--http", str(port), "--json"],
            stdout=subprocess.DEVNULL, stderr=errors)
    try:
        assert wait_for(lambda: process.poll() is None and port_open(port)), (
            tmp_path / "upstream.err").read_text()
        yield port
    finally:
        process.terminate()
        process.wait(30)


def test_a_gateway_upstreams_url_credentials_never_reach_serves_stderr(
        tmp_path: Path, upstream: int) -> None:
    # Regression: every POST and DELETE to the upstream was on stderr, password and key.
    config = tmp_path / "toolhost.toml"
    config.write_text('[mcp.servers.tracker]\nurl = { env = "TRACKER_URL" }\n'
                      '[mcp.servers.tracker.tools.echo]\nside_effect = "NONE"\nrisk = "LOW"\n'
                      'idempotency = "READ_ONLY"\n')
    config.chmod(0o600)
    deployment = Deployment(
        tmp_path, plugins="toolhost-math", TOOLHOST_LOG_LEVEL="info",
        TOOLHOST_CONFIG=str(config),
        TRACKER_URL=f"http://svc:{PASSWORD}@127.0.0.1:{upstream}/mcp?api_key={KEY}")

    async def journey() -> None:
        async with deployment.session("http") as client:
            echoed = await client.call_tool("mcp.tracker__echo", {"text": "hi"})
            assert not echoed.is_error, text_of(echoed)

    run(journey)
    said = deployment.stderr()
    assert not [line for line in said.splitlines() if PASSWORD in line or KEY in line]
    requests = [json.loads(line) for line in said.splitlines()
                if line.startswith("{") and '"logger": "httpx' in line]
    assert any(f"POST http://svc:***@127.0.0.1:{upstream}/mcp?api_key=[redacted]" in r["event"]
               for r in requests), said
