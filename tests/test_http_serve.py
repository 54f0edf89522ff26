"""`toolhost serve --http` for many people (issue #25): every request authenticated (a static
token file, or an OAuth 2.1 issuer's JWTs), Host and Origin checked for every bind, bodies and
concurrent calls bounded, health routes open, each person's calls and files their own.

Real servers (subprocesses), the SDK's own client for what a person does, raw HTTP (httpx) for
what an attacker sends. No refused request runs a tool or writes a row."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import mcp
import pytest
from installed import install_fake_plugin

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")
pytest.importorskip("jwt", reason="the toolhost-core[oauth] extra (PyJWT) is not installed")

from journeys.fake_services import oauth_issuer
from journeys.journey_support import (
    Deployment,
    assert_no_traceback,
    free_port,
    meta,
    ok,
    one_link,
    refusal,
    run,
    write_tokens,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

FIXTURE = Path(__file__).with_name("mcp_fixture_plugin.py")
PLUGINS = "toolhost-math,toolhost-workspace,toolhost-artifact,fake-mcp"
ADA, BOB = "ada-token-7f3e", "bob-token-91c2"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


SCOPES = ["workspace.read", "workspace.write", "artifact.write", "fxw.write"]


def deployment(tmp_path: Path, **settings: str) -> Deployment:
    site = tmp_path / "site"
    install_fake_plugin(site, "fake-mcp", "fake_mcp", FIXTURE.read_text())
    tokens = write_tokens(tmp_path / "tokens.toml", (ADA, "ada", SCOPES), (BOB, "bob", SCOPES))
    return Deployment(tmp_path, plugins=PLUGINS, PYTHONPATH=str(site),
                      FXW_LOG=str(tmp_path / "fxw.log"),
                      TOOLHOST_HTTP_TOKENS_FILE=str(tokens), **settings)


async def slow_started(tmp_path: Path) -> None:
    """Until fxw.slow's body has begun (it writes to FXW_LOG first)."""
    deadline = time.monotonic() + 30
    while not (tmp_path / "fxw.log").exists():
        assert time.monotonic() < deadline, "fxw.slow never started"
        await asyncio.sleep(0.05)


def post(url: str, frame: Any = INITIALIZE, *, token: str | None = None,
         **headers: str) -> httpx.Response:
    sent = {**MCP_HEADERS, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    body = frame if isinstance(frame, bytes) else json.dumps(frame).encode()
    return httpx.post(url, content=body, headers=sent, timeout=30)


def test_each_person_is_their_token_and_nobody_reads_anothers(tmp_path: Path) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, token=ADA) as ada:
            assert ok(await ada.call_tool("math.calculate", {"expression": "17 * 23"}))
            ok(await ada.call_tool("workspace.write_text",
                                   {"path": "mine.txt", "content": "ada's"}))
            exported = await ada.call_tool("artifact.export", {"path": "mine.txt"})
            link = one_link(exported)
            async with people.session("http", url=url, token=BOB) as bob:
                # Bob's run is not Ada's: her file, her workspace, her rows are not his.
                refused = await refusal(bob, str(link.uri))
                assert refused.error.code == -32002
                read = await bob.call_tool("workspace.read_text", {"path": "mine.txt"})
                assert meta(read, "reasonCode") == "tool.not_found.no_such_path"

    run(journey)
    principals = {(r["tool_name"], r["principal_id"]) for r in people.invocations()}
    assert principals == {("math.calculate", "ada"), ("workspace.write_text", "ada"),
                          ("artifact.export", "ada"), ("workspace.read_text", "bob")}


def test_a_session_answers_only_the_token_that_opened_it(tmp_path: Path) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            opened = post(url, token=ADA)
            assert opened.status_code == 200
            session = opened.headers["mcp-session-id"]
            hijack = post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                          token=BOB, **{"mcp-session-id": session,
                                        "mcp-protocol-version": "2025-11-25"})
            assert hijack.status_code == 404

    run(journey)


@pytest.mark.parametrize(("token", "challenge"), [
    (None, 'Bearer realm="toolhost"'),
    ("not-a-token-anyone-has", 'Bearer realm="toolhost", error="invalid_token"'),
    ("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZGEifQ.", 'Bearer realm="toolhost", error="invalid_token"'),
])
def test_a_request_without_a_valid_token_is_401_and_runs_nothing(
    tmp_path: Path, token: str | None, challenge: str,
) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            answer = post(url, token=token)
            assert (answer.status_code, answer.headers["www-authenticate"]) == (401, challenge)
            call = post(url, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                              "params": {"name": "fxw.external_write",
                                         "arguments": {"destination": "x"}}}, token=token)
            assert call.status_code == 401

    run(journey)
    assert not people.database().exists() or people.invocations() == []
    assert not (tmp_path / "fxw.log").exists()


def test_a_revoked_token_is_refused_from_the_next_request(tmp_path: Path) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            assert post(url, token=BOB).status_code == 200
            write_tokens(tmp_path / "tokens.toml", (ADA, "ada", SCOPES))  # bob revoked
            assert post(url, token=BOB).status_code == 401
            assert post(url, token=ADA).status_code == 200

    run(journey)


def test_health_routes_answer_without_a_token_and_say_nothing_more(tmp_path: Path) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            health = httpx.get(f"{base}/healthz")
            ready = httpx.get(f"{base}/readyz")
            assert (health.status_code, health.text) == (200, "ok\n")
            assert (ready.status_code, ready.text) == (200, "ready\n")
            assert httpx.get(f"{base}/.well-known/oauth-protected-resource").status_code == 404

    run(journey)


@pytest.mark.parametrize(("headers", "status"), [
    ({"Origin": "https://attacker.example"}, 403),
    ({"Host": "attacker.example"}, 421),
])
def test_a_forbidden_origin_or_host_is_refused_whatever_the_token(
    tmp_path: Path, headers: dict[str, str], status: int,
) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            assert post(url, token=ADA, **headers).status_code == status

    run(journey)


def test_an_oversized_body_is_413_and_never_read_whole(tmp_path: Path) -> None:
    people = deployment(tmp_path, TOOLHOST_HTTP_MAX_BODY_BYTES="4096")

    async def journey() -> None:
        async with people.http_server() as url:
            big = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "math.calculate", "arguments": {"expression": "1" * 5000}}}
            assert post(url, big, token=ADA).status_code == 413

    run(journey)
    assert not people.database().exists() or people.invocations() == []


def test_oversized_request_headers_are_400_and_never_held(tmp_path: Path) -> None:
    """A megabyte of one header, sent before any token is checked, is refused at 16 KiB
    (h11's bound) whatever HTTP parser is installed: uvicorn's "auto" would pick httptools,
    which kept all of it in memory, unanswered (D326). The host test session installs
    httptools so this would catch that."""
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            port = int(url.split(":")[2].split("/")[0])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            with contextlib.suppress(ConnectionError):
                for _ in range(16):  # 1 MiB, until the server closes the connection
                    writer.write(b"a" * 65536)
                    await writer.drain()
            answer = await asyncio.wait_for(reader.read(64), timeout=10)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 400 "), answer

    run(journey)
    assert not people.database().exists() or people.invocations() == []


def test_a_principal_over_its_concurrent_calls_gets_429_before_any_row(tmp_path: Path) -> None:
    people = deployment(tmp_path, TOOLHOST_HTTP_MAX_CALLS="1")

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, token=ADA) as ada:
            slow = asyncio.ensure_future(ada.call_tool("fxw.slow", {"seconds": 3}))
            await slow_started(tmp_path)
            busy = await asyncio.to_thread(post, url, {
                "jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "math.calculate", "arguments": {"expression": "1"}}},
                token=ADA)
            assert (busy.status_code, busy.headers["retry-after"]) == (429, "1")
            assert busy.json()["error"]["code"] == -32000
            # Another person is not held up by Ada's calls.
            async with people.session("http", url=url, token=BOB) as bob:
                assert ok(await bob.call_tool("math.calculate", {"expression": "2"}))
            assert ok(await slow)

    run(journey)
    assert [r["principal_id"] for r in people.invocations()
            if r["tool_name"] == "math.calculate"] == ["bob"]


def test_an_oauth_issuers_jwt_is_its_subject_and_every_bad_one_is_401(tmp_path: Path) -> None:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    with oauth_issuer(tmp_path) as issuer:
        port = free_port()
        audience = f"http://127.0.0.1:{port}/mcp"
        people = Deployment(tmp_path, plugins="toolhost-math", **issuer.settings(audience))
        other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        now = int(time.time())
        bad = {
            "malformed": "a.b.c",
            "another key's signature": issuer.token(audience, key=other_key),
            "alg none": jwt.encode({"iss": issuer.url, "aud": audience, "sub": "ada",
                                    "exp": now + 600}, None, algorithm="none"),
            "expired": issuer.token(audience, exp=now - 120),
            "not yet valid": issuer.token(audience, nbf=now + 120),
            "wrong issuer": issuer.token(audience, iss="https://evil.example"),
            "wrong audience": issuer.token(audience, aud="https://elsewhere.example/mcp"),
        }

        async def journey() -> None:
            async with people.http_server(port=port) as url:
                assert url == audience
                good = issuer.token(audience, subject="ada@example.org")
                async with people.session("http", url=url, token=good) as ada:
                    assert ok(await ada.call_tool("math.calculate", {"expression": "6 * 7"}))
                metadata = httpx.get(
                    f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp").json()
                assert metadata["resource"] == audience
                assert metadata["authorization_servers"] == [issuer.url]
                for why, token in bad.items():
                    answer = post(url, token=token)
                    assert answer.status_code == 401, why
                    assert answer.headers["www-authenticate"] == (
                        'Bearer realm="toolhost", error="invalid_token", resource_metadata='
                        f'"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"'), why

        run(journey)
    assert [r["principal_id"] for r in people.invocations()] == ["ada@example.org"]


def test_a_server_on_127_0_0_2_refuses_a_rebinding_page(tmp_path: Path) -> None:
    # The SDK turns its own Host/Origin checks on for three exact spellings of loopback only;
    # the front door checks every bind (issue #26, item 2).
    people = Deployment(tmp_path, plugins="toolhost-math")
    port = free_port()

    async def journey() -> None:
        async with people.http_server(bind="127.0.0.2", port=port,
                                      TOOLHOST_HTTP_ALLOWED_HOSTS=f"127.0.0.2:{port}") as url:
            rebinding = post(url, Host=f"attacker.example:{port}",
                             Origin=f"http://attacker.example:{port}")
            assert rebinding.status_code == 421
            page = post(url, Origin=f"http://attacker.example:{port}")
            assert page.status_code == 403
            assert post(url).status_code == 200  # a client, not a browser page

    run(journey)


@pytest.mark.parametrize("bind", ["0.0.0.0", "192.0.2.1"])
def test_any_address_but_loopback_needs_authentication(tmp_path: Path, bind: str) -> None:
    people = Deployment(tmp_path, plugins="toolhost-math")
    result = subprocess.run(
        [sys.executable, "-m", "toolhost._cli", "serve", "--http", f"{bind}:8765"],
        env=people.env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"toolhost: --http binds a loopback address only (127.0.0.1, ::1 or localhost), not "
        f"{bind!r}, unless requests are authenticated: set TOOLHOST_HTTP_TOKENS_FILE or "
        "TOOLHOST_HTTP_ISSUER"]
    assert_no_traceback(result.stderr)


def test_one_operator_workspace_is_refused_when_people_are_told_apart(tmp_path: Path) -> None:
    # Regression (D455): with a token file, TOOLHOST_MCP_WORKSPACE gave every person's
    # sessions the one directory: bob's workspace.read_text read what ada had just written.
    shared = tmp_path / "project"
    shared.mkdir()
    people = deployment(tmp_path, TOOLHOST_MCP_WORKSPACE=str(shared))
    result = subprocess.run(
        [sys.executable, "-m", "toolhost._cli", "serve", "--http", f"127.0.0.1:{free_port()}"],
        env=people.env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "toolhost: TOOLHOST_MCP_WORKSPACE gives every session one directory, so with a token "
        "file or an issuer each person would read and write the others' files: unset it (each "
        "run then gets a workspace of its own), or serve that directory to one person on stdio"]
    assert_no_traceback(result.stderr)
    assert list(shared.iterdir()) == []


def test_with_a_token_file_the_server_listens_on_every_address(tmp_path: Path) -> None:
    people = deployment(tmp_path)
    port = free_port()

    async def journey() -> None:
        async with people.http_server(
                bind="0.0.0.0", port=port,
                TOOLHOST_HTTP_ALLOWED_HOSTS=f"127.0.0.1:{port}") as url:
            loopback = url.replace("0.0.0.0", "127.0.0.1")
            assert post(loopback, token=ADA).status_code == 200
            assert post(loopback).status_code == 401

    run(journey)


def test_sigterm_lets_a_call_in_flight_finish(tmp_path: Path) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, token=ADA) as ada:
            # The client checks a result against the tool's output schema: listed before,
            # it asks nothing of a server that is stopping.
            await ada.list_tools()
            slow = asyncio.ensure_future(ada.call_tool("fxw.slow", {"seconds": 2}))
            await slow_started(tmp_path)
            people.servers[-1].terminate()  # SIGTERM: the call in flight finishes
            await asyncio.sleep(0.3)
            refused = await asyncio.to_thread(post, url, token=ADA)  # a new session: refused
            assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
            assert ok(await slow)

    run(journey)
    (row,) = [r for r in people.invocations() if r["tool_name"] == "fxw.slow"]
    assert row["state"] == "succeeded"


def test_a_call_past_the_drain_time_is_cancelled_and_recorded(tmp_path: Path) -> None:
    people = deployment(tmp_path, TOOLHOST_HTTP_DRAIN_S="1")

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, token=ADA) as ada:
            await ada.list_tools()
            slow = asyncio.ensure_future(ada.call_tool("fxw.slow", {"seconds": 30}))
            await slow_started(tmp_path)
            people.servers[-1].terminate()
            with contextlib.suppress(Exception):  # the stream ends with the server
                await slow

    run(journey)
    (row,) = [r for r in people.invocations() if r["tool_name"] == "fxw.slow"]
    assert (row["state"], row["reason_code"]) == ("failed", "tool.cancelled.run_cancelled")


def _readyz(*, ready: bool, draining: bool = False) -> httpx.Response:
    """``GET /readyz`` of a front door whose stores answer ``ready``, stopping or not."""
    from toolhost._mcp.http_front import FrontDoor, HttpPolicy

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app is never reached")

    door = FrontDoor(app, HttpPolicy(allowed_hosts=("testserver",), allowed_origins=(),
                                     max_body_bytes=10, max_calls=1), ready=lambda: ready,
                     monotonic=time.monotonic)
    door.draining = draining

    async def ask() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=door),
                                     base_url="http://testserver") as client:
            return await client.get("/readyz")

    return asyncio.run(ask())


def test_readiness_says_not_ready_and_nothing_more_when_a_store_does_not_answer() -> None:
    answer = _readyz(ready=False)
    assert (answer.status_code, answer.text) == (503, "not ready\n")


def test_each_persons_pending_calls_are_theirs(tmp_path: Path) -> None:
    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")
    arguments = {"destination": "ops"}

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, token=ADA) as ada, \
                people.session("http", url=url, token=BOB) as bob:
            ada_paused = await ada.call_tool("fxw.external_write", arguments)
            bob_paused = await bob.call_tool("fxw.external_write", arguments)
            ada_id = meta(ada_paused, "invocationId")
            assert meta(bob_paused, "invocationId") != ada_id
            listed = await people.operator("pending", "--principal", "ada", "--json")
            assert [p["id"] for p in json.loads(listed.stdout)] == [ada_id]
            assert (await people.operator("approve", ada_id)).returncode == 0
            # The same arguments in Bob's session are Bob's own pending call, not Ada's result.
            again = await bob.call_tool("fxw.external_write", arguments)
            assert meta(again, "status") == "awaiting_approval"
            assert meta(again, "invocationId") == meta(bob_paused, "invocationId")
            done = await ada.call_tool("fxw.external_write", arguments)
            assert meta(done, "invocationId") == ada_id and not done.is_error

    run(journey)
    assert (tmp_path / "fxw.log").read_text().splitlines() == ["wrote ops"]


# ---------------------------------------------------------------------------- review fixes


READ_ONLY = "ada-read-only-5d1a"


def test_a_read_only_token_never_borrows_a_full_tokens_run(tmp_path: Path) -> None:
    people = deployment(tmp_path)
    write_tokens(tmp_path / "tokens.toml", (ADA, "ada", SCOPES),
                 (READ_ONLY, "ada", ["workspace.read"]))
    write = {"path": "x.txt", "content": "x"}

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, token=ADA) as full:
            ok(await full.call_tool("workspace.write_text", write))
            async with people.session("http", url=url, token=READ_ONLY) as reader:
                refused = await reader.call_tool("workspace.write_text", write)
                assert meta(refused, "reasonCode") == "tool.permission_denied.missing_scope"
            # The sessionless (2026-07-28) path: one run per principal and kind of token.
            async with create_mcp_http_client(
                    headers={"Authorization": f"Bearer {READ_ONLY}"}) as http, \
                    mcp.Client(streamable_http_client(url, http_client=http)) as modern:
                refused = await modern.call_tool("workspace.write_text", write)
                assert (refused.meta or {})["toolhost/reasonCode"] == (
                    "tool.permission_denied.missing_scope")

    run(journey)
    assert [(r["state"], json.loads(r["scopes"])) for r in people.invocations()] == [
        ("succeeded", sorted(SCOPES)), ("failed", ["workspace.read"]),
        ("failed", ["workspace.read"])]


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-32"])
def test_a_body_the_door_cannot_read_is_refused_not_handed_on(
    tmp_path: Path, encoding: str,
) -> None:
    people = deployment(tmp_path)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "fxw.external_write", "arguments": {"destination": "x"}}}

    async def journey() -> None:
        async with people.http_server() as url:
            answer = post(url, json.dumps(call).encode(encoding), token=ADA,
                          **{"mcp-protocol-version": "2026-07-28"})
            assert answer.status_code == 400
            assert answer.json()["error"]["code"] == -32700

    run(journey)
    assert not (tmp_path / "fxw.log").exists()


def test_a_hung_body_a_call_gave_up_on_still_counts_against_its_principal(
    tmp_path: Path,
) -> None:
    people = deployment(tmp_path, TOOLHOST_HTTP_MAX_CALLS="1")

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, token=ADA) as ada:
            await ada.list_tools()
            with contextlib.suppress(Exception):  # the client gives up; the body runs on
                await ada.call_tool("fxw.slow", {"seconds": 4}, read_timeout_seconds=0.5)
            await slow_started(tmp_path)
            await asyncio.sleep(1)  # the call has recorded its cancellation by now
            busy = await asyncio.to_thread(post, url, {
                "jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "math.calculate", "arguments": {"expression": "1"}}},
                token=ADA)
            assert busy.status_code == 429
            async with people.session("http", url=url, token=BOB) as bob:
                assert ok(await bob.call_tool("math.calculate", {"expression": "2"}))

    run(journey)


def test_readiness_is_not_ready_while_draining() -> None:
    answer = _readyz(ready=True, draining=True)
    assert (answer.status_code, answer.text) == (503, "not ready\n")


def test_a_persons_third_largest_body_at_once_is_429_and_runs_nothing(tmp_path: Path) -> None:
    """Two calls whose bodies are as large as the server takes run (fxw.slow), and a third
    that large meanwhile is refused, whatever it asks, before it is parsed (D333)."""
    largest = 64 * 1024
    people = deployment(tmp_path, TOOLHOST_HTTP_MAX_BODY_BYTES=str(largest))

    def body(number: int, seconds: int) -> bytes:
        # Whitespace pads the JSON to the largest body without changing the call.
        return (json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {
            "name": "fxw.slow", "arguments": {"seconds": seconds}}})).ljust(largest).encode()

    async def journey() -> None:
        async with people.http_server() as url, httpx.AsyncClient(timeout=30) as client:
            opened = await client.post(url, json=INITIALIZE, headers={
                **MCP_HEADERS, "Authorization": f"Bearer {ADA}"})
            session = {**MCP_HEADERS, "Authorization": f"Bearer {ADA}",
                       "mcp-session-id": opened.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25"}
            await client.post(url, headers=session, json={
                "jsonrpc": "2.0", "method": "notifications/initialized"})
            slow = [asyncio.ensure_future(client.post(url, headers=session, content=body(n, 2)))
                    for n in (2, 3)]
            await slow_started(tmp_path)
            while len((tmp_path / "fxw.log").read_text().splitlines()) < 2:
                await asyncio.sleep(0.05)
            refused = await client.post(url, headers=session, content=body(4, 0))
            assert (refused.status_code, refused.headers["retry-after"], refused.text) == (
                429, "1", "Too much request data in flight; retry in a moment.\n")
            assert [(await s).status_code for s in slow] == [200, 200]
            # Given back as they ended: the same body now runs.
            again = await client.post(url, headers=session, content=body(5, 0))
            assert again.status_code == 200 and '"slept"' in again.text

    run(journey)
    rows = [r for r in people.invocations() if r["tool_name"] == "fxw.slow"]
    assert sorted(json.loads(r["arguments"])["seconds"] for r in rows) == [0, 2, 2]
