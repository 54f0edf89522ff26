"""A fake TensorScale: a real HTTPS server on loopback, and what the media tests share.

The server is the test kit's ``LoopbackTLSServer`` (127.0.0.1, ephemeral port, a certificate
from a throwaway ``trustme`` CA, which reaches the host only through ``TOOLHOST_CA_BUNDLE``). Each
POST is recorded (path, headers, parsed JSON body) and answered by the test's ``reply``
function. Bodies are framed as TensorScale's must be (the adapter refuses a body that ends only
with its connection): chunked unless a reply declares a Content-Length, so a reply can stream
for as long as it likes, and a write that fails tells the test the client closed the
connection. Each connection closes after its answer.
"""

from __future__ import annotations

import json
import select
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import attrs

from toolhost import Outcome
from toolhost.testing import Harness, LoopbackTLSServer, Run
from toolhost_media import plugin

PLUGINS: Mapping[str, object] = {"toolhost-media": plugin}
LOOPBACK = "127.0.0.1"
#: The credential the tests configure: it must never appear in any output.
KEY = "ts-test-key-5f1d9c0a7e"

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(256)) * 4
MP4 = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + bytes(range(256)) * 8
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x01" * 200
_WEBP_BODY = b"WEBPVP8 " + b"\x02" * 200
#: A RIFF header whose size field counts the bytes after it, as a real WebP's does.
WEBP = b"RIFF" + len(_WEBP_BODY).to_bytes(4, "little") + _WEBP_BODY


@attrs.define
class Received:
    path: str
    headers: dict[str, str]
    body: Any


Reply = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    server: FakeTensorScale
    # HTTP/1.1 for chunked framing; "Connection: close" still ends each connection.
    protocol_version = "HTTP/1.1"
    chunked = False

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        self.server.received.append(
            Received(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
        )
        self.server.reply(self)

    def do_GET(self) -> None:
        self.server.received.append(Received(self.path, dict(self.headers.items()), None))
        self.respond(404, "text/plain", b"no")

    def head(self, status: int, content_type: str, length: int | None = None) -> None:
        """The status line and headers: a body of ``length`` bytes, or chunked when None."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.chunked = length is None
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()

    def respond(self, status: int, content_type: str, body: bytes) -> None:
        self.head(status, content_type, len(body))
        self.wfile.write(body)

    def stream(self, chunks: Iterator[bytes], *, last: bool = True) -> bool:
        """Write ``chunks`` (each a chunk of its own when chunked, then the closing chunk if
        they are the ``last``); False (and the server's ``client_closed`` set) when the client
        closed the connection first."""
        try:
            for chunk in chunks:
                if self.chunked and chunk:  # an empty chunk would end the body
                    chunk = b"%x\r\n%b\r\n" % (len(chunk), chunk)
                self.wfile.write(chunk)
                self.wfile.flush()
            if self.chunked and last:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.server.client_closed.set()
            return False
        return True

    def log_message(self, format: str, *args: Any) -> None:
        pass


class FakeTensorScale(LoopbackTLSServer):
    """TensorScale on loopback HTTPS: every request is recorded in ``received`` and answered
    by ``reply``; ``release`` (set by the test, or at shutdown) ends a reply that waits."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], context: ssl.SSLContext,
                 ca_bundle: Path) -> None:
        super().__init__(handler, context, ca_bundle)
        self.received: list[Received] = []
        self.reply: Reply = ok(PNG, "image/png")
        self.client_closed = threading.Event()


# ---------------------------------------------------------------------------- replies


def ok(body: bytes, content_type: str, *, length: bool = False) -> Reply:
    def reply(h: Handler) -> None:
        h.head(200, content_type, len(body) if length else None)
        h.stream(iter([body[:5], body[5:]]))  # the signature split across reads
    return reply


def status(code: int, body: bytes = b'{"error": "provider says KEY ts-test-key-5f1d9c0a7e"}'
           ) -> Reply:
    def reply(h: Handler) -> None:
        h.respond(code, "application/json", body)
    return reply


def redirect(h: Handler) -> None:
    h.send_response(302)
    h.send_header("Location", f"{h.server.base_url}/elsewhere")
    h.send_header("Content-Type", "image/png")
    h.send_header("Content-Length", str(len(PNG)))
    h.send_header("Connection", "close")
    h.end_headers()
    h.wfile.write(PNG)


def sized(signature: bytes, total: int, content_type: str, *,
          declared: int | None = None) -> Reply:
    """``total`` bytes starting with ``signature``, in 1 MiB writes."""
    def chunks() -> Iterator[bytes]:
        yield signature
        left = total - len(signature)
        block = b"\x00" * (1024 * 1024)
        while left > 0:
            yield block[:left]
            left -= len(block)

    def reply(h: Handler) -> None:
        h.head(200, content_type, declared)
        h.stream(chunks())
    return reply


def stall(first: bytes, content_type: str, on_first: Callable[[], None] | None = None, *,
          trickle: bool = True) -> Reply:
    """Send the headers and ``first``, call ``on_first``, then wait until the client goes
    away or the test releases it: with ``trickle``, one byte every 50 ms (which also finds a
    closed connection at once); without, silence."""
    def reply(h: Handler) -> None:
        h.head(200, content_type)
        if not h.stream(iter([first]), last=False):
            return
        if on_first is not None:
            on_first()
        while not h.server.release.wait(0.05):
            if trickle and not h.stream(iter([b"\x00"]), last=False):
                return
    return reply


def thinking(on_request: Callable[[], None]) -> Reply:
    """The provider still at work: the request read, ``on_request`` called, and no answer,
    until the client goes away (its closed connection read at once) or the test releases it."""
    def reply(h: Handler) -> None:
        on_request()
        connection = h.connection
        while not h.server.release.is_set():
            readable, _, _ = select.select([connection], [], [], 0.05)
            if not readable:
                continue
            try:
                gone = connection.recv(1) == b""
            except (ssl.SSLError, OSError):
                gone = True
            if gone:
                h.server.client_closed.set()
                return
    return reply


def no_download_left() -> None:
    """No download thread outlives its call (each joined briefly: its last act is handing
    its end to the loop, so it may still be on its way out)."""
    for thread in threading.enumerate():
        if thread.name == "toolhost-media-download":
            thread.join(5)
            assert not thread.is_alive(), "a download thread outlived its call"


# ---------------------------------------------------------------------------- calls


def settings(server: FakeTensorScale, bundle: Path, **extra: str) -> dict[str, str]:
    """The host's environment: the key, the fake's base URL and CA, and EXTERNAL_WRITE/HIGH
    allowed (approval is the operator's step, tested on its own)."""
    return {
        "TENSORSCALE_API_KEY": KEY,
        "TENSORSCALE_BASE_URL": server.base_url,
        "TOOLHOST_CA_BUNDLE": str(bundle),
        "TOOLHOST_POLICY": '{"EXTERNAL_WRITE/HIGH": "allow"}',
        "TOOLHOST_POLICY_ALLOW_EXTERNAL_WRITE": "1",
        **extra,
    }


def call(host: Harness, tool: str, arguments: Mapping[str, Any], *, version: str | None = None,
         run: Run | None = None) -> Outcome:
    return host.call(tool, dict(arguments), version=version, run=run)
