"""The MCP gateway's client side: one SDK client session per upstream server, on a thread.

The host calls tools from many places (``toolhost call``'s ``asyncio.run``, a server's loop,
the pipeline's worker threads), while an SDK session lives in the task that entered it (its
anyio task group and cancel scopes are that task's). So every session is held on one event
loop that this adapter owns, on a daemon thread: each server has a supervisor task there that
connects, lists, watches and reconnects, and a call is started on that loop and answered on
the caller's, one ``call_soon_threadsafe`` each way. Cancelling the caller's await cancels
the task on our loop, and the SDK then sends ``notifications/cancelled`` upstream. What a
listing changes (the gateway registering tools: schemas compiled, the registry replaced) is
told on a thread of its own, one listing at a time, never on that loop, so no server's calls
wait on another's listing. What a message may cost once parsed is bounded in both transports
(``mcp_bounds``: a call's answer, a listing, anything else); a listed input schema larger than
the gateway's review takes is not kept (``kept_schema``), and a listing that was slow to parse
is not repeated sooner than ten times as long (``RELIST_AFTER_TAKEN``).

Connections speak the 2025-11-25 handshake (``mode="legacy"``): what deployed servers speak,
and the revision in which ``notifications/tools/list_changed`` and ``notifications/cancelled``
are plain notifications. A stdio server is reached through ``mcp_stdio`` (the SDK's transport
read in linear time, with lines bounded) and started with the SDK's small default environment
(PATH, HOME, ...) plus its configured ``env``, never the host's (no TOOLHOST_* and no other
credential leaks to it); its stderr is the host's. An HTTP server is reached with an
``httpx2`` client (the SDK's) on the host's rules: ``trust_env=False`` (no proxy or
certificate variable of the host's counts), the host's TLS context (TOOLHOST_CA_BUNDLE), no
redirect followed by the client itself. (The SDK's transport follows a 307/308 within the
endpoint's own scheme, host and port, and refuses one off it: the token never leaves the
origin it was configured for; tests/test_gateway_http.py.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import json
import os
import ssl
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import IO, Any, NoReturn

import attrs

from toolhost._adapters.mcp_bounds import ENCODED_WORDS
from toolhost._adapters.mcp_stdio import (
    TOO_LONG_CODE,
    UNREADABLE,
    LineTooLong,
    stdio_transport,
)
from toolhost._adapters.system_clock import monotonic
from toolhost._model.printable import escaped
from toolhost._model.upstream import (
    TOO_LONG_WORDS,
    ServerState,
    UpstreamError,
    UpstreamFailure,
    UpstreamResult,
    UpstreamServer,
    UpstreamStatus,
    UpstreamTool,
)

__all__ = ["BACKOFF_S", "CALL_DELIVERY", "KEPT_SCHEMA_BYTES", "MAX_LISTED_TOOLS",
           "MAX_RESULT_BYTES", "Delivery", "McpUpstreams", "described", "kept_schema"]

#: Seconds between reconnection attempts: doubling from the first to the last, then steady.
BACKOFF_S = (0.5, 30.0)
#: How often an idle connection is pinged, so a server that died between calls is noticed.
PING_INTERVAL_S = 5.0
#: The least time between two listings of one server on its ``list_changed``: a server that
#: sends them without end is listed once a second, not as fast as it can send.
RELIST_EVERY_S = 1.0
#: And never sooner than this many times as long as its last listing took: the host's threads
#: wait while a listing is parsed (the GIL), so a server that makes its listing slow to parse
#: has it parsed a tenth of the time at most.
RELIST_AFTER_TAKEN = 10.0
#: The most text a result may carry into the host: past it the call fails ``too_large``.
#: Above the host's 8 MiB output ceiling on purpose: up to here the gateway keeps a head and a
#: tail (``_registration.gateway``), and the pipeline excerpts and keeps them as an artifact.
MAX_RESULT_BYTES = 64 * 1024 * 1024


@attrs.define
class Delivery:
    """What a transport knows of one call's request: ``unsent`` once the connection it was to
    go on could not be made, so none of it reached the server (``mcp_http``)."""

    unsent: bool = False


#: The call under way, set in the call's own task: the SDK sends each request from a copy of
#: its sender's context, so a transport finds the call its request belongs to.
CALL_DELIVERY: contextvars.ContextVar[Delivery | None] = contextvars.ContextVar(
    "toolhost_mcp_call_delivery", default=None)


def max_line_bytes(max_result_bytes: int) -> int:
    """The longest line read from a stdio server: twice the text a result may carry (JSON
    escapes a quote or a newline in two bytes) and 1 MiB for the rest of the message. A result
    whose text escapes wider than that is refused as too large before it is whole."""
    return 2 * max_result_bytes + (1 << 20)


#: The most of an upstream's own error text kept for operators (the row's detail, the logs).
DETAIL_CHARS = 2000
#: Pages of a tools/list walk before the listing is cut (a paginator that never ends), and
#: the most tools kept of one listing.
_MAX_PAGES = 100
MAX_LISTED_TOOLS = 1024
_CLOSE_WAIT_S = 15.0
#: How long a closing supervisor may take to leave its session before it is cancelled.
_ORDERLY_CLOSE_S = 2.0
#: The longest line of a server's stderr copied to the host's.
_STDERR_LINE = 500


def _kinds_shown(block: Any) -> str:
    # Only the block's type, from the SDK's validated literal set: its other fields (a MIME
    # type, a URI) are the upstream's words.
    kind = getattr(block, "type", "unknown")
    kind = kind if kind in ("image", "audio", "resource", "resource_link") else "unknown"
    return f"[{kind} content of the result is not shown]"


def result_of(raw: Any) -> UpstreamResult:
    """An SDK ``CallToolResult`` as the gateway's value: text blocks joined by newlines."""
    parts = [block.text if getattr(block, "type", None) == "text" else _kinds_shown(block)
             for block in raw.content]
    structured = raw.structured_content
    return UpstreamResult(text="\n".join(parts),
                          structured=structured if isinstance(structured, dict) else None,
                          is_error=bool(raw.is_error))


#: The largest input schema the gateway's review takes (D281: ``MAX_SCHEMA_BYTES`` of
#: ``_registration.upstream_schema``, which an adapter does not import).
KEPT_SCHEMA_BYTES = 64 * 1024
#: What stands in for a larger schema, in pieces of 1,024 bytes as the review measures them.
_FILLER = "x" * 1020


def tool_of(raw: Any) -> UpstreamTool:
    annotations = raw.annotations.model_dump(by_alias=True, exclude_none=True) \
        if raw.annotations is not None else {}
    return UpstreamTool(name=raw.name, description=raw.description or "",
                        input_schema=kept_schema(dict(raw.input_schema)),
                        output_schema=dict(raw.output_schema) if raw.output_schema else None,
                        annotations=annotations)


def kept_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema``, or a stand-in for it when it is larger than the review takes. A schema the
    review refuses for its size was kept whole for the connection's life, every object of it,
    though no tool was ever made of it. The stand-in measures what ``schema`` measured, as the
    review measures (``json.dumps`` with its default separators), so the review refuses it in
    the same words ("its input schema is N bytes, ..."); it holds one shared string and a list
    of ``N / 1024`` references to it. It differs from any schema the review took, so a
    registered tool whose schema grew past the bound is disabled as changed."""
    size = len(json.dumps(schema, ensure_ascii=False).encode("utf-8", "replace"))
    if size <= KEPT_SCHEMA_BYTES:
        return schema
    # Each piece measures its two quotes and the ", " after it; the rest is the last piece.
    pieces, rest = divmod(size - len('{"": [""]}'), len(_FILLER) + 4)
    return {"": [_FILLER] * pieces + ["x" * rest]}


@attrs.define
class _Connection:
    """One server: its supervisor's state. Touched only on the adapter's loop, except the
    fields ``status`` reads (replaced whole, never mutated in place)."""

    server: UpstreamServer
    owner: McpUpstreams
    state: ServerState = ServerState.CONNECTING
    problem: str = ""
    tools: tuple[UpstreamTool, ...] = ()
    client: Any = None
    first_attempt: threading.Event = attrs.field(factory=threading.Event)
    #: The supervisor's task, on the adapter's loop (``close`` cancels it if it must).
    task: asyncio.Task[None] | None = None
    #: A stdio server's stderr: the write end of a pipe whose lines ``_relay_stderr`` copies.
    errlog: IO[str] | None = None
    wake: asyncio.Event | None = None
    dead: str | None = None
    relist: bool = False
    closing: bool = False
    #: Calls in flight: a connection busy answering (a large result being read) is not
    #: pinged, since its pong would queue behind the answer.
    in_flight: int = 0
    #: When the tools were last listed (the adapter's monotonic clock), and how long it took.
    listed_at: float = 0.0
    listing_took: float = 0.0
    #: Set when this connection ended on a line past the stdio transport's bound: the calls
    #: it ends fail ``too_large`` rather than ``connection_lost``.
    too_long: LineTooLong | None = None

    def poke(self) -> None:
        if self.wake is not None:
            self.wake.set()

    def mark_dead(self, why: str) -> None:
        if self.dead is None:
            self.dead = why
        self.poke()

    async def supervise(self) -> None:
        self.task = asyncio.current_task()
        self.wake = asyncio.Event()
        attempt = 0
        while not self.closing:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    self.tools = await self._list(client)
                    self.client, self.dead, self.relist = client, None, False
                    self.too_long = None
                    self.state, self.problem = ServerState.CONNECTED, ""
                    self.first_attempt.set()
                    # Each listing is told, the first included: a server reached only after
                    # the start brings its tools then (the gateway ignores the start's own).
                    self.owner.tools_changed(self.server.name)
                    attempt = 0
                    await self._watch(client)
            except Exception as exc:  # whatever the SDK or the transport raised: one line
                self.problem = described(exc)
            finally:
                self.client = None
            if self.closing:
                break
            if self.dead is not None:
                self.problem = self.dead
            self.state = ServerState.UNREACHABLE
            self.first_attempt.set()
            low, high = BACKOFF_S
            delay = min(high, low * 2 ** attempt)
            attempt += 1
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), delay)
        self.state, self.problem = ServerState.CLOSED, "the host is closing"
        self.first_attempt.set()

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client

        server = self.server
        transport: Any
        if server.command is not None:
            transport = stdio_transport(
                server.command, server.args,
                {name: value.reveal() for name, value in server.env.items()},
                errlog=self.owner.errlog_of(self), too_long=self._too_long,
                ended=self._output_ended,
                max_line_bytes=max_line_bytes(self.owner.max_result_bytes))
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            from toolhost._adapters.mcp_http import BoundedTransport, quiet_sdk_logs

            headers = {"Authorization": f"Bearer {server.token.reveal()}"} \
                if server.token is not None else None
            verify = self.owner.ssl_context if self.owner.ssl_context is not None else True
            bound = max_line_bytes(self.owner.max_result_bytes)
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=headers, trust_env=False, follow_redirects=False,
                transport=BoundedTransport(
                    httpx2.AsyncHTTPTransport(verify=verify, trust_env=False), bound),
                timeout=httpx2.Timeout(server.connect_timeout_s, read=300.0)))
            assert server.url is not None
            quiet_sdk_logs()
            # An answer as large as a stdio line may be (D313): the SDK's default, 1 MiB per
            # event, failed every larger result as the server's own error.
            transport = streamable_http_client(server.url, http_client=http,
                                               max_sse_event_size=bound)
        client = Client(transport, mode="legacy", cache=None,
                        read_timeout_seconds=server.connect_timeout_s,
                        message_handler=self._on_message)
        entered = await stack.enter_async_context(client)
        # The SDK checks each result against the server's own outputSchema with jsonschema:
        # the server's regular expressions, run in the host with the GIL held, past every
        # deadline (D334). The gateway's result is untrusted text under its own schema.
        entered.session.validate_tool_result = _unchecked  # type: ignore[method-assign]
        return entered

    async def _list(self, client: Any) -> tuple[UpstreamTool, ...]:
        began = monotonic()
        tools: list[UpstreamTool] = []
        cursor = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(tool_of(t) for t in page.tools)
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_LISTED_TOOLS:
                break
        self.listed_at = monotonic()
        self.listing_took = self.listed_at - began
        # More than the gateway registers of one server (it says so), but bounded.
        return tuple(tools[:MAX_LISTED_TOOLS])

    def relist_at(self) -> float:
        """The soonest a ``list_changed`` is listed (``RELIST_EVERY_S``, ``RELIST_AFTER_TAKEN``;
        never later than a reconnection's longest wait after the last listing)."""
        return self.listed_at + max(RELIST_EVERY_S,
                                    min(RELIST_AFTER_TAKEN * self.listing_took, BACKOFF_S[1]))

    async def _watch(self, client: Any) -> None:
        """Until the connection dies or the host closes: re-list on list_changed, ping when
        idle."""
        assert self.wake is not None
        while not self.closing and self.dead is None:
            self.wake.clear()
            woke = True
            wait = PING_INTERVAL_S
            if self.relist:  # not sooner than relist_at
                wait = self.relist_at() - monotonic()
            try:
                if wait > 0:
                    await asyncio.wait_for(self.wake.wait(), wait)
            except TimeoutError:
                woke = False
            if self.closing or self.dead is not None:
                return
            if self.relist and monotonic() >= self.relist_at():
                self.relist = False
                self.tools = await self._list(client)
                self.owner.tools_changed(self.server.name)
            elif not woke and not self.relist and not self.in_flight:
                try:
                    with warnings.catch_warnings():
                        # Deprecated at 2026-07-28 only; these sessions speak 2025-11-25.
                        warnings.simplefilter("ignore")
                        await client.send_ping()
                except Exception as exc:
                    self.mark_dead(f"stopped answering ({described(exc)})")

    def _too_long(self, exc: LineTooLong) -> None:
        # An answer too long to read fails its own request (the transport answers it in the
        # server's stead); one whose request is unknown ends the connection (D312).
        if exc.request_id is None:
            self.too_long = exc
            self.mark_dead(f"sent {exc}")

    def _output_ended(self) -> None:
        # A connected stdio server's output ended (it exited): nothing sent to it now is
        # answered, so the calls after this are refused unsent (``unreachable``) instead of
        # written and lost, and the supervisor starts it again without waiting for a ping.
        if self.client is not None:
            self.mark_dead("its output ended (the server exited)")

    async def _on_message(self, message: Any) -> None:
        import mcp.types as types

        # Inline in the SDK's read loop: only note it; the supervisor re-lists.
        if isinstance(message, types.ToolListChangedNotification):
            self.relist = True
            self.poke()

    def _lost(self, delivery: Delivery, why: str) -> NoReturn:
        """The connection ended under a call: ``unreachable`` (retryable) when the transport
        knows the request never left, else ``connection_lost`` (it may have taken effect)."""
        if delivery.unsent:
            self.mark_dead("the connection could not be made")
            raise UpstreamError(UpstreamFailure.UNREACHABLE,
                                "the connection could not be made; the call was not sent")
        self.mark_dead(why)
        raise UpstreamError(UpstreamFailure.CONNECTION_LOST, why)

    async def call(self, tool: str, arguments: Mapping[str, Any], timeout_s: float,
                   progress: Callable[[float, float | None], None] | None = None,
                   ) -> UpstreamResult:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        client = self.client
        if client is None or self.dead is not None:
            raise UpstreamError(UpstreamFailure.UNREACHABLE, self.problem or "not connected")
        told = None
        if progress is not None:
            async def told(done: float, total: float | None, message: str | None) -> None:
                # The upstream's message is its own words: the person watching the call
                # sees how far it got, never what the server says about it.
                progress(done, total)

        # This task's own context (each call is a task of its own): the HTTP transport notes
        # here a request it could not send at all.
        delivery = Delivery()
        CALL_DELIVERY.set(delivery)
        self.in_flight += 1
        try:
            # The SDK's timeout counts from the request's write: a server that stopped reading
            # its stdin would hold the call past it, so the whole call is bounded too.
            async with asyncio.timeout(timeout_s):
                raw = await client.call_tool(tool, dict(arguments),
                                             read_timeout_seconds=timeout_s,
                                             progress_callback=told)
        except TimeoutError:
            raise UpstreamError(UpstreamFailure.TIMED_OUT,
                                f"no answer within {timeout_s:g} s") from None
        except MCPError as exc:
            if _too_large(exc.code, exc.message):
                # The transport's answer in the server's stead (a server sending such an error
                # itself only gets the same failure).
                raise UpstreamError(UpstreamFailure.TOO_LARGE,
                                    exc.message[:DETAIL_CHARS]) from None
            if _unreadable(exc.code, exc.message):
                raise UpstreamError(UpstreamFailure.PROTOCOL,
                                    exc.message[:DETAIL_CHARS]) from None
            if exc.code == CONNECTION_CLOSED and exc.message == "Connection closed":
                if self.too_long is not None:
                    raise UpstreamError(UpstreamFailure.TOO_LARGE, str(self.too_long)) from None
                self._lost(delivery, "the connection closed during the call")
            if exc.code == CONNECTION_CLOSED and exc.message in _STREAM_ENDED:
                # The SDK's, for a call's event stream that ended unanswered (the server died
                # under it, or dropped it): delivered, and its effect unknown. The session may
                # live on; the next ping says whether it does.
                raise UpstreamError(UpstreamFailure.CONNECTION_LOST, exc.message) from None
            if exc.code == REQUEST_TIMEOUT:
                raise UpstreamError(UpstreamFailure.TIMED_OUT,
                                    f"no answer within {timeout_s:g} s") from None
            raise UpstreamError(UpstreamFailure.REJECTED,
                                f"JSON-RPC error {exc.code}: {exc.message}"[:DETAIL_CHARS]
                                ) from None
        except (ValidationError, RuntimeError, ValueError, TypeError) as exc:
            # The SDK refused the answer (not a CallToolResult, or structured content that
            # does not match the tool's own output schema).
            raise UpstreamError(UpstreamFailure.PROTOCOL,
                                described(exc)[:DETAIL_CHARS]) from None
        except (OSError, EOFError) as exc:
            self._lost(delivery, described(exc))
        finally:
            self.in_flight -= 1
        result = result_of(raw)
        size = len(result.text.encode("utf-8", "replace"))
        if size > self.owner.max_result_bytes:
            raise UpstreamError(UpstreamFailure.TOO_LARGE, f"{size} bytes of text")
        return result


#: How the SDK's error for an event stream that failed begins (for a JSON answer it could not
#: read: ``UNREADABLE``, which the stdio transport answers in too).
_STREAM_FAILED = "SSE stream failed: "
#: How the SDK's error begins for an event of a request's stream that is not JSON-RPC (no
#: JSON, or JSON of another shape): its words for an event, where ``UNREADABLE`` is a body's.
_EVENT_UNREADABLE = "Failed to parse SSE message: "
#: The SDK's words for a request's event stream that ended before its answer.
_STREAM_ENDED = frozenset({"SSE stream ended without a response",
                           "SSE stream ended and reconnection attempts were exhausted"})


def _too_large(code: int, message: str) -> bool:
    """Whether a JSON-RPC error is a transport's, for an answer past the bound: the stdio
    transport's own (D312), the SDK's for an HTTP answer's JSON body or one event (D313)."""
    from mcp_types import CONNECTION_CLOSED, PARSE_ERROR

    if code == TOO_LONG_CODE:
        return message.startswith(TOO_LONG_WORDS)
    if code == PARSE_ERROR:
        return message.startswith(f"{UNREADABLE}{TOO_LONG_WORDS}")
    return code == CONNECTION_CLOSED and message.startswith(
        (f"{_STREAM_FAILED}Server-sent event exceeded the ", f"{_STREAM_FAILED}{TOO_LONG_WORDS}"))


def _unreadable(code: int, message: str) -> bool:
    """Whether a JSON-RPC error is a transport's, for an answer it could not read: the stdio
    transport's or the SDK's for a line or a JSON body that is not JSON-RPC (D494), the SDK's
    for such an event of an event stream, or for an encoded stream (D313). The server did
    answer: a protocol error, not the server's own error, nor retryable."""
    from mcp_types import CONNECTION_CLOSED, PARSE_ERROR

    if code == PARSE_ERROR:
        return message.startswith((UNREADABLE, _EVENT_UNREADABLE))
    return code == CONNECTION_CLOSED and message.startswith(f"{_STREAM_FAILED}{ENCODED_WORDS}")


def _settle(answer: asyncio.Future[UpstreamResult], task: asyncio.Task[UpstreamResult]) -> None:
    """On the caller's loop: the upstream task's outcome, as the caller's answer."""
    if answer.done():  # the caller was cancelled meanwhile
        return
    if task.cancelled():  # not by this caller (it is done then): the adapter is closing
        answer.set_exception(UpstreamError(UpstreamFailure.UNREACHABLE, "the host is closing"))
    elif (error := task.exception()) is not None:
        answer.set_exception(error)
    else:
        answer.set_result(task.result())


def _cancel_started(started: list[asyncio.Task[UpstreamResult]]) -> None:
    """On our loop: cancel the call's task. ``start`` always runs before this (both were
    scheduled on our loop from the caller's thread, in that order)."""
    for task in started:
        task.cancel()


async def _unchecked(name: str, result: Any) -> None:
    """In place of the SDK's ``ClientSession.validate_tool_result`` (D334)."""


def _relay_stderr(read_fd: int, server: str) -> None:
    """Copy a stdio server's stderr to the host's, a line at a time (``errlog_of``). A line is
    read up to what is shown of it, its rest dropped in bounded pieces: a server writing 1 GiB
    without a newline held it all in the host's memory."""
    with os.fdopen(read_fd, "rb") as lines:
        while raw := lines.readline(_STDERR_LINE * 4):  # UTF-8: at most 4 bytes a character
            if not raw.endswith(b"\n"):
                while (rest := lines.readline(65536)) and not rest.endswith(b"\n"):
                    pass
            line = escaped(raw.decode("utf-8", "replace").rstrip("\r\n")[:_STDERR_LINE])
            stream = sys.stderr
            if stream is None:
                continue
            with contextlib.suppress(OSError, ValueError):
                stream.write(f"toolhost: mcp server {server}: {line}\n")
                stream.flush()


def described(exc: BaseException) -> str:
    """One line for operators: the exception's type, and its message cut short, with every
    character that is not printable escaped (an upstream's error message is its own words,
    and an escape sequence in it would move the operator's terminal)."""
    inner = getattr(exc, "exceptions", None)  # an ExceptionGroup from a task group
    if inner:
        return described(inner[0])
    text = escaped(" ".join(str(exc).split())[:300])
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpUpstreams:
    """The ``Upstreams`` port over the official MCP SDK's client."""

    def __init__(self, servers: tuple[UpstreamServer, ...], *,
                 ssl_context: ssl.SSLContext | None = None,
                 max_result_bytes: int = MAX_RESULT_BYTES) -> None:
        self.ssl_context = ssl_context
        self.max_result_bytes = max_result_bytes
        self._connections = {s.name: _Connection(s, self) for s in servers if s.enabled}
        self._callbacks: list[Callable[[str], None]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="toolhost-mcp-upstreams", daemon=True)
        self._supervisors: list[concurrent.futures.Future[None]] = []
        #: Where ``tools_changed`` listeners run: one listing at a time, off our loop.
        self._listings = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="toolhost-mcp-listing")
        self._closed = False

    def errlog_of(self, connection: _Connection) -> IO[str]:
        """A stdio server's stderr: a pipe whose lines reach the host's stderr one at a time,
        each prefixed with the server's name and with what is not printable escaped, so a
        server can neither move the operator's terminal nor write a line that reads as the
        host's own log (a forged ``pipeline.approved``). One per server, for its lifetime."""
        if connection.errlog is None:
            read_fd, write_fd = os.pipe()
            connection.errlog = os.fdopen(write_fd, "w")
            threading.Thread(target=_relay_stderr, args=(read_fd, connection.server.name),
                             name="toolhost-mcp-stderr", daemon=True).start()
        return connection.errlog

    def start(self, timeout_s: float | None = None) -> None:
        if self._thread.is_alive() or self._closed:
            return
        self._thread.start()
        for connection in self._connections.values():
            self._supervisors.append(
                asyncio.run_coroutine_threadsafe(connection.supervise(), self._loop))
        if timeout_s is None:
            timeout_s = max((c.server.connect_timeout_s for c in self._connections.values()),
                            default=0.0)
        deadline = monotonic() + timeout_s
        for connection in self._connections.values():
            connection.first_attempt.wait(max(0.0, deadline - monotonic()))

    def status(self) -> list[UpstreamStatus]:
        found = []
        for name, c in self._connections.items():
            problem = c.problem
            if c.state is ServerState.CONNECTING:
                problem = "still connecting"
            found.append(UpstreamStatus(name=name, state=c.state, problem=problem,
                                        tools=c.tools))
        return found

    def on_tools_changed(self, callback: Callable[[str], None]) -> None:
        self._callbacks.append(callback)

    def tools_changed(self, server: str) -> None:
        """A server's tools were listed (on our loop): tell the listeners on the listing
        thread, so the loop goes on serving every other server meanwhile."""
        with contextlib.suppress(RuntimeError):  # closing: nobody is to be told any more
            self._listings.submit(self._tell, server)

    def _tell(self, server: str) -> None:
        for callback in self._callbacks:
            try:
                callback(server)
            except Exception:  # a listener's bug must not stop the supervisor
                from toolhost._pipeline.log import get_logger

                get_logger().exception("gateway.tools_changed_failed", server=server)

    async def call(self, server: str, tool: str, arguments: Mapping[str, Any], *,
                   timeout_s: float,
                   progress: Callable[[float, float | None], None] | None = None,
                   ) -> UpstreamResult:
        connection = self._connections.get(server)
        if connection is None or self._closed or not self._thread.is_alive():
            raise UpstreamError(UpstreamFailure.UNREACHABLE, "not configured or closed")
        caller = asyncio.get_running_loop()
        answer: asyncio.Future[UpstreamResult] = caller.create_future()
        started: list[asyncio.Task[UpstreamResult]] = []

        def finished(task: asyncio.Task[UpstreamResult]) -> None:  # on our loop
            with contextlib.suppress(RuntimeError):  # the caller's loop has closed
                caller.call_soon_threadsafe(_settle, answer, task)

        def start() -> None:  # on our loop
            task = self._loop.create_task(connection.call(tool, arguments, timeout_s,
                                                          progress))
            task.add_done_callback(finished)
            started.append(task)

        # One wake-up each way (call_soon_threadsafe), not run_coroutine_threadsafe and
        # wrap_future's chain of two futures: on this machine each cross-thread hop cost
        # ~120 µs that way and ~70 µs this way (bench/README.md, the gateway).
        try:
            self._loop.call_soon_threadsafe(start)
        except RuntimeError:  # our loop closed meanwhile
            raise UpstreamError(UpstreamFailure.UNREACHABLE, "closed") from None
        try:
            return await answer
        except asyncio.CancelledError:
            # The caller gave up: cancel the request on our loop (the SDK then sends
            # notifications/cancelled upstream), whether it started yet or not.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(_cancel_started, started)
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            stopping = asyncio.run_coroutine_threadsafe(self._stop(), self._loop)
            with contextlib.suppress(concurrent.futures.TimeoutError):
                stopping.result(_ORDERLY_CLOSE_S + _CLOSE_WAIT_S + 1)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_CLOSE_WAIT_S)
        if not self._loop.is_running():
            self._loop.close()
        self._listings.shutdown(wait=False, cancel_futures=True)
        for connection in self._connections.values():
            if connection.errlog is not None:  # its relay thread sees the end of the pipe
                with contextlib.suppress(OSError):
                    connection.errlog.close()

    async def _stop(self) -> None:
        """Each supervisor leaves its session (the transport closes a stdio server's stdin, then
        terminates and kills its process group); one that does not within
        ``_ORDERLY_CLOSE_S`` (stuck connecting, or listing a slow server's tools) is
        cancelled, which unwinds its session the same way."""
        for connection in self._connections.values():
            connection.closing = True
            connection.poke()
        tasks = [c.task for c in self._connections.values()
                 if c.task is not None and not c.task.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=_ORDERLY_CLOSE_S)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=_CLOSE_WAIT_S)
