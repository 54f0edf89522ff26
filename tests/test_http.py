"""The host-built HTTP clients: the policy holds against a real TLS server on loopback.

The server is a ``ThreadingHTTPServer`` on 127.0.0.1 (ephemeral port) with a certificate from a
throwaway ``trustme`` CA; the CA reaches the clients only through ``TOOLHOST_CA_BUNDLE``.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from toolhost._adapters.http import CA_BUNDLE_SETTING, HttpClients, HttpConfigError
from toolhost._model.settings import Settings
from toolhost.testing import LoopbackTLSServer, loopback_tls_server

LOOPBACK = "127.0.0.1"


class _Handler(BaseHTTPRequestHandler):
    server: _TLSServer

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        if self.path == "/stall":
            self.server.release.wait(10)  # until the test is done with it
            return
        if self.path == "/redirect":
            status, extra, body = 302, {"Location": f"{self.server.base_url}/target"}, b"moved"
        else:
            status, extra, body = 200, {}, f"hello {self.headers.get('X-Probe', '-')}".encode()
        self.send_response(status)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _TLSServer(LoopbackTLSServer):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.paths: list[str] = []


@pytest.fixture
def server(ca: trustme.CA, tmp_path: Path) -> Iterator[_TLSServer]:
    with loopback_tls_server(_Handler, tmp_path, ca=ca, server_class=_TLSServer) as httpd:
        yield httpd


def with_bundle(path: Path) -> HttpClients:
    return HttpClients(Settings(env={CA_BUNDLE_SETTING: str(path)}))


def test_a_request_verifies_against_the_ca_bundle(server: _TLSServer, bundle: Path) -> None:
    with with_bundle(bundle).client(timeout=5, headers={"X-Probe": "p1"}) as client:
        response = client.get(f"{server.base_url}/hello")
    assert (response.status_code, response.text) == (200, "hello p1")


def test_without_the_bundle_verification_fails(server: _TLSServer) -> None:
    with HttpClients(Settings()).client(timeout=5) as client, \
            pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        client.get(f"{server.base_url}/hello")
    assert server.paths == []


def test_a_redirect_is_returned_not_followed(server: _TLSServer, bundle: Path) -> None:
    with with_bundle(bundle).client(timeout=5) as client:
        response = client.get(f"{server.base_url}/redirect")
    assert response.status_code == 302
    assert response.headers["Location"] == f"{server.base_url}/target"
    assert response.next_request is not None  # httpx saw a redirect and did not take it
    assert server.paths == ["/redirect"]


def assert_both_clients_fetch(clients: HttpClients, server: _TLSServer) -> None:
    """The sync and the async client each GET ``/hello`` from ``server``: 200."""
    with clients.client(timeout=5) as client:
        assert client.get(f"{server.base_url}/hello").status_code == 200

    async def fetch() -> int:
        async with clients.async_client(timeout=5) as client:
            return (await client.get(f"{server.base_url}/hello")).status_code

    assert asyncio.run(fetch()) == 200


def test_proxy_and_certificate_variables_in_the_environment_change_nothing(
    server: _TLSServer, bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy that would be used would be refused (loopback discard port); a certificate
    # file that would be used does not exist.
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, f"http://{LOOPBACK}:9")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle.parent / "no-such-roots.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", str(bundle.parent / "no-such-dir"))
    assert_both_clients_fetch(with_bundle(bundle), server)
    assert server.paths == ["/hello", "/hello"]


def test_ssl_cert_file_does_not_add_trust(
    server: _TLSServer, bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CA offered through the environment instead of TOOLHOST_CA_BUNDLE is not trusted.
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.setenv("SSL_CERT_DIR", str(bundle.parent))
    with HttpClients(Settings()).client(timeout=5) as client, \
            pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        client.get(f"{server.base_url}/hello")


def test_sslkeylogfile_in_the_environment_gets_no_tls_secrets(
    server: _TLSServer, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # create_default_context reads SSLKEYLOGFILE whatever trust_env says; with the file and a
    # capture of the traffic, a provider's API key or an issuer's client secret could be read.
    # The server was started before the variable was set, so only a client could write it.
    keylog = tmp_path / "keys.log"
    monkeypatch.setenv("SSLKEYLOGFILE", str(keylog))
    clients = with_bundle(bundle)
    assert_both_clients_fetch(clients, server)
    assert clients.ssl_context.keylog_filename is None
    assert not keylog.exists()  # not even opened (create_default_context opens it)


def test_an_sslkeylogfile_that_cannot_be_written_breaks_no_client(
    server: _TLSServer, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "no-such-dir" / "keys.log"))
    with with_bundle(bundle).client(timeout=5) as client:
        assert client.get(f"{server.base_url}/hello").status_code == 200


def test_the_bundle_is_read_once_when_the_clients_are_built(
    server: _TLSServer, bundle: Path
) -> None:
    clients = with_bundle(bundle)
    bundle.unlink()
    for _ in range(2):
        with clients.client(timeout=5) as client:
            assert client.get(f"{server.base_url}/hello").status_code == 200


def test_async_client_verifies_and_does_not_follow_redirects(
    server: _TLSServer, bundle: Path
) -> None:
    async def fetch(clients: HttpClients, path: str) -> httpx.Response:
        async with clients.async_client(timeout=5, headers={"X-Probe": "a1"}) as client:
            return await client.get(f"{server.base_url}{path}")

    ok = asyncio.run(fetch(with_bundle(bundle), "/hello"))
    assert (ok.status_code, ok.text) == (200, "hello a1")
    moved = asyncio.run(fetch(with_bundle(bundle), "/redirect"))
    assert moved.status_code == 302
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(fetch(HttpClients(Settings()), "/hello"))
    assert server.paths == ["/hello", "/redirect"]


def test_an_injected_transport_receives_the_request() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(302, headers={"Location": "https://example.invalid/next"})

    transport = httpx.MockTransport(handler)
    clients = HttpClients(Settings(), transport=transport, async_transport=transport)
    with clients.client(timeout=3, headers={"X-Probe": "m1"}) as client:
        assert client.get("https://api.example.invalid/v1/x").status_code == 302
        assert (client.trust_env, client.follow_redirects) == (False, False)
        assert client.timeout == httpx.Timeout(3)

    async def fetch() -> int:
        async with clients.async_client(timeout=httpx.Timeout(2, connect=1)) as client:
            assert (client.trust_env, client.follow_redirects) == (False, False)
            return (await client.get("https://api.example.invalid/v1/y")).status_code

    assert asyncio.run(fetch()) == 302
    assert [str(r.url) for r in seen] == ["https://api.example.invalid/v1/x",
                                         "https://api.example.invalid/v1/y"]
    assert seen[0].headers["X-Probe"] == "m1"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_failed_connection_is_not_retried(bundle: Path, asynchronous: bool) -> None:
    # A loopback listener that never answers the TLS handshake: every connection attempt
    # completes in the kernel and waits in the backlog, so afterwards the backlog holds
    # exactly as many connections as the client made.
    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen(8)
        url = f"https://{LOOPBACK}:{listener.getsockname()[1]}/"
        clients = with_bundle(bundle)
        timeout = httpx.Timeout(0.2)
        if asynchronous:
            async def fetch() -> None:
                async with clients.async_client(timeout=timeout) as client:
                    await client.get(url)

            with pytest.raises(httpx.ConnectTimeout):
                asyncio.run(fetch())
        else:
            with clients.client(timeout=timeout) as client, pytest.raises(httpx.ConnectTimeout):
                client.get(url)
        listener.setblocking(False)
        accepted = 0
        while True:
            try:
                conn, _ = listener.accept()
            except BlockingIOError as exc:
                assert exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
                break
            conn.close()
            accepted += 1
    assert accepted == 1


def test_a_missing_bundle_is_a_config_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "roots.pem"
    with pytest.raises(HttpConfigError) as info:
        with_bundle(missing)
    message = str(info.value)
    assert str(missing) in message and CA_BUNDLE_SETTING in message and "\n" not in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("content", [b"", b"not a certificate\n", b"\x30\x82\x01\x0a\x02"],
                         ids=["empty", "text", "der-ish"])
def test_a_bundle_that_is_not_pem_is_a_config_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "roots.pem"
    path.write_bytes(content)
    with pytest.raises(HttpConfigError) as info:
        with_bundle(path)
    assert str(path) in str(info.value) and "PEM" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_directory_is_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(HttpConfigError, match="is not a file"):
        with_bundle(tmp_path)


def test_a_blank_bundle_setting_means_no_extra_roots(server: _TLSServer) -> None:
    clients = HttpClients(Settings(env={CA_BUNDLE_SETTING: "  "}))
    with clients.client(timeout=5) as client, pytest.raises(httpx.ConnectError):
        client.get(f"{server.base_url}/hello")


def test_the_timeout_is_a_required_keyword() -> None:
    clients = HttpClients(Settings(), transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    with pytest.raises(TypeError):
        clients.client()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        clients.async_client()  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "timeout",
    [0, 0.0, -1, float("inf"), float("nan"), None, True, "5",
     httpx.Timeout(None), httpx.Timeout(5.0, read=None), httpx.Timeout(5.0, pool=0)],
    ids=["zero", "zero-float", "negative", "inf", "nan", "none", "bool", "str",
         "timeout-none", "timeout-read-none", "timeout-pool-zero"],
)
def test_a_missing_zero_or_unbounded_timeout_is_refused(timeout: Any) -> None:
    clients = HttpClients(Settings(), transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    with pytest.raises(ValueError, match="timeout"):
        clients.client(timeout=timeout)
    with pytest.raises(ValueError, match="timeout"):
        clients.async_client(timeout=timeout)


# ------------------------------------------------------------- an async tool's own requests


def _fetching_tool(timeout_s: float = 5) -> Any:
    """An async tool whose first ``await`` is a request of the host's async client: httpx
    (over anyio) enters a cancel scope there that must be left in the same task."""
    from conftest import make_plugin, make_spec

    from toolhost import Tool, ToolOutput

    def build(services: Any) -> Any:
        async def fetch(arguments: Any, context: Any) -> ToolOutput:
            async with services.async_http(timeout=30) as client:
                response = await client.get(arguments["url"])
            return ToolOutput(structured={"echo": response.text}, content=response.text)
        return fetch

    schema = {"type": "object", "properties": {"url": {"type": "string", "maxLength": 100}},
              "required": ["url"], "additionalProperties": False}
    spec = make_spec(name="fx.fetch", timeout_s=timeout_s, input_schema=schema)
    return make_plugin(tools=[Tool(spec, build=build)])


def test_an_async_tool_awaiting_a_request_first_gets_its_response(
    server: _TLSServer, bundle: Path
) -> None:
    # Regression: the body's first step ran inline and its rest in a new task, so httpx
    # failed with "Attempted to exit cancel scope in a different task" (tool.internal.unexpected).
    from toolhost.testing import Harness

    settings = {CA_BUNDLE_SETTING: str(bundle)}
    with Harness.over({"fx-dist": _fetching_tool()}, settings=settings) as h:
        for _ in range(2):
            outcome = h.invoke("fx.fetch", url=f"{server.base_url}/hello")
            assert outcome.failure is None, outcome.failure
            assert outcome.structured == {"echo": "hello -"}


def test_an_async_request_past_the_deadline_is_cancelled_and_the_host_goes_on(
    server: _TLSServer, bundle: Path
) -> None:
    from toolhost.testing import Harness

    settings = {CA_BUNDLE_SETTING: str(bundle)}
    with Harness.over({"fx-dist": _fetching_tool(timeout_s=0.3)},
                      settings=settings) as h:
        outcome = h.invoke("fx.fetch", url=f"{server.base_url}/stall")
        assert outcome.failure is not None
        assert outcome.failure.reason_code == "tool.timeout.deadline"
        # The pipeline's task was not left cancelled: the next call through it works.
        again = h.invoke("fx.fetch", url=f"{server.base_url}/hello")
        assert again.failure is None, again.failure
        assert again.structured == {"echo": "hello -"}
