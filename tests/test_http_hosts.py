"""Two `toolhost serve --http` hosts on one PostgreSQL database (and one S3 bucket) behind a
round-robin TCP balancer that pins nothing (issue #25): a session's requests reach either host
and are served by the one it lives on; a 2026-07-28 client's sessionless run has one home
host; a stopped host's sessions end with the spec's 404 and its runs move on.

Real servers (subprocesses), the SDK's own clients, a client that opens a connection per
request (so consecutive requests of one session go to different hosts)."""

from __future__ import annotations

import asyncio
import http.server
import signal
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")
pytest.importorskip("jwt", reason="the toolhost-core[oauth] extra (PyJWT) is not installed")

from installed import install_fake_plugin
from journeys.balancer import Balancer, round_robin
from journeys.journey_support import (
    Deployment,
    Person,
    artifact_uri,
    ok,
    read_resource_bytes,
    refusal,
    run,
    write_tokens,
)
from pg_server import pg_database, pg_server
from s3_server import (  # noqa: F401 - the fixtures, asked for by name
    S3Server,
    s3_bucket_fixture,
    s3_server_fixture,
)

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name

PLUGINS = "toolhost-workspace,toolhost-artifact,toolhost-demo,fake-mcp"
FIXTURE = Path(__file__).with_name("mcp_fixture_plugin.py")
ANA, BEN = "ana-token-3a91", "ben-token-77c0"
SCOPES = ["workspace.read", "workspace.write", "artifact.write", "demo.write", "fxw.write"]
NOTE = "Meeting moved to Thursday.\n"


@pytest.fixture
def deployment(tmp_path: Path, pg_database: str, s3_server: S3Server,
               s3_bucket: str) -> Deployment:
    tokens = write_tokens(tmp_path / "tokens.toml", (ANA, "ana", SCOPES), (BEN, "ben", SCOPES))
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-mcp", "fake_mcp", FIXTURE.read_text())
    return Deployment(tmp_path, plugins=PLUGINS, TOOLHOST_DATABASE_URL=pg_database,
                      TOOLHOST_HTTP_TOKENS_FILE=str(tokens), PYTHONPATH=str(site),
                      FXW_LOG=str(tmp_path / "fxw.log"), **s3_server.env(s3_bucket))


@asynccontextmanager
async def two_hosts(deployment: Deployment) -> AsyncIterator[Balancer]:
    """Two hosts of the deployment (data directories of their own), behind a balancer."""
    async with deployment.http_server() as first, deployment.http_server(
            TOOLHOST_DATA_DIR=str(deployment.tmp_path / "data-b")) as second:
        with round_robin([_address(first), _address(second)]) as balancer:
            yield balancer


def _address(url: str) -> tuple[str, int]:
    authority = url.split("/")[2]
    host, _, port = authority.rpartition(":")
    return host, int(port)


def test_a_session_works_whichever_host_each_request_reaches(deployment: Deployment) -> None:
    async def journey() -> None:
        async with two_hosts(deployment) as balancer, deployment.session(
                "http", url=balancer.url(), token=ANA, person=Person(),
                keepalive=False) as client:
            ok(await client.call_tool("workspace.write_text",
                                      {"path": "notes/plan.md", "content": "first draft\n"}))
            for _ in range(3):  # every read, on either host, sees the write
                read = ok(await client.call_tool("workspace.read_text",
                                                 {"path": "notes/plan.md"}))
                assert read["content"] == "first draft\n"
            assert min(balancer.connections) >= 2, balancer.connections

    run(journey)


def test_a_2026_client_has_one_home_host_for_its_run(deployment: Deployment) -> None:
    async def journey() -> None:
        async with two_hosts(deployment) as balancer, deployment.modern_client(
                "http", Person(), url=balancer.url(), token=ANA, keepalive=False) as client:
            written = await client.call_tool("workspace.write_text",
                                             {"path": "todo.md", "content": "milk\n"})
            assert not written.is_error, written
            for _ in range(3):
                read = await client.call_tool("workspace.read_text", {"path": "todo.md"})
                assert not read.is_error, read
                assert read.structured_content["content"] == "milk\n"
            assert min(balancer.connections) >= 2, balancer.connections

    run(journey)


def test_two_people_through_two_hosts_never_reach_each_others_things(
        deployment: Deployment) -> None:
    async def journey() -> None:
        async with two_hosts(deployment) as balancer:
            url = balancer.url()
            async with deployment.session("http", url=url, token=ANA, person=Person(),
                                          keepalive=False) as anas, \
                    deployment.session("http", url=url, token=BEN, person=Person(),
                                       keepalive=False) as bens:
                ok(await anas.call_tool("workspace.write_text",
                                        {"path": "mine.txt", "content": NOTE}))
                exported = ok(await anas.call_tool("artifact.export",
                                                   {"content": NOTE, "name": "note.md"}))
                uri = artifact_uri(exported["id"])
                for _ in range(2):  # on either host
                    content, _ = await read_resource_bytes(anas, uri)
                    assert content == NOTE.encode()
                    theirs = await refusal(bens, uri)
                    assert exported["id"] not in theirs.error.message
                    missing = await bens.call_tool("workspace.read_text", {"path": "mine.txt"})
                    assert missing.is_error

    run(journey)


def test_a_call_approved_through_either_host_runs_once(deployment: Deployment) -> None:
    person = Person()

    async def journey() -> None:
        async with two_hosts(deployment) as balancer, deployment.session(
                "http", url=balancer.url(), token=ANA, person=person,
                keepalive=False) as client:
            for n in range(4):
                done = ok(await client.call_tool("demo.external_write", {
                    "destination": f"crm://note/{n}", "content": NOTE}))
                assert done["recorded"] is True

    run(journey)
    assert person.approved_tools() == ["demo.external_write"] * 4
    rows = [r for r in _rows(deployment) if r[0] == "demo.external_write"]
    assert sorted(rows) == [("demo.external_write", "succeeded")] * 4


def _rows(deployment: Deployment) -> list[tuple[str, str]]:
    import psycopg

    with psycopg.connect(deployment.settings["TOOLHOST_DATABASE_URL"]) as conn:
        return [(str(t), str(s)) for t, s in conn.execute(
            "SELECT tool_name, state FROM tool_invocations")]


def test_a_stopped_hosts_sessions_end_and_its_runs_move_on(deployment: Deployment) -> None:
    async def journey() -> None:
        async with two_hosts(deployment) as balancer:
            url = balancer.url()
            async with deployment.modern_client("http", Person(), url=url, token=BEN,
                                                keepalive=False) as modern:
                written = await modern.call_tool("workspace.write_text",
                                                 {"path": "a.txt", "content": "a"})
                assert not written.is_error, written
                home = _home_of(deployment, "ben")
                balancer.route_next_to(home)  # Ana's session opens on Ben's run's home
                async with deployment.session("http", url=url, token=ANA, person=Person(),
                                              keepalive=False) as old:
                    ok(await old.call_tool("workspace.write_text",
                                           {"path": "a.txt", "content": "a"}))
                    stopped = deployment.servers[home]
                    stopped.send_signal(signal.SIGTERM)
                    assert await anyio.to_thread.run_sync(stopped.wait, 30) == 0
                    # The session lived on the stopped host: the spec's 404 (the client's
                    # call fails), and a new session works.
                    with pytest.raises(MCPError, match="Session not found"):
                        await old.call_tool("workspace.read_text", {"path": "a.txt"})
                # The sessionless run moves to the host left (its files stayed behind).
                moved = await modern.call_tool("workspace.read_text", {"path": "a.txt"})
                assert moved.is_error
                again = await modern.call_tool("workspace.write_text",
                                               {"path": "b.txt", "content": "b"})
                assert not again.is_error, again
                assert _home_of(deployment, "ben") == 1 - home
            async with deployment.session("http", url=url, token=ANA, person=Person(),
                                          keepalive=False) as fresh:
                ok(await fresh.call_tool("workspace.write_text",
                                         {"path": "c.txt", "content": "c"}))

    run(journey)


def _home_of(deployment: Deployment, principal: str) -> int:
    """Which of the deployment's servers (0 or 1) ``principal``'s sessionless run lives on."""
    import psycopg

    with psycopg.connect(deployment.settings["TOOLHOST_DATABASE_URL"]) as conn:
        (url,) = conn.execute(
            "SELECT h.url FROM toolhost_routes r JOIN toolhost_hosts h USING (host_id) "
            "WHERE convert_from(r.key, 'UTF8') LIKE %s", (f"run\x1f{principal}\x1f%",)
        ).fetchone()
    ports = [s.args[s.args.index("--http") + 1].rpartition(":")[2]
             for s in deployment.servers]
    return ports.index(url.split("/")[2].rpartition(":")[2])


def test_a_stopping_host_lets_the_calls_it_forwards_finish(deployment: Deployment) -> None:
    # Regression: the drain waited for the calls running on the stopping host only, so a
    # call it was forwarding to a healthy host was cut when uvicorn shut down.
    async def journey() -> None:
        async with two_hosts(deployment) as balancer:
            balancer.route_next_to(1)  # the session opens on the second host
            async with deployment.session("http", url=balancer.url(), token=ANA,
                                          keepalive=False, TOOLHOST_HTTP_DRAIN_S="30") as client:
                await client.list_tools()
                balancer.route_next_to(0)  # the call reaches the first, which forwards it
                slow = asyncio.ensure_future(client.call_tool("fxw.slow", {"seconds": 4}))
                await _slow_started(deployment.tmp_path)
                stopping = deployment.servers[0]
                stopping.send_signal(signal.SIGTERM)
                assert ok(await slow)
                # It stops on its own once the call it forwarded is answered (a second
                # SIGTERM, the harness's, would mean "now").
                assert await anyio.to_thread.run_sync(stopping.wait, 30) == 0

    run(journey)
    (row,) = [r for r in deployment.invocations() if r["tool_name"] == "fxw.slow"]
    assert row["state"] == "succeeded"


async def _slow_started(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        while not (tmp_path / "fxw.log").exists():
            await anyio.sleep(0.05)


def test_a_request_target_that_is_no_path_is_never_forwarded(deployment: Deployment) -> None:
    # Regression (SSRF): "GET @127.0.0.1:PORT/x" for a session of the other host made the
    # forwarding host fetch http://host:port@127.0.0.1:PORT/x and hand back the answer.
    hits: list[str] = []

    class Internal(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"INTERNAL-SECRET")

        def log_message(self, *args: Any) -> None:
            pass

    internal = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Internal)
    threading.Thread(target=internal.serve_forever, daemon=True).start()

    async def journey() -> None:
        async with deployment.http_server() as first, deployment.http_server(
                TOOLHOST_DATA_DIR=str(deployment.tmp_path / "data-b")) as second:
            opened = await anyio.to_thread.run_sync(_initialize, second)
            session = opened.headers["mcp-session-id"]
            host, port = _address(first)
            answer = await anyio.to_thread.run_sync(_raw, host, port, (
                f"GET @127.0.0.1:{internal.server_address[1]}/secret HTTP/1.1\r\n"
                f"Host: {host}:{port}\r\nAuthorization: Bearer {ANA}\r\n"
                f"mcp-session-id: {session}\r\nAccept: text/event-stream\r\n"
                "Connection: close\r\n\r\n"))
            assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
            assert b"INTERNAL-SECRET" not in answer

    try:
        run(journey)
    finally:
        internal.shutdown()
        internal.server_close()
    assert hits == []


def _initialize(url: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}
    answer = httpx.post(url, json=body, timeout=30, headers={
        "Authorization": f"Bearer {ANA}", "Accept": "application/json, text/event-stream"})
    assert answer.status_code == 200, answer.text
    return answer


def _raw(host: str, port: int, request: str) -> bytes:
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(request.encode("latin-1"))
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_an_idle_sessions_route_leaves_the_table_with_it(deployment: Deployment) -> None:
    # Issue #26 item 1: a session the SDK ends for idleness (no DELETE) ends its run, and its
    # row in the routing table goes too, so neither grows with sessions clients abandon.
    from journeys.journey_support import _pg_rows

    database = deployment.settings["TOOLHOST_DATABASE_URL"]

    def sessions_routed() -> list[str]:
        rows = _pg_rows(database, "SELECT key FROM toolhost_routes")
        return [str(r["key"]) for r in rows if str(r["key"]).startswith("session")]

    async def journey() -> None:
        async with deployment.http_server(TOOLHOST_HTTP_SESSION_IDLE_S="1") as url, \
                httpx.AsyncClient(timeout=30) as client:
            opened = await client.post(url, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "0"}}},
                headers={"Authorization": f"Bearer {ANA}",
                         "Accept": "application/json, text/event-stream"})
            assert opened.status_code == 200
            assert len(sessions_routed()) == 1
            with anyio.fail_after(15):
                while sessions_routed():
                    await asyncio.sleep(0.1)

    run(journey)
