"""The journeys' harness: `toolhost serve` as a subprocess on either transport, the MCP SDK's
own client session on it, and the person at the client who answers the server's forms.

    deployment = Deployment(tmp_path, plugins="toolhost-math")
    person = Person()
    async with deployment.session(transport, person=person) as client:
        result = await client.call_tool("math.calculate", {"expression": "17 * 23"})

Every server runs under the default policy (no TOOLHOST_POLICY) with the deployment's own
data directory, and gets only the settings a desktop client's config would give it: none of
the machine's TOOLHOST_*, AGENT_* or TENSORSCALE_* variables leak in. Nothing here skips: a
server that does not start, a tool that is not served, a request with no answer within
REQUEST_TIMEOUT_S each fail the journey. A session that ends cleanly also checks that its
server wrote no traceback on stderr and (over HTTP, where the test owns the process) that it
exited 0 on SIGTERM.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import itertools
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio
import attrs
import mcp.types as types
from conftest import invocation_rows
from loopback_ports import free_port
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolhost.testing import run_toolhost

__all__ = [
    "PEOPLE",
    "TRANSPORTS",
    "Deployment",
    "Form",
    "Person",
    "Transport",
    "artifact_uri",
    "assert_no_traceback",
    "meta",
    "ok",
    "one_link",
    "read_resource_bytes",
    "refusal",
    "resource_links",
    "resource_uris",
    "run",
    "text_of",
]

#: stdio; streamable HTTP to one server; or two servers on one PostgreSQL database and S3
#: bucket behind a round-robin TCP balancer, each request on a connection of its own (so
#: consecutive requests of a session reach both hosts), the person authenticated by a token.
Transport = Literal["stdio", "http", "hosts"]
TRANSPORTS: tuple[Transport, ...] = ("stdio", "http", "hosts")
#: The two people of the hosts transport: every journey runs once as each, with the other's
#: token (and mail) in the same deployment.
PEOPLE: tuple[str, str] = ("ana", "ben")
#: Every scope a first-party tool requires or checks: what a person's token grants on the
#: hosts transport (as the server's principal is granted the roster's scopes otherwise).
ALL_SCOPES = ("artifact.read", "artifact.write", "demo.write", "email.read", "email.write",
              "media.generate", "people.read", "sandbox.execute", "workspace.read",
              "workspace.write")

#: Every request of a journey is answered within this (a sandboxed command, a generation).
REQUEST_TIMEOUT_S = 120.0
#: A server says it serves (HTTP) and answers initialize within this.
START_TIMEOUT_S = 60.0
#: A server stops within this of SIGTERM; a CLI command ends within COMMAND_TIMEOUT_S.
STOP_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 120.0
#: A whole journey ends within this, whatever hangs.
JOURNEY_TIMEOUT_S = 600.0

#: The client's self-reported name: approvals are recorded as ``mcp-client:<name>``.
CLIENT = types.Implementation(name="journey-client", version="1.0")

#: Settings a journey never inherits from the machine running the tests.
_OWN_PREFIXES = ("TOOLHOST_", "AGENT_", "TENSORSCALE_")

ARTIFACT_URI_PREFIX = "toolhost://artifacts/"


def run(journey: Any) -> None:
    """Run an async journey to its end, bounded by JOURNEY_TIMEOUT_S.

    A failure inside the client's task groups arrives wrapped in exception groups, one level
    per group; a lone failure is raised as itself, so the report shows the assertion.
    """

    async def bounded() -> None:
        with anyio.fail_after(JOURNEY_TIMEOUT_S):
            await journey()

    try:
        anyio.run(bounded)
    except BaseExceptionGroup as group:
        failure: BaseException = group
        while isinstance(failure, BaseExceptionGroup) and len(failure.exceptions) == 1:
            failure = failure.exceptions[0]
        if failure is group:
            raise
        raise failure from None


# ---------------------------------------------------------------------------- the deployment


class Deployment:
    """One toolhost installation as its operator set it up: the plugins it loads, its settings
    and its data directory, shared by every server and CLI command of a journey."""

    _logs = itertools.count()
    #: The shared record (TOOLHOST_DATABASE_URL and the S3 settings) of the hosts transport,
    #: set by the ``transport`` fixture: every server and command of the deployment uses it.
    shared_record: ClassVar[dict[str, str]] = {}
    #: Whom a journey's client is on the hosts transport (one of PEOPLE, set by the
    #: ``transport`` fixture); over stdio and one HTTP server, the server's own principal.
    principal: ClassVar[str] = "mcp"

    def __init__(self, tmp_path: Path, plugins: str, **settings: str) -> None:
        self.tmp_path = tmp_path
        self.data_dir = tmp_path / "data"
        self.settings: dict[str, str] = {
            "TOOLHOST_DATA_DIR": str(self.data_dir), "TOOLHOST_PLUGINS": plugins,
            **self.shared_record, **settings}
        #: Each host's data directory (the hosts transport has two; a plugin's local data,
        #: the mail cache, is imported into each).
        self.data_dirs = [self.data_dir] + ([tmp_path / "data-b"] if self.shared_record else [])
        self.stderr_logs: list[Path] = []
        #: The `serve --http` processes ``http_server`` started, oldest first.
        self.servers: list[subprocess.Popen[bytes]] = []
        self._tokens: dict[str, str] = {}
        if self.shared_record:  # the hosts authenticate each person by a token
            self.settings["TOOLHOST_HTTP_TOKENS_FILE"] = str(tmp_path / "tokens.toml")
            for principal in (self.principal, *PEOPLE):
                self.token_for(principal)

    @property
    def other_person(self) -> str | None:
        """The person of the hosts transport's deployment a journey is not about."""
        others = [p for p in PEOPLE if p != self.principal]
        return others[0] if self.shared_record and len(others) == 1 else None

    def env(self, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_PREFIXES)}
        env.update(self.settings)
        env.update(overrides)
        return env

    def _new_log(self, what: str) -> Path:
        path = self.tmp_path / f"{what}-{next(self._logs)}.stderr.log"
        self.stderr_logs.append(path)
        return path

    def stderr(self) -> str:
        """Everything every server of this deployment wrote on stderr so far."""
        return "".join(p.read_text(errors="replace") for p in self.stderr_logs if p.exists())

    # ------------------------------------------------------------------ the operator's commands

    def python(self, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` with this deployment's settings (a plugin's CLI: ``-m module``)."""
        return subprocess.run([sys.executable, *args], env=self.env(**settings),
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                              check=False)

    def toolhost(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``toolhost ARGS``, as the operator types it beside the running server."""
        return run_toolhost(*args, data_dir=self.data_dir, env=self.settings,
                            drop=_OWN_PREFIXES, timeout=COMMAND_TIMEOUT_S)

    async def operator(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``toolhost ARGS`` from inside a journey, off the event loop (the session stays
        responsive while the command runs)."""
        return await anyio.to_thread.run_sync(functools.partial(self.toolhost, *args))

    # ------------------------------------------------------------------ the data directory

    def database(self) -> Path:
        return self.data_dir / "toolhost.sqlite3"

    def token_for(self, principal: str) -> str:
        """A bearer token of ``principal`` (every first-party scope), in the token file the
        hosts read (written again with each new one: the servers read it again on change)."""
        if principal not in self._tokens:
            self._tokens[principal] = f"token-{len(self._tokens)}-{principal}"
            write_tokens(Path(self.settings["TOOLHOST_HTTP_TOKENS_FILE"]),
                         *((t, p, list(ALL_SCOPES)) for p, t in self._tokens.items()))
        return self._tokens[principal]

    def invocations(self) -> list[dict[str, Any]]:
        """The invocation rows, oldest first."""
        database = self.settings.get("TOOLHOST_DATABASE_URL")
        if database is not None:
            return _pg_rows(database, "SELECT * FROM tool_invocations ORDER BY created_at, id")
        return invocation_rows(self.database())

    def expire_artifact(self, artifact_id: str,
                        when: str = "2000-01-01T00:00:00.000000+00:00") -> None:
        """Move an artifact's expiry to a past instant (its retention cannot be moved from
        outside a server process any other way)."""
        database = self.settings.get("TOOLHOST_DATABASE_URL")
        if database is not None:
            import psycopg

            with psycopg.connect(database) as conn:
                changed = conn.execute("UPDATE artifacts SET expires_at = %s WHERE id = %s",
                                       (when, artifact_id)).rowcount
            assert changed == 1, f"no artifact {artifact_id} in the shared record"
            return
        with contextlib.closing(sqlite3.connect(self.database(), timeout=30)) as conn, conn:
            changed = conn.execute("UPDATE artifacts SET expires_at = ? WHERE id = ?",
                                   (when, artifact_id)).rowcount
        assert changed == 1, f"no artifact {artifact_id} in {self.database()}"

    # ------------------------------------------------------------------ sessions

    @asynccontextmanager
    async def session(self, transport: Transport, *serve_args: str,
                      person: Person | None = None, token: str | None = None,
                      url: str | None = None, keepalive: bool = True,
                      **settings: str) -> AsyncIterator[ClientSession]:
        """An initialized ClientSession (the 2025-11-25 handshake) on a fresh `toolhost serve`,
        or on the running one at ``url`` (``http_server``).

        ``serve_args`` are added to ``serve`` (``--pin people.history=1.0.0``); ``settings``
        to this one server's environment (another principal, elicitation off). With a
        ``person`` the client declares form elicitation and the person answers the forms;
        without one it declares no elicitation capability at all. ``token`` is sent as
        ``Authorization: Bearer`` over HTTP. ``keepalive=False``: a connection per request
        (behind a balancer, consecutive requests reach different hosts).
        """
        if transport == "hosts":
            principal = settings.pop("TOOLHOST_MCP_PRINCIPAL", self.principal)
            async with self.hosts(*serve_args, **settings) as balanced, self.session(
                    "http", person=person, token=self.token_for(principal), url=balanced,
                    keepalive=False) as client:
                yield client
            return
        env = self.env(**settings)
        log = self._new_log(f"serve-{transport}")
        if url is not None:
            opened: Any = functools.partial(_at_url, url, keepalive=keepalive)
        else:
            opened = _over_stdio if transport == "stdio" else _over_http
        async with opened(env, serve_args, log, token) as (read, write), ClientSession(
                read, write, read_timeout_seconds=REQUEST_TIMEOUT_S,
                elicitation_callback=person, client_info=CLIENT) as client:
            try:
                with anyio.fail_after(START_TIMEOUT_S):
                    await client.initialize()
            except Exception as exc:
                raise AssertionError(
                    f"toolhost serve ({transport}) did not initialize: {exc!r}\n"
                    f"its stderr:\n{log.read_text(errors='replace')}") from exc
            yield client
        assert_no_traceback(log.read_text(errors="replace"))


    @asynccontextmanager
    async def modern_client(self, transport: Transport, person: Person, *,
                            url: str | None = None, token: str | None = None,
                            keepalive: bool = True, **settings: str) -> AsyncIterator[Any]:
        """An ``mcp.Client`` that negotiates 2026-07-28 (no server-initiated requests: every
        form rides an ``InputRequiredResult`` and the client retries the call with the
        answer), on a fresh `toolhost serve`, or on the running one at ``url`` (with
        ``token`` and ``keepalive`` as ``session`` has them)."""
        import mcp

        if transport == "hosts":
            principal = settings.pop("TOOLHOST_MCP_PRINCIPAL", self.principal)
            async with self.hosts(**settings) as balanced, self.modern_client(
                    "http", person, url=balanced, token=self.token_for(principal),
                    keepalive=False) as client:
                yield client
            return
        env = self.env(**settings)
        log = self._new_log(f"serve-{transport}-2026")
        if url is not None:
            async with http_client(token, keepalive=keepalive) as http, mcp.Client(
                    streamable_http_client(url, http_client=http),
                    elicitation_callback=person) as client:
                assert client.protocol_version == "2026-07-28"
                yield client
            return
        if transport == "stdio":
            command, *args = _serve_command()
            params = StdioServerParameters(command=command, args=args, env=dict(env))
            with log.open("w") as errlog:
                async with mcp.Client(stdio_client(params, errlog=errlog),
                                      elicitation_callback=person) as client:
                    assert client.protocol_version == "2026-07-28"
                    yield client
        else:
            process, url = await _start_http(env, (), log)
            try:
                async with mcp.Client(url, elicitation_callback=person) as client:
                    assert client.protocol_version == "2026-07-28"
                    yield client
            finally:
                code = await _stop(process, log)
            assert code == 0, f"toolhost serve --http exited {code}:\n{log.read_text()}"
        assert_no_traceback(log.read_text(errors="replace"))


    @asynccontextmanager
    async def hosts(self, *serve_args: str, **settings: str) -> AsyncIterator[str]:
        """Two `toolhost serve --http` hosts of this deployment (each its own data directory,
        the shared record) behind a fresh round-robin balancer: its MCP URL. The balancer's
        first connection goes to the first host, so a session opens there (the host whose
        data directory the operator's commands use)."""
        from .balancer import round_robin

        second_dir = self.data_dirs[1]
        async with self.http_server(*serve_args, **settings) as first, self.http_server(
                *serve_args, **{**settings, "TOOLHOST_DATA_DIR": str(second_dir)}) as second:
            with round_robin([_address(first), _address(second)]) as balancer:
                yield balancer.url()
                # The session's requests reached both hosts (one connection each).
                assert all(balancer.connections), balancer.connections

    @asynccontextmanager
    async def http_server(self, *serve_args: str, bind: str = "127.0.0.1",
                          port: int | None = None, **settings: str) -> AsyncIterator[str]:
        """A `toolhost serve --http BIND:PORT` of this deployment (a free port unless given),
        for sessions (``session(url=)``) and raw requests: its MCP URL. Stopped with SIGTERM
        (unless the test stopped it), and it must exit 0."""
        log = self._new_log("serve-http")
        process, url = await _start_http(self.env(**settings), serve_args, log, bind, port)
        self.servers.append(process)
        try:
            yield url
        finally:
            code = await _stop(process, log)
        assert code == 0, f"toolhost serve --http exited {code} on SIGTERM:\n{log.read_text()}"
        assert_no_traceback(log.read_text(errors="replace"))


def _serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolhost._cli", "serve", *args]


def http_client(token: str | None, *, keepalive: bool = True) -> Any:
    """The SDK's own HTTP client, with the bearer token when there is one; without
    ``keepalive``, one connection per request."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    if keepalive:
        return create_mcp_http_client(headers=headers)
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    return httpx2.AsyncClient(
        headers=headers, limits=httpx2.Limits(max_keepalive_connections=0),
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT))



@asynccontextmanager
async def _at_url(url: str, env: Mapping[str, str], serve_args: tuple[str, ...], log: Path,
                  token: str | None, *, keepalive: bool = True) -> AsyncIterator[Any]:
    log.write_text("")  # the server's stderr is its own deployment's log
    async with http_client(token, keepalive=keepalive) as http, streamable_http_client(
            url, http_client=http) as (read, write, *_):
        yield read, write


@asynccontextmanager
async def _over_stdio(env: Mapping[str, str], serve_args: tuple[str, ...],
                      log: Path, token: str | None = None) -> AsyncIterator[Any]:
    command, *args = _serve_command(*serve_args)
    params = StdioServerParameters(command=command, args=args, env=dict(env))
    with log.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            yield read, write


@asynccontextmanager
async def _over_http(env: Mapping[str, str], serve_args: tuple[str, ...],
                     log: Path, token: str | None = None) -> AsyncIterator[Any]:
    process, url = await _start_http(env, serve_args, log)
    try:
        async with http_client(token) as http, streamable_http_client(url, http_client=http) as (
                read, write, *_):
            yield read, write
    finally:
        code = await _stop(process, log)
    assert code == 0, f"toolhost serve --http exited {code} on SIGTERM:\n{log.read_text()}"


def _address(url: str) -> tuple[str, int]:
    host, _, port = url.split("/")[2].rpartition(":")
    return host.strip("[]"), int(port)


def _pg_rows(database: str, sql: str) -> list[dict[str, Any]]:
    """Rows of the shared record, its BYTEA columns (free text) read back as text."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(database, row_factory=dict_row) as conn:
        rows = conn.execute(sql).fetchall()
    return [{k: bytes(v).decode() if isinstance(v, (bytes, memoryview)) else v
             for k, v in row.items()} for row in rows]


async def _start_http(env: Mapping[str, str], serve_args: tuple[str, ...], log: Path,
                      bind: str = "127.0.0.1",
                      given: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """`toolhost serve --http BIND:PORT` on ``given`` or a free port, once it says it serves.
    Another process taking a free port between our probe and the server's bind is retried."""
    for _ in range(3):
        port = given if given is not None else free_port()
        with log.open("w") as errlog:
            process = subprocess.Popen(
                _serve_command("--http", f"{bind}:{port}", *serve_args),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog,
                env=dict(env))
        try:
            serving = await _wait_until_serving(process, log)
        except BaseException:
            await _stop(process, log)
            raise
        if serving:
            host = f"[{bind}]" if ":" in bind else bind
            return process, f"http://{host}:{port}/mcp"
        said = log.read_text(errors="replace")
        if "address already in use" not in said:
            raise AssertionError(
                f"toolhost serve --http did not start (exit {process.returncode}):\n{said}")
    raise AssertionError("toolhost serve --http found no free port in three tries")


async def _wait_until_serving(process: subprocess.Popen[bytes], log: Path) -> bool:
    """True once the server's `toolhost: serving ... at URL` line is on stderr (it listens by
    then); False if it exited first."""
    with anyio.fail_after(START_TIMEOUT_S):
        while "toolhost: serving " not in log.read_text(errors="replace"):
            if process.poll() is not None:
                return False
            await anyio.sleep(0.05)
    return True


async def _stop(process: subprocess.Popen[bytes], log: Path) -> int:
    """SIGTERM (a supervisor's stop), then its exit code; killed if it does not stop."""
    with anyio.CancelScope(shield=True):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(process.wait, STOP_TIMEOUT_S))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"toolhost serve did not stop within {STOP_TIMEOUT_S} s of "
                                 f"SIGTERM:\n{log.read_text(errors='replace')}") from None


def write_tokens(path: Path, *entries: tuple[str, str, list[str]]) -> Path:
    """A token file (``TOOLHOST_HTTP_TOKENS_FILE``) of (token, principal, scopes) entries, each
    token stored as its SHA-256 only."""
    path.write_text("".join(
        f'[[token]]\nsha256 = "{hashlib.sha256(t.encode()).hexdigest()}"\n'
        f'principal = "{p}"\nscopes = {json.dumps(s)}\n' for t, p, s in entries))
    return path


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text, text


# ---------------------------------------------------------------------------- the person


@attrs.frozen
class Form:
    """One form the server put to the person: which kind, its message and its schema."""

    kind: Literal["approval", "feedback", "unknown"]
    message: str
    requested_schema: Mapping[str, Any]

    @property
    def default(self) -> Any:
        """The value the form proposes (the feedback form's ``text`` default)."""
        fields = self.requested_schema.get("properties") or {}
        return (fields.get("text") or {}).get("default")

    @property
    def tool(self) -> str | None:
        """The tool an approval form is about (``toolhost asks to approve TOOL VERSION ...``)."""
        found = re.match(r"toolhost asks to approve (\S+) ", self.message)
        return found.group(1) if found else None


@attrs.define
class Person:
    """The person at the MCP client: the elicitation callback, which answers each form the
    server sends and remembers it.

    Forms are told apart by their requested_schema's properties: ``{"approve"}`` is an
    approval (answered ``approve``: True unless ``approves`` is False), ``{"text"}`` is the
    feedback form (answered with ``types_feedback``, or declined when the person has nothing
    to type). Anything else is recorded as ``unknown`` and declined, so a journey can assert
    it was never asked.
    """

    approves: bool = True
    types_feedback: str | None = None
    asked: list[Form] = attrs.field(factory=list)

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if not isinstance(params, types.ElicitRequestFormParams):
            self.asked.append(Form("unknown", getattr(params, "message", ""), {}))
            return types.ElicitResult(action="decline")
        schema: Mapping[str, Any] = dict(params.requested_schema)
        fields = set(schema.get("properties") or {})
        if fields == {"approve"}:
            self.asked.append(Form("approval", params.message, schema))
            return types.ElicitResult(action="accept", content={"approve": self.approves})
        if fields == {"text"}:
            self.asked.append(Form("feedback", params.message, schema))
            if self.types_feedback is None:
                return types.ElicitResult(action="decline")
            return types.ElicitResult(action="accept", content={"text": self.types_feedback})
        self.asked.append(Form("unknown", params.message, schema))
        return types.ElicitResult(action="decline")

    def approved_tools(self) -> list[str | None]:
        return [f.tool for f in self.asked if f.kind == "approval"]

    def kinds(self) -> list[str]:
        return [f.kind for f in self.asked]


# ---------------------------------------------------------------------------- reading results


def meta(result: types.CallToolResult, key: str) -> Any:
    """``result._meta["toolhost/KEY"]`` (None when absent)."""
    return (result.meta or {}).get(f"toolhost/{key}")


def text_of(result: types.CallToolResult) -> str:
    """The result's one text block (resource links may stand beside it)."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    assert len(texts) == 1, f"expected one text block, got {result.content!r}"
    return texts[0]


def ok(result: types.CallToolResult) -> dict[str, Any]:
    """The structured result of a call that succeeded (the model-facing text and the
    reason code in the failure message otherwise)."""
    assert not result.is_error, (
        f"the call failed: {[getattr(b, 'text', b) for b in result.content]!r} "
        f"meta={result.meta!r}")
    assert result.structured_content is not None
    return dict(result.structured_content)


def resource_links(result: types.CallToolResult) -> list[types.ResourceLink]:
    return [b for b in result.content if isinstance(b, types.ResourceLink)]


def one_link(result: types.CallToolResult) -> types.ResourceLink:
    """The one resource_link block of a result that carries one file."""
    links = resource_links(result)
    assert len(links) == 1, (
        f"expected one resource_link block, got content types "
        f"{[b.type for b in result.content]!r}")
    return links[0]


def artifact_uri(artifact_id: str) -> str:
    return f"{ARTIFACT_URI_PREFIX}{artifact_id}"


async def read_resource_bytes(client: ClientSession, uri: str) -> tuple[bytes, str | None]:
    """resources/read of one artifact: its exact bytes (a base64 blob) and media type."""
    read = await client.read_resource(uri)
    assert len(read.contents) == 1, read.contents
    (contents,) = read.contents
    assert isinstance(contents, types.BlobResourceContents), (
        f"expected a blob (base64), got {type(contents).__name__}")
    assert str(contents.uri) == uri
    return base64.b64decode(contents.blob, validate=True), contents.mime_type


async def resource_uris(client: ClientSession) -> list[str]:
    """resources/list, every page, as URIs in the order the server lists them."""
    uris: list[str] = []
    cursor: str | None = None
    while True:
        listed = await client.list_resources(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        uris += [str(r.uri) for r in listed.resources]
        cursor = listed.next_cursor
        if not cursor:
            return uris


async def refusal(client: ClientSession, uri: str) -> MCPError:
    """The MCP error a resources/read of ``uri`` is refused with (fails if it is read)."""
    try:
        read = await client.read_resource(uri)
    except MCPError as exc:
        return exc
    raise AssertionError(f"resources/read {uri} was answered instead of refused: {read!r}")
