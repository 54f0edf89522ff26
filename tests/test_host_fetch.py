"""``Host.fetch`` and ``Host.post_form``: what the host itself reads over HTTP (an issuer's
metadata and JWKS, a token endpoint's answer). Bodies are asked for unencoded and one that comes
encoded anyway is refused before anything is decoded: the 1 MiB limit counts what arrives, and
64 KiB of gzip decode to 64 MiB (D327). Against a loopback HTTPS server.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from toolhost._composition import Host
from toolhost._model.settings import Settings
from toolhost.testing import LoopbackTLSServer, host_for, loopback_tls_server

#: 64 MiB of zeros, gzipped: about 64 KiB on the wire.
BOMB = gzip.compress(b"\0" * (64 << 20), compresslevel=9)


class _Server(LoopbackTLSServer):
    accepted: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self) -> None:
        self.server.accepted.append(self.headers.get("Accept-Encoding", ""))
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body, encoded = (BOMB, True) if self.path == "/bomb" else (b'{"keys": []}', False)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if encoded:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815 - http.server's names

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    with loopback_tls_server(_Handler, tmp_path, server_class=_Server) as running:
        running.accepted = []
        yield running


@pytest.fixture
def host(server: _Server, tmp_path: Path) -> Iterator[Host]:
    h = host_for({}, data_dir=tmp_path / "data",
                 settings=Settings(env={"TOOLHOST_CA_BUNDLE": str(server.ca_bundle)}))
    yield h
    h.close()


def test_fetch_asks_for_an_unencoded_body_and_reads_it(host: Host, server: _Server) -> None:
    assert host.fetch(f"{server.base_url}/jwks") == b'{"keys": []}'
    assert host.post_form(f"{server.base_url}/token", {"a": "b"}, None) == b'{"keys": []}'
    assert server.accepted == ["identity", "identity"]


def test_an_encoded_body_is_refused_undecoded(host: Host, server: _Server) -> None:
    with pytest.raises(ValueError, match="encoded 'gzip', which was not asked for"):
        host.fetch(f"{server.base_url}/bomb")
    with pytest.raises(ValueError, match="encoded 'gzip', which was not asked for"):
        host.post_form(f"{server.base_url}/bomb", {"a": "b"}, ("id", "secret"))
