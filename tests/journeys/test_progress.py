"""Progress on long work reaches the client that asked for it, and only that one.

A person's agent runs a sandboxed command of about five seconds, and generates a picture that
the provider streams slowly. The official MCP SDK client that passes a ``progress_callback``
(so its ``tools/call`` carries ``_meta.progressToken``) receives ``notifications/progress``
for that call: the command's seconds out of its timeout with its output so far, the picture's
bytes out of the size the provider declared, the last of them the whole file. The same calls
without a callback bring no progress notification at all (the session's message handler sees
every notification the server sends). Over stdio and over Streamable HTTP, where a request's
notifications ride its own response stream.

Each call is approved by the person in the client (CODE_EXECUTION/HIGH and EXTERNAL_WRITE need
an approval under the default policy); the work, and its progress, runs once it is given.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, contextmanager, suppress
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession

from toolhost.testing import loopback_tls_server

from .fake_services import (
    _CLIENT_GONE,
    LOOPBACK,
    PNG,
    TENSORSCALE_KEY,
    _recording_handler,
)
from .journey_support import (
    CLIENT,
    REQUEST_TIMEOUT_S,
    START_TIMEOUT_S,
    Deployment,
    Person,
    _over_http,
    _over_stdio,
    assert_no_traceback,
    ok,
    run,
)

TRANSPORTS = ["stdio", "http"]

#: About five seconds, printing as it goes: five progress ticks, the output growing.
FIVE_SECONDS = "for i in 1 2 3 4 5; do echo tick $i; sleep 1; done"
#: The default timeout_s of sandbox.run_command: the total every tick counts towards.
SANDBOX_TIMEOUT_S = 60

#: A picture big enough to arrive in several parts.
PICTURE = PNG + bytes(range(256)) * 256  # ~65 KiB
#: The provider sends it in this many parts, PAUSE_S apart (longer than the host's 0.1 s
#: between two notifications, so each part can be one).
PARTS = 8
PAUSE_S = 0.15


class Heard:
    """What the client heard: the progress callback's calls, and every progress notification
    that reached the session (the message handler sees all, asked for or not)."""

    def __init__(self) -> None:
        self.callback: list[tuple[float, float | None, str | None]] = []
        self.notifications: list[types.ProgressNotification] = []

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.callback.append((progress, total, message))

    async def message(self, message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            self.notifications.append(message)

    async def settled(self) -> None:
        """The callback has run for every notification heard (the SDK runs it as a task)."""
        with anyio.fail_after(10):
            while len(self.callback) < len(self.notifications):
                await anyio.sleep(0.01)


@asynccontextmanager
async def session(deployment: Deployment, transport: str, person: Person,
                  heard: Heard) -> AsyncIterator[ClientSession]:
    """An initialized SDK ClientSession (the 2025-11-25 handshake) on a fresh `toolhost serve`
    of ``deployment``, whose message handler records every progress notification."""
    log = deployment._new_log(f"serve-{transport}-progress")
    opened = _over_stdio if transport == "stdio" else _over_http
    async with opened(deployment.env(), (), log) as (read, write), ClientSession(
            read, write, read_timeout_seconds=REQUEST_TIMEOUT_S, elicitation_callback=person,
            client_info=CLIENT, message_handler=heard.message) as client:
        with anyio.fail_after(START_TIMEOUT_S):
            await client.initialize()
        yield client
    assert_no_traceback(log.read_text(errors="replace"))


def _growing(values: list[float]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_long_command_reports_its_progress_to_the_client_that_asked(
        tmp_path: Path, transport: str) -> None:
    deployment = Deployment(tmp_path, plugins="toolhost-workspace,toolhost-sandbox")
    person = Person()
    asked, unasked = Heard(), Heard()

    async def journey() -> None:
        async with session(deployment, transport, person, asked) as client:
            result = await client.call_tool("sandbox.run_command", {"command": FIVE_SECONDS},
                                            progress_callback=asked.progress)
            done = ok(result)
            assert (done["exit_code"], done["stdout"].count("tick")) == (0, 5)
            await asked.settled()
        async with session(deployment, transport, person, unasked) as client:
            result = await client.call_tool("sandbox.run_command",
                                            {"command": "echo quiet; sleep 2"})
            assert ok(result)["exit_code"] == 0

    run(journey)
    assert person.approved_tools() == ["sandbox.run_command", "sandbox.run_command"]
    # One a second while it ran (loosely: a loaded machine may lose one).
    assert 3 <= len(asked.callback) <= 6, asked.callback
    assert len(asked.notifications) == len(asked.callback)
    seconds = [p for p, _, _ in asked.callback]
    assert _growing(seconds) and seconds[0] >= 1
    assert {t for _, t, _ in asked.callback} == {SANDBOX_TIMEOUT_S}
    messages = [m for _, _, m in asked.callback]
    assert all(m is not None and m.endswith(" of output") for m in messages), messages
    assert messages[-1] != "0 bytes of output"  # its output so far
    # The client that did not ask heard no progress, though its command ran two seconds.
    assert (unasked.callback, unasked.notifications) == ([], [])


@contextmanager
def slow_tensorscale(tmp_path: Path) -> Any:
    """A TensorScale that streams PICTURE with its Content-Length, in PARTS parts."""
    arrivals: list[Any] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "image/png")
        h.send_header("Content-Length", str(len(PICTURE)))
        h.end_headers()
        size = -(-len(PICTURE) // PARTS)
        with suppress(*_CLIENT_GONE):
            for start in range(0, len(PICTURE), size):
                h.wfile.write(PICTURE[start:start + size])
                h.wfile.flush()
                time.sleep(PAUSE_S)

    with loopback_tls_server(_recording_handler(arrivals, answer), tmp_path,
                             names=(LOOPBACK,)) as server:
        yield {"TENSORSCALE_API_KEY": TENSORSCALE_KEY,
               "TENSORSCALE_BASE_URL": server.base_url,
               "TOOLHOST_CA_BUNDLE": str(server.ca_bundle)}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_download_reports_the_bytes_received_to_the_client_that_asked(
        tmp_path: Path, transport: str) -> None:
    asked, unasked = Heard(), Heard()
    person = Person()
    with slow_tensorscale(tmp_path) as settings:
        deployment = Deployment(tmp_path, plugins="toolhost-media", **settings)

        async def journey() -> None:
            async with session(deployment, transport, person, asked) as client:
                generated = await client.call_tool("image.generate", {"prompt": "a kite"},
                                                   progress_callback=asked.progress)
                assert ok(generated)["artifact"]["byte_count"] == len(PICTURE)
                await asked.settled()
            async with session(deployment, transport, person, unasked) as client:
                generated = await client.call_tool("image.generate", {"prompt": "a boat"})
                assert ok(generated)["artifact"]["byte_count"] == len(PICTURE)

        run(journey)
    assert person.approved_tools() == ["image.generate", "image.generate"]
    received = [p for p, _, _ in asked.callback]
    assert len(received) >= 2 and _growing(received), asked.callback
    assert {t for _, t, _ in asked.callback} == {len(PICTURE)}  # the declared size
    # The completing update always goes, and before the result: the whole file.
    assert received[-1] == len(PICTURE)
    assert {m for _, _, m in asked.callback} == {"bytes received"}
    assert len(asked.notifications) == len(asked.callback)
    assert (unasked.callback, unasked.notifications) == ([], [])
    assert TENSORSCALE_KEY not in json.dumps(asked.callback) + deployment.stderr()
