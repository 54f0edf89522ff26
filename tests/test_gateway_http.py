"""The MCP gateway's Streamable HTTP upstreams, against a real TLS server on loopback.

The upstream is tests/gateway_https_upstream.py: gateway_upstream.py's tools in the official
SDK's Streamable HTTP app, served by uvicorn on 127.0.0.1 with a certificate of a throwaway
``trustme`` CA, behind an ASGI middleware that logs every request's ``Authorization`` values
before the app sees it. The host is ``toolhost`` in a subprocess whose environment is the SDK's
small default one plus what each test gives it: the CA reaches it only through
``TOOLHOST_CA_BUNDLE``, the bearer token only through the variable ``toolhost.toml`` names
(``token = { env = ... }``), a fresh random value each time. Calls go through ``toolhost serve``
with the SDK's own ``ClientSession``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from conftest import invocation_rows

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

import anyio
from gateway_support import meta, served, text_of, wait_for
from mcp.client.stdio import get_default_environment

LOOPBACK = "127.0.0.1"
HTTPS_UPSTREAM = Path(__file__).with_name("gateway_https_upstream.py")
#: The variable toolhost.toml names for the server's bearer token.
TOKEN_VARIABLE = "GW_SECURE_TOKEN"
#: Every spelling of a proxy variable httpx (and curl, and requests) would honour.
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy",
                   "all_proxy")


# ---------------------------------------------------------------------------- harness


class Upstream:
    """One gateway_https_upstream.py process (``name``), serving TLS with a certificate of
    ``ca`` for 127.0.0.1, or plain HTTP when ``ca`` is None; and what reached it."""

    def __init__(self, directory: Path, name: str, *, ca: trustme.CA | None,
                 redirect_to: str | None = None) -> None:
        directory.mkdir()
        self.dir = directory
        self.headers_log = directory / "headers.log"
        self.calls_log = directory / "calls.log"
        port_file = directory / "port"
        command = [sys.executable, str(HTTPS_UPSTREAM), name, str(port_file),
                   str(self.headers_log)]
        self.context: ssl.SSLContext | None = None
        if ca is not None:
            leaf = ca.issue_cert(LOOPBACK)
            cert, key = directory / "cert.pem", directory / "key.pem"
            leaf.cert_chain_pems[0].write_to_path(str(cert))
            leaf.private_key_pem.write_to_path(str(key))
            command += ["--tls", str(cert), str(key)]
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ca.configure_trust(self.context)
        if redirect_to is not None:
            command += ["--redirect-to", redirect_to]
        self._stderr = (directory / "stderr").open("w")
        self.process = subprocess.Popen(command, env={**os.environ, "GW_LOG": str(self.calls_log)},
                                        stdout=subprocess.DEVNULL, stderr=self._stderr)
        try:
            assert wait_for(lambda: self._alive() and port_file.exists()), self.stderr()
            self.port = int(port_file.read_text())
            self.origin = f"{'https' if ca is not None else 'http'}://{LOOPBACK}:{self.port}"
            if self.context is not None:
                # Serving: a TLS handshake with the CA completes (no HTTP request is made, so
                # nothing is logged). A plain server's listening socket already queues.
                assert wait_for(self._handshakes), self.stderr()
        except BaseException:
            self.close()
            raise

    def _alive(self) -> bool:
        assert self.process.poll() is None, self.stderr()
        return True

    def _handshakes(self) -> bool:
        assert self.context is not None and self._alive()
        with contextlib.suppress(OSError), \
                socket.create_connection((LOOPBACK, self.port), timeout=1) as raw, \
                self.context.wrap_socket(raw, server_hostname=LOOPBACK):
            return True
        return False

    def stderr(self) -> str:
        self._stderr.flush()
        return (self.dir / "stderr").read_text()

    def requests(self) -> list[dict[str, Any]]:
        """Every HTTP request that reached the server: method, path, Authorization values
        (whole lines only: one being written as this reads is not there yet)."""
        if not self.headers_log.exists():
            return []
        text = self.headers_log.read_text()
        return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]

    def calls(self) -> list[str]:
        return self.calls_log.read_text().splitlines() if self.calls_log.exists() else []

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._stderr.close()


class HttpGateway:
    """A toolhost.toml naming one HTTP server, ``secure`` at ``url``, whose token is
    ``{ env = "GW_SECURE_TOKEN" }``, and the environment toolhost runs in."""

    def __init__(self, tmp_path: Path, url: str, *, bundle: Path | None,
                 extra_env: dict[str, str] | None = None) -> None:
        self.tmp_path = tmp_path
        self.data_dir = tmp_path / "data"
        self.bundle = bundle
        self.extra_env = dict(extra_env or {})
        #: Only ever in the host's environment: the test file holds no token of its own.
        self.token = secrets.token_urlsafe(24)
        self.config = tmp_path / "toolhost.toml"
        self.config.write_text(f'''
[mcp.servers.secure]
url = "{url}"
token = {{ env = "{TOKEN_VARIABLE}" }}
connect_timeout_s = 60  # a loaded CI machine is slow to answer initialize

[mcp.servers.secure.tools.lookup]
side_effect = "NONE"
risk = "LOW"
idempotency = "READ_ONLY"
''')
        self.config.chmod(0o600)

    def env(self) -> dict[str, str]:
        """What toolhost gets besides the SDK's default environment (HOME, PATH, ...): no
        proxy, certificate or TOOLHOST_* variable of the machine running the tests."""
        env = {"TOOLHOST_CONFIG": str(self.config), "TOOLHOST_DATA_DIR": str(self.data_dir),
               "TOOLHOST_PLUGINS": "toolhost-math", TOKEN_VARIABLE: self.token}
        if self.bundle is not None:
            env["TOOLHOST_CA_BUNDLE"] = str(self.bundle)
        return {**env, **self.extra_env}

    def toolhost(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "toolhost._cli", *args],
                              env={**get_default_environment(), **self.env()},
                              capture_output=True, text=True, timeout=120)

    def rows(self) -> list[dict[str, Any]]:
        return invocation_rows(self.data_dir / "toolhost.sqlite3")


@pytest.fixture
def upstream(ca: trustme.CA, tmp_path: Path) -> Iterator[Upstream]:
    server = Upstream(tmp_path / "upstream", "secure", ca=ca)
    yield server
    server.close()


def unreachable_lines(gw: HttpGateway) -> tuple[str, str]:
    """The ``toolhost check`` and ``toolhost plugins`` lines about the server ``secure``, each
    the only line that names it; and ``toolhost tools`` lists none of its tools."""
    checked = gw.toolhost("check")
    assert checked.returncode == 0, checked.stderr
    lines = [x for x in checked.stdout.splitlines() if "server secure" in x]
    assert len(lines) == 1, checked.stdout
    (check_line,) = lines
    assert check_line.startswith("not ready: mcp gateway: server secure (http) is unreachable: ")
    assert check_line.endswith("; its tools are absent")
    plugins = gw.toolhost("plugins")
    assert plugins.returncode == 0, plugins.stderr
    (plugins_line,) = [x for x in plugins.stdout.splitlines()
                       if x.startswith("  server secure (http): ")]
    assert plugins_line.startswith("  server secure (http): unreachable (")
    tools = gw.toolhost("tools")
    assert tools.returncode == 0, tools.stderr
    assert "math.calculate@" in tools.stdout and "mcp.secure__" not in tools.stdout
    for done in (checked, plugins, tools):
        assert gw.token not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr
    return check_line, plugins_line


# ---------------------------------------------------------------------------- trusted


def test_a_call_reaches_the_https_upstream_with_exactly_the_configured_token(
        upstream: Upstream, bundle: Path, tmp_path: Path) -> None:
    gw = HttpGateway(tmp_path, f"{upstream.origin}/mcp", bundle=bundle)

    async def main() -> None:
        async with served(gw) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert {"mcp.secure__lookup", "mcp.secure__echo"} <= names
            looked = await s.call_tool("mcp.secure__lookup", {"word": "tls"})
            assert not looked.is_error and text_of(looked) == "tls: a word"
            assert meta(looked, "outputTrust") == "EXTERNAL_UNTRUSTED"

    anyio.run(main)
    assert upstream.calls() == ["secure lookup called"]
    (row,) = [r for r in gw.rows() if r["tool_name"] == "mcp.secure__lookup"]
    assert (row["state"], row["output_trust"]) == ("succeeded", "EXTERNAL_UNTRUSTED")
    # Every request of the session (initialize, tools/list, the call, the GET stream, the
    # DELETE at the end) carried one Authorization header: the bearer token from the variable
    # toolhost.toml names, as it is there.
    arrived = upstream.requests()
    assert {(r["method"], r["path"]) for r in arrived} >= {("POST", "/mcp")}
    assert len([r for r in arrived if r["method"] == "POST"]) >= 3
    assert [r["authorization"] for r in arrived] == [[f"Bearer {gw.token}"]] * len(arrived)
    # And the token is nowhere in what the host wrote for its operator.
    assert gw.token not in (tmp_path / "serve.err").read_text()


def test_proxy_variables_in_the_hosts_environment_change_nothing(
        upstream: Upstream, bundle: Path, tmp_path: Path) -> None:
    """The host's own HTTPS_PROXY and friends name a proxy that would never answer: a
    listening socket nobody accepts from. Honoured, it would hold the connection (and the
    server would be unreachable); it is not, so the call works and the proxy saw nothing."""
    with socket.socket() as proxy:
        proxy.bind((LOOPBACK, 0))
        proxy.listen(8)
        proxy.setblocking(False)
        dead = f"http://{LOOPBACK}:{proxy.getsockname()[1]}"
        gw = HttpGateway(tmp_path, f"{upstream.origin}/mcp", bundle=bundle,
                         extra_env=dict.fromkeys(PROXY_VARIABLES, dead))

        async def main() -> None:
            async with served(gw) as s:
                names = {t.name for t in (await s.list_tools()).tools}
                assert "mcp.secure__lookup" in names, (tmp_path / "serve.err").read_text()
                looked = await s.call_tool("mcp.secure__lookup", {"word": "direct"})
                assert not looked.is_error and text_of(looked) == "direct: a word"
                assert meta(looked, "outputTrust") == "EXTERNAL_UNTRUSTED"

        anyio.run(main)
        with pytest.raises(BlockingIOError):  # no connection ever reached the "proxy"
            proxy.accept()
    assert upstream.calls() == ["secure lookup called"]
    arrived = upstream.requests()
    assert arrived and all(r["authorization"] == [f"Bearer {gw.token}"] for r in arrived)


# ---------------------------------------------------------------------------- not trusted


@pytest.mark.parametrize("trust", ["no_bundle", "another_ca", "ca_only_in_ssl_cert_file"])
def test_an_untrusted_certificate_leaves_the_server_unreachable_and_gets_no_token(
        upstream: Upstream, bundle: Path, tmp_path: Path, trust: str) -> None:
    """Verification fails in the handshake, before any HTTP request: the upstream never sees
    one, so never the token. SSL_CERT_FILE naming the right CA does not count either: the
    host's trust roots are its defaults and TOOLHOST_CA_BUNDLE, never the environment's."""
    other = tmp_path / "other-roots.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    chosen, extra = {
        "no_bundle": (None, {}),
        "another_ca": (other, {}),
        "ca_only_in_ssl_cert_file": (None, {"SSL_CERT_FILE": str(bundle)}),
    }[trust]
    gw = HttpGateway(tmp_path, f"{upstream.origin}/mcp", bundle=chosen, extra_env=extra)
    check_line, plugins_line = unreachable_lines(gw)
    assert "ConnectError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed" in check_line
    assert "(ConnectError: [SSL: CERTIFICATE_VERIFY_FAILED]" in plugins_line
    assert upstream.requests() == [] and upstream.calls() == []
    assert not upstream.headers_log.exists()

    # The same server, the same configuration, with the CA as TOOLHOST_CA_BUNDLE: connected,
    # and the token arrives. So the silence above was the refused handshake's.
    gw.bundle = bundle
    plugins = gw.toolhost("plugins")
    assert "  server secure (http): connected, tools: " in plugins.stdout, plugins.stdout
    arrived = upstream.requests()
    assert arrived and all(r["authorization"] == [f"Bearer {gw.token}"] for r in arrived)


# ---------------------------------------------------------------------------- redirects


@pytest.mark.parametrize("target_scheme", ["https", "http"])
def test_a_redirect_off_the_endpoints_origin_is_not_followed(
        ca: trustme.CA, bundle: Path, tmp_path: Path, target_scheme: str) -> None:
    """The configured URL answers 307 to a full MCP server on another loopback port (over
    HTTPS, or plain HTTP: a downgrade too). The redirect is not followed: the server is
    unreachable with a one-line problem naming the location, and the target got nothing."""
    target = Upstream(tmp_path / "target", "target", ca=ca if target_scheme == "https" else None)
    try:
        moved = Upstream(tmp_path / "moved", "secure", ca=ca,
                         redirect_to=f"{target.origin}/mcp")
        try:
            gw = HttpGateway(tmp_path, f"{moved.origin}/moved", bundle=bundle)
            check_line, plugins_line = unreachable_lines(gw)
            assert f"Redirect to {target.origin}/mcp not followed" in check_line
            assert f"Redirect to {target.origin}/mcp not followed" in plugins_line
            if target_scheme == "http":  # the SDK's several lines about it, as one
                assert "downgrade this HTTPS endpoint to plain HTTP. The server is likely" \
                    in check_line
            # The redirect target never received a request, so never the token.
            assert target.requests() == [] and target.calls() == []
            # The configured endpoint did (it is the server the token is for): only /moved.
            arrived = moved.requests()
            assert arrived and {(r["method"], r["path"]) for r in arrived} == {("POST", "/moved")}
            assert all(r["authorization"] == [f"Bearer {gw.token}"] for r in arrived)
            assert moved.calls() == []
        finally:
            moved.close()
    finally:
        target.close()


def test_a_redirect_within_the_endpoints_origin_is_followed_and_the_token_stays_there(
        ca: trustme.CA, bundle: Path, tmp_path: Path) -> None:
    """What docs/gateway.md says ("no redirect followed off the endpoint's origin"): a 307 to
    another path of the same scheme, host and port is followed (by the SDK's transport, which
    does not consult the client's ``follow_redirects``), so the token reaches that origin
    only."""
    moved = Upstream(tmp_path / "moved", "secure", ca=ca, redirect_to="/mcp")
    try:
        gw = HttpGateway(tmp_path, f"{moved.origin}/moved", bundle=bundle)
        plugins = gw.toolhost("plugins")
        assert "  server secure (http): connected, tools: " in plugins.stdout, plugins.stdout
        arrived = moved.requests()
        assert ("POST", "/moved") in {(r["method"], r["path"]) for r in arrived}
        assert ("POST", "/mcp") in {(r["method"], r["path"]) for r in arrived}
        assert {r["path"] for r in arrived} == {"/moved", "/mcp"}
        assert all(r["authorization"] == [f"Bearer {gw.token}"] for r in arrived)
    finally:
        moved.close()
