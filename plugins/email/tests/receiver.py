"""A real loopback HTTPS one-click receiver: records exactly what arrived (method, path,
headers, body) and answers as told: 200, 302, a 4xx, a 5xx, or a stall (no answer until the
test ends). Its certificate is trustme's, for ``localhost``, ``127.0.0.1`` and ``unsub.test``; the host trusts
it through TOOLHOST_CA_BUNDLE."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import attrs

from toolhost.testing import loopback_tls_server


@attrs.frozen
class Arrival:
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n.lower() == name.lower()]


@attrs.define
class Receiver:
    port: int
    ca_bundle: Path
    arrivals: list[Arrival]
    #: What the next requests get: an HTTP status, or "stall".
    answer: int | str = 200
    released: threading.Event = attrs.field(factory=threading.Event)

    def url(self, path: str = "/unsubscribe/1?list=news", host: str = "localhost") -> str:
        return f"https://{host}:{self.port}{path}"


@contextmanager
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    state = Receiver(port=0, ca_bundle=tmp_path, arrivals=[])  # both set once it listens

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            state.arrivals.append(Arrival(self.command, self.path,
                                          tuple(self.headers.items()), body))
            answer = state.answer
            if answer == "stall":
                state.released.wait(30)
                return
            assert isinstance(answer, int)
            self.send_response(answer)
            if answer == 302:
                self.send_header("Location", state.url("/redirected"))
            self.send_header("Set-Cookie", "session=tracked; Path=/")
            body_out = b"remote content that must never be returned"
            self.send_header("Content-Length", str(len(body_out)))
            self.end_headers()
            self.wfile.write(body_out)

        do_POST = do_GET = _record  # noqa: N815 - http.server's names

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    with loopback_tls_server(Handler, tmp_path,
                             names=("localhost", "127.0.0.1", "unsub.test")) as server:
        state.port, state.ca_bundle = server.port, server.ca_bundle
        try:
            yield state
        finally:
            state.released.set()
