"""``toolhost serve``: the registry over the Model Context Protocol, on the SDK's low-level server.

When: ``toolhost serve`` (stdio, for a desktop client that spawns it) or ``toolhost serve
--http 127.0.0.1:PORT`` (streamable HTTP). What: ``tools/list`` answers the served roster's
definitions (built once); ``tools/call`` runs the full pipeline under the session's run. Why
the low-level ``Server`` and not ``MCPServer``: our tools are data (ToolSpecs with their own
schemas and validators), not decorated Python functions, and the low-level server lets the
pipeline, not the SDK, validate arguments and render failures.

stdout is the transport: nothing here prints to it. toolhost's structlog events, the SDK's
stdlib logging and the operator's lines (where it serves, why it could not) all go to stderr,
and while serving stdio fd 1 points at stderr (``transport``), so even a stray ``print`` in a
plugin cannot corrupt a frame. SIGTERM, SIGINT (Ctrl-C) and SIGHUP (the client's terminal
closing) stop either transport gracefully.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import functools
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from toolhost import __version__
from toolhost._composition import (
    Host,
    HostAddress,
    Recovered,
    RecoveryAction,
    Registered,
    ToolhostError,
    UsageError,
    get_logger,
    parse_pins,
)
from toolhost._mcp.calls import CANCEL_GRACE_S, ToolCalls
from toolhost._mcp.config import (
    EVERY_ADDRESS,
    HttpConfig,
    ServeConfig,
    authority,
    http_config,
    pins_setting,
)
from toolhost._mcp.definitions import UnknownServedTool, served_roster
from toolhost._mcp.descriptors import (
    OncePerInterval,
    QuietConnectionNoise,
    QuietSessionLimit,
    quiet_out_of_descriptors,
    raise_limit,
)
from toolhost._mcp.frames import FrameErrorReplies
from toolhost._mcp.http_front import BUSY_MESSAGE, handler_slot, host_allowed
from toolhost._mcp.lifecycle import OneInitialize
from toolhost._mcp.progress import request_progress
from toolhost._mcp.resources import RunResources
from toolhost._mcp.results import internal_error_result
from toolhost._mcp.roster import ServedRoster
from toolhost._mcp.sessions import SessionEnds, Sessions
from toolhost._mcp.transport import in_flight, stdio_streams

if TYPE_CHECKING:
    from toolhost._mcp.http_routes import Router

__all__ = ["build_server", "listen_sockets", "parse_http_address", "serve", "tracing_configured"]

SERVER_NAME = "toolhost"

INSTRUCTIONS = (
    "Tools from the toolhost registry; every call runs through its execution pipeline. "
    "A failed call returns isError with a fixed message you can act on. A call that writes to "
    "the outside world may need a person's approval: you may be asked to confirm it, or the "
    "result says it is awaiting an operator's approval; after approval, call the tool again "
    "with the same arguments to get its result. Files a tool exports or generates come back as "
    "resource links; the user's client can read them."
)

_LOOPBACK_NAMES = frozenset({"localhost"})

#: The listen backlog of the HTTP transport's sockets (uvicorn's default).
_BACKLOG = 2048


def build_server(host: Host, roster: Iterable[Registered], config: ServeConfig, *,
                 live: bool = False) -> tuple[Server[Any], Sessions]:
    """The low-level SDK server for this roster, and the sessions its calls run under.
    ``live``: the roster is the default one and follows the tools the MCP gateway adds while
    serving (``roster.ServedRoster``); its sessions' runs name no tools."""
    roster = list(roster)
    sessions = Sessions(host, config.principal,
                        None if live else [r.spec.name for r in roster],
                        workspace=config.workspace, pins=config.pins,
                        run_timeout_s=config.run_timeout_s)
    calls = ToolCalls(host, {r.spec.name: r for r in roster}, config)
    gateway = host.gateway
    served = ServedRoster(roster, pins=config.pins, live=live, serve=calls.serve,
                          withheld=gateway.disabled_tools if gateway is not None else frozenset)
    if live:
        host.on_registry_changed(served.changed)
        if gateway is not None:
            gateway.on_tools_disabled(served.withdrawn)
        # What the gateway added since the roster was computed (the stores opened, the
        # issuer's metadata fetched meanwhile): listed from the first tools/list.
        served.changed(host.registry)

        async def forget(key: str) -> None:
            served.ended(key)

        sessions.on_end.append(forget)
    resources = RunResources(host)
    log = get_logger()

    async def on_list_tools(ctx: ServerRequestContext[Any, Any],
                            params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return served.listed(ctx)

    async def on_call_tool(ctx: ServerRequestContext[Any, Any],
                           params: types.CallToolRequestParams) -> (
            types.CallToolResult | types.InputRequiredResult):
        # Over HTTP the call holds its principal's slot until it ends, not only while its
        # POST is open: a client that drops the POST has not cancelled the call (D366).
        slot = handler_slot(ctx.request)
        if slot is None:
            raise MCPError(code=-32000, message=BUSY_MESSAGE)
        try:
            with slot:
                async with request_progress(ctx):  # notifications/progress, if asked
                    return await calls.call(ctx, sessions.of(ctx), params)
        except MCPError:
            raise  # the protocol's error shape, deliberately (a tool not served here)
        except Exception as exc:
            # The SDK would answer str(exc) as a JSON-RPC error; the model reads the static
            # message instead, and the operator the exception, on stderr, if it can be
            # written (toolhost's log never raises; a logger configured otherwise might). The
            # name is the caller's: its first 200 characters, as a refusal's detail keeps.
            with contextlib.suppress(Exception):
                log.error("mcp.call.failed", tool=params.name[:200],
                          exception=type(exc).__name__, error=str(exc))
            return internal_error_result()

    async def on_list_resources(ctx: ServerRequestContext[Any, Any],
                                params: types.PaginatedRequestParams | None) -> (
            types.ListResourcesResult):
        return await resources.list(sessions.of(ctx).run)

    async def on_read_resource(ctx: ServerRequestContext[Any, Any],
                               params: types.ReadResourceRequestParams) -> (
            types.ReadResourceResult):
        return await resources.read(sessions.of(ctx).run, str(params.uri))

    server = _Server(
        SERVER_NAME, version=__version__, title="toolhost", instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools, on_call_tool=on_call_tool,
        on_list_resources=on_list_resources, on_read_resource=on_read_resource,
    )
    server.tools_change = live
    if not tracing_configured():
        # The SDK's OpenTelemetry middleware opens a span per message; with no tracer provider
        # configured every span is a no-op that still costs ~60 µs a request (bench_mcp.py).
        server.middleware = [m for m in server.middleware
                             if type(m).__name__ != "OpenTelemetryMiddleware"]
    # A repeated initialize is refused before anything else of the session sees it.
    server.middleware.append(OneInitialize())
    server.middleware.append(SessionEnds(sessions))
    return server, sessions


def _follows_gateway(host: Host, enable: Iterable[str] | None,
                     roster: Iterable[Registered]) -> bool:
    """Whether the served roster follows the tools the gateway adds: the default roster (no
    ``--enable``) on a host with a gateway, every pinned version in it default-enabled (so
    that a run naming no tools may call exactly what is listed)."""
    return host.gateway is not None and enable is None and all(
        r.tool.default_enabled for r in roster)


class _Server(Server[Any]):
    """The SDK's low-level server, advertising ``tools.listChanged`` when the roster follows
    the gateway (on every transport: the HTTP one builds its options itself)."""

    tools_change = False

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        if notification_options is None and self.tools_change:
            notification_options = NotificationOptions(tools_changed=True)
        return super().create_initialization_options(
            notification_options, experimental_capabilities, extensions)


def tracing_configured() -> bool:
    """Whether an OpenTelemetry tracer provider has been installed (by ``opentelemetry-instrument``
    or the operator's own setup) before the server starts; the API's default proxy means none."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _port_number(text: str) -> bool:
    # ASCII digits only: str.isdigit() also says yes to "٣" and "²".
    return text.isascii() and text.isdigit() and len(text) <= 5 and 0 < int(text) < 65536


def parse_http_address(value: str, *, authenticated: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6): a loopback address, or any address when
    requests are ``authenticated`` (a token file or an issuer is configured).

    :raises ValueError: with the one line the operator reads.
    """
    bind, sep, port_text = value.rpartition(":")
    if not sep or not bind or not _port_number(port_text):
        raise ValueError(f"--http expects HOST:PORT, e.g. 127.0.0.1:8765, not {value!r}")
    bind = bind[1:-1] if bind.startswith("[") and bind.endswith("]") else bind
    loopback = bind in _LOOPBACK_NAMES
    if not loopback:
        try:
            loopback = ipaddress.ip_address(bind).is_loopback
        except ValueError:
            loopback = False
    if not loopback and not authenticated:
        raise ValueError(
            f"--http binds a loopback address only (127.0.0.1, ::1 or localhost), not {bind!r}, "
            "unless requests are authenticated: set TOOLHOST_HTTP_TOKENS_FILE or "
            "TOOLHOST_HTTP_ISSUER")
    return bind, int(port_text)


def _operator(message: str) -> None:
    print(f"toolhost: {message}", file=sys.stderr)


def _configure_stdlib_logging(level: str) -> None:
    # The SDK, uvicorn, starlette and httpx log through the standard library. Their records
    # are written as toolhost's own lines: through its redaction (httpx names each request's
    # URL, a gateway upstream's password or API key with it), in its format, to stderr (never
    # stdout), and never raising into the library that logged.
    class ThroughToolhostLog(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                fields: dict[str, str] = {"logger": record.name}
                if record.exc_info:
                    fields["exception"] = logging.Formatter().formatException(record.exc_info)
                if record.stack_info:
                    fields["stack"] = record.stack_info
                # structlog knows the five standard levels only (a library may use others).
                number = min(logging.CRITICAL, max(logging.DEBUG, record.levelno // 10 * 10))
                get_logger(**fields).log(number, record.getMessage())
            except Exception:
                pass  # not logging's own report: it prints the record's arguments unredacted

    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(ThroughToolhostLog())
    root.setLevel(logging.getLevelNamesMapping().get(level.upper(), logging.WARNING))
    # At debug these write each MCP frame whole: every tool's result (a file's text, a mail,
    # a command's output), a gateway upstream's answers. Held at info, unless the process set
    # one's level itself before serving (a sitecustomize: docs/observability.md).
    for name in _PAYLOAD_LOGGERS:
        held = logging.getLogger(name)
        if held.level == logging.NOTSET or name in _HELD:
            held.setLevel(max(logging.INFO, root.level))
            _HELD.add(name)


#: The libraries' loggers that write whole MCP frames at debug (``_configure_stdlib_logging``):
#: sse_starlette's each event it sends, the SDK's clients each message (gateway upstreams),
#: its legacy SSE server each one it receives and sends.
_PAYLOAD_LOGGERS = ("sse_starlette", "mcp.client.streamable_http", "mcp.client.sse",
                    "mcp.server.sse")
#: Those whose level is toolhost's, not the process's own: set again at each serve's start.
_HELD: set[str] = set()


class _Terminated(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived: the transport has stopped (or is to stop)
    gracefully, and ``serve`` returns 0 for SIGTERM (a supervisor's ordinary stop), 130 for
    SIGINT (Ctrl-C) and 129 for SIGHUP: 128 + the signal's number, as a shell reports it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals that stop ``serve`` gracefully. SIGHUP is what a stdio server gets when the
#: terminal of its client (or of ``serve --http`` in an ssh or tmux pane) closes.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _stop_signals() -> tuple[signal.Signals, ...]:
    """``_STOP_SIGNALS``, but SIGHUP when the process was started ignoring it (``nohup``): it
    stays ignored, as it does for ``call`` and ``approve`` (D337)."""
    return tuple(s for s in _STOP_SIGNALS
                 if s != signal.SIGHUP or signal.getsignal(s) is not signal.SIG_IGN)


async def _recovering(host: Host, interval: float | None, serving: Awaitable[None]) -> None:
    """``serving``, while rows whose process died are settled every ``interval`` seconds."""
    if interval is None:
        await serving
        return
    recovery = asyncio.create_task(recover_every(host, interval))
    try:
        await serving
    finally:
        recovery.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await recovery


async def recover_every(host: Host, interval: float) -> None:
    """Settle rows whose process died, every ``interval`` seconds, until cancelled. A store
    that cannot be reached is logged and tried again next time: serving goes on.

    Each pass runs on a worker thread of its own (``Host.recover_interrupted``): its store
    calls block (with a PostgreSQL server gone, each waits out the pool's timeout), and on the
    loop they would stall every call being served meanwhile. Cancelled mid-pass (the server
    stopping), the pass begins no further store call, and this waits for the one under way,
    bounded by the store's own timeout, so that the store is never closed under it; the rows
    settled by then are logged as any pass's are.
    """
    log = get_logger()
    loop = asyncio.get_running_loop()
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolhost-recover")
    stopping = threading.Event()
    try:
        while True:
            await asyncio.sleep(interval)
            # In a copy of this task's context, as asyncio.to_thread runs a function.
            recovery = loop.run_in_executor(worker, functools.partial(
                contextvars.copy_context().run, host.recover_interrupted, stopping))
            try:
                # asyncio.wait, unlike an await of the future, leaves it be when cancelled.
                await asyncio.wait([recovery])
            except asyncio.CancelledError:
                stopping.set()
                await asyncio.wait([recovery])
                _log_pass(log, recovery)
                raise
            _log_pass(log, recovery)
    finally:
        worker.shutdown(wait=False)  # idle by now, unless cancelled again while it waited


def _log_pass(log: Any, recovery: asyncio.Future[list[Recovered]]) -> None:
    """What a finished pass of ``recover_every`` did, for the operator."""
    exc = recovery.exception()
    if exc is not None:
        log.warning("mcp.serve.recover_failed", error=type(exc).__name__)
        return
    settled = [r for r in recovery.result() if r.action is not RecoveryAction.LEFT]
    if settled:
        log.info("mcp.serve.recovered", rows=[r.invocation_id for r in settled],
                 actions=[r.action.value for r in settled])


async def _serve_stdio(server: Server[Any], on_loop: bool, serving: str,
                       max_unanswered: int) -> None:
    # SIGTERM (a client's second step after closing stdin), SIGINT (Ctrl-C) and SIGHUP (its
    # terminal closed) cancel the serving task on the loop, so in-flight calls record their
    # cancellation and the runs end, instead of the process dying mid-write.
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def stop(signum: int) -> None:
        received.append(signum)
        if task is not None:
            task.cancel()

    for signum in _stop_signals():
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop, signum)
    try:
        async with stdio_streams(on_loop=on_loop) as (read_stream, write_stream):
            _operator(serving)
            # At most max_unanswered requests unanswered (D367); an unreadable frame is
            # answered on the wire itself, outside that count.
            reads, writes = in_flight(read_stream, write_stream, max_unanswered)
            await server.run(FrameErrorReplies(reads, write_stream), writes,
                             server.create_initialization_options())
    except asyncio.CancelledError:
        # Without a handler of ours (no loop signal handlers, as on Windows), the cancellation
        # is asyncio.run's answer to Ctrl-C.
        raise _Terminated(received[0] if received else signal.SIGINT) from None


async def _serve_http(server: Server[Any], sockets: list[socket.socket], bind: str,
                      level: str, serving: str, http: HttpConfig, host: Host,
                      sessions: Sessions) -> None:
    import uvicorn  # deferred: stdio serving never needs the web stack
    from mcp.server.transport_security import TransportSecuritySettings

    from toolhost._mcp.http_front import FrontDoor
    from toolhost._mcp.http_protocol import bounded_h11

    # The front door checks Host and Origin for every bind; the SDK's own check (on only for
    # three exact loopback spellings) is off, so the operator's allow-lists are the rule.
    mcp_app = server.streamable_http_app(
        host=bind, max_request_body_size=http.policy.max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=http.session_idle_s, max_sessions=http.max_sessions)
    router = await _router(host, http)
    if router is not None:
        sessions.on_end.append(router.closed)  # an idle session's route goes with it
    raised = raise_limit()
    if raised is not None:
        get_logger().info("http.descriptors.limit_raised", soft=raised[0], to=raised[1])
    loop = asyncio.get_running_loop()
    monotonic = functools.partial(host.deadline_in, 0)
    once = OncePerInterval(monotonic)
    quiet_out_of_descriptors(loop, once, get_logger())
    logging.getLogger("mcp.server.streamable_http_manager").addFilter(QuietSessionLimit(once))
    logging.getLogger("uvicorn.error").addFilter(QuietConnectionNoise(once))
    app = FrontDoor(mcp_app, http.policy, ready=host.ready, monotonic=monotonic,
                    abandoned=host.abandoned_bodies, router=router, once=once,
                    open_sessions=lambda: sessions.open_count,
                    open_sessions_of=sessions.open_of,
                    metrics=(host.telemetry.instruments.render
                             if host.telemetry is not None else None))
    cancel: Callable[[], None] = sessions.cancel
    if http.authenticates:
        app.inbox = inbox = _inbox(host, http, app)

        def cancel() -> None:  # the drain's time is up: MCP's calls and the inbox's
            sessions.cancel()
            inbox.cancel()
    # A connection cap, uvicorn's own short keep-alive and a deadline for each request's head:
    # an idle or half-sent connection does not hold a descriptor for long (a reverse proxy in
    # front is still the place for slow clients, and for a cap per client address). The
    # protocol is named, not uvicorn's "auto": h11 refuses a request whose headers pass 16 KiB,
    # while httptools, chosen whenever it happens to be installed, holds any amount of header
    # in memory before the front door sees the request (D326); no WebSocket library either,
    # whichever is installed: an upgrade is an HTTP request like any other (D328).
    config = uvicorn.Config(app, host=bind, log_config=None, access_log=False,
                            http=bounded_h11(http.head_timeout_s), ws="none",
                            log_level=level.lower(), lifespan="on",
                            timeout_graceful_shutdown=int(CANCEL_GRACE_S) + 1,
                            limit_concurrency=http.max_connections, timeout_keep_alive=5)
    # uvicorn shuts down gracefully on SIGTERM and SIGINT (and, through ``Draining``, SIGHUP),
    # then re-raises the signal under the handler it found, which is this one: the re-raise
    # ends ``serve`` cleanly instead of killing the process or leaving a KeyboardInterrupt to
    # unwind it.
    previous = {signum: signal.signal(signum, _raise_terminated) for signum in _stop_signals()}
    heartbeat = None if router is None else asyncio.create_task(router.heartbeat())
    try:
        _operator(serving)  # the sockets listen already, and a signal now stops it gracefully
        await _Draining(config, app, http.drain_s, cancel,
                        functools.partial(host.deadline_in, 0)).serve(sockets=sockets)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if router is not None and heartbeat is not None:
            heartbeat.cancel()
            # A beat already in its thread finishes first: it must not announce this host
            # again after it retired.
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await _retired(router)


def _inbox(host: Host, http: HttpConfig, front: Any) -> Any:
    """The approvals inbox under ``/ui/`` (D314), its logins signed with
    ``TOOLHOST_HTTP_UI_SECRET``: hosts that share it share logins. Without it, a secret of this
    process's own: a login is good on this host until it stops."""
    from toolhost._mcp.inbox.app import Inbox
    from toolhost._mcp.inbox.login import Logins

    # Unset: two of the host's random ids (uuid4-like, 122 random bits each). Set, it is at
    # least UI_SECRET_BYTES long: ``http_config`` refused a shorter one at the start.
    secret = http.ui_secret or bytes.fromhex(host.new_id() + host.new_id())
    logins = Logins(secret, http.policy.tokens, lambda: host.clock.now().timestamp(),
                    host.new_id, ended=host.ended_logins, issuer=http.issuer)
    return Inbox(host, logins, front.verify, admit=front.call_slot,
                 body_timeout_s=http.policy.body_timeout_s, oauth=http.inbox_oauth,
                 public_https=any((host.settings.get(name) or "").strip().startswith(
                     "https://") for name in ("TOOLHOST_HTTP_AUDIENCE",
                                              "TOOLHOST_HTTP_ADVERTISE_URL")),
                 post=host.post_form)


async def _router(host: Host, http: HttpConfig) -> Router | None:
    """This host's place among the hosts of its record (several hosts on one PostgreSQL
    database): announced before the first request, so a session opened here is reachable from
    every host at once; None for a host on its own."""
    import httpx

    from toolhost._mcp.http_routes import QuietUpstreamLost, Router

    table = host.route_table()
    if table is None:
        return None
    assert http.advertise_url is not None  # serve refuses to start without it
    # No read timeout to speak of: a forwarded SSE stream may be quiet for long. No bound on
    # connections: each forwarded GET stream holds one for its session's life, and a pool
    # that ran out would make live sessions look gone.
    client = host.async_http_client(
        timeout=httpx.Timeout(30.0, read=3600.0),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=100))
    logging.getLogger("uvicorn.error").addFilter(QuietUpstreamLost())
    router = Router(table, HostAddress(host.new_id(), http.advertise_url), client,
                    monotonic=lambda: host.deadline_in(0))
    await router.announce()
    return router


async def _retired(router: Router) -> None:
    """Off the table: its sessions end with it (their clients open new ones elsewhere)."""
    try:
        await router.retire()
    except Exception as exc:  # the database is away: the heartbeat's silence retires it
        get_logger().warning("http.routes.retire_failed", error=type(exc).__name__)
    await router.close()


def _draining_server() -> type[Any]:
    import uvicorn

    class Draining(uvicorn.Server):
        """uvicorn's server, stopping in two steps: at SIGTERM (or Ctrl-C, or SIGHUP) the
        front door stops taking calls and sessions while the calls in flight finish, for up to
        the drain time; then uvicorn's own shutdown, which cancels what is left (each call
        records its cancellation: no row is left running). A second signal stops at once."""

        def __init__(self, config: Any, front: Any, drain_s: float,
                     cancel: Callable[[], None], monotonic: Callable[[], float]) -> None:
            super().__init__(config)
            self._monotonic = monotonic
            self._front = front
            self._drain_s = drain_s
            self._cancel = cancel
            self._loop: asyncio.AbstractEventLoop | None = None

        async def serve(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().serve(sockets=sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn captures SIGINT and SIGTERM only: SIGHUP (unless ignored) is captured
            # here the same way, and given back before uvicorn's exit re-raises what it
            # captured, so that the re-raise reaches ``serve``'s own handler as theirs do.
            with super().capture_signals():
                if threading.current_thread() is not threading.main_thread() or (
                        signal.SIGHUP not in _stop_signals()):
                    yield
                    return
                before = signal.signal(signal.SIGHUP, self.handle_exit)
                try:
                    yield
                finally:
                    signal.signal(signal.SIGHUP, before)

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self._front.draining or self._loop is None:
                super().handle_exit(sig, frame)
                return
            self._front.draining = True
            get_logger().info("mcp.serve.draining", calls=self._front.calls_in_flight)
            self._loop.call_soon_threadsafe(
                lambda: asyncio.ensure_future(self._drain(sig, frame)))

        async def _drain(self, sig: int, frame: Any) -> None:
            deadline = self._monotonic() + self._drain_s
            while self._front.calls_in_flight and self._monotonic() < deadline:
                await asyncio.sleep(0.05)
            if self._front.calls_in_flight:
                # Time is up: each call left is cancelled through its run, and records and
                # answers its cancellation, before uvicorn closes the connections.
                self._cancel()
                grace = self._monotonic() + CANCEL_GRACE_S
                while self._front.calls_in_flight and self._monotonic() < grace:
                    await asyncio.sleep(0.05)
            super().handle_exit(sig, frame)

    return Draining


def _Draining(config: Any, front: Any, drain_s: float,  # noqa: N802 - a class, made late
              cancel: Callable[[], None], monotonic: Callable[[], float]) -> Any:
    return _draining_server()(config, front, drain_s, cancel, monotonic)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated(signum)


def listen_sockets(bind: str, port: int, *, any_address: bool = False) -> list[socket.socket]:
    """Sockets bound to, and listening on, each address ``bind`` names (``localhost`` may name
    two): loopback ones only, unless ``any_address`` (authenticated requests). Binding here
    rather than in uvicorn is what lets ``serve`` say why it could not listen in one line, and
    say it listens only once it does.

    :raises OSError: an address could not be bound (the port is taken, say).
    """
    addresses = dict.fromkeys(
        (family, address[:2])
        for family, _, _, _, address in socket.getaddrinfo(
            bind, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        if any_address or ipaddress.ip_address(address[0]).is_loopback)
    sockets: list[socket.socket] = []
    unavailable: OSError | None = None
    try:
        for family, address in addresses:
            # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections accepted from
            # a socket that says it is TCP, and without it Nagle held each SSE event on a
            # kept-alive connection for the client's delayed ACK (~40 ms a call).
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            if os.name == "posix":  # as asyncio and uvicorn do: restart while in TIME_WAIT
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                sock.close()
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise
                unavailable = exc  # that family is off on this machine (asyncio skips it too)
                continue
            sockets.append(sock)
            sock.listen(_BACKLOG)
        if not sockets:
            raise unavailable or OSError(errno.EADDRNOTAVAIL, f"{bind} has no loopback address")
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _why_not_listening(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "address already in use (another process holds that port)"
    reason = exc.strerror or str(exc)
    return reason[:1].lower() + reason[1:]


def _http_url(bind: str, port: int) -> str:
    return f"http://{authority(bind, port)}/mcp"


def _serving_at(tools: str, bind: str, port: int, allowed_hosts: Sequence[str],
                written: str = "TOOLHOST_HTTP_ALLOWED_HOSTS") -> str:
    """The start line. TOOLHOST_HTTP_ALLOWED_HOSTS replaces the defaults, the bound address
    included (D233), so a URL its own Host check answers 421 says which names it takes, and
    where the list was ``written`` (``Settings.written``)."""
    line = f"serving {tools} at {_http_url(bind, port)}"
    own = authority(bind, port)
    if bind not in EVERY_ADDRESS and not host_allowed(own, allowed_hosts):
        line += f" (for Host {', '.join(allowed_hosts)} only: {written} does not list {own})"
    return line


class ServeRefused(UsageError):
    """A flag or setting ``serve`` cannot serve with (the CLI exits 2); one line."""


class TransportNotStarted(ToolhostError):
    """The transport did not start: the port is taken, say (the CLI exits 1); one line."""


def serve(host: Host, *, http: str | None = None, enable: Iterable[str] | None = None,
          pins: Iterable[str] = ()) -> int:
    """Serve ``host``'s tools until the client goes away (stdio) or the process is stopped.

    Once serving, one line on stderr says where (``toolhost: serving N tools on stdio``, or
    ``... at http://HOST:PORT/mcp``).

    :param http: ``HOST:PORT`` for streamable HTTP on a loopback address; None for stdio.
    :param enable: serve exactly these tool names; None for the default roster.
    :param pins: ``NAME=VERSION`` items (``--pin``): serve that version under its name, over
        the pins of TOOLHOST_MCP_PINS.
    It returns the exit code: 0 after a clean end (the client closed stdin, or SIGTERM), 129
    after SIGHUP (the same graceful stop); it raises KeyboardInterrupt after Ctrl-C (SIGINT;
    the same graceful stop again, which the CLI exits 130 for).

    :raises UsageError: a bad flag or setting (``ServeRefused``, ``PinError``).
    :raises TransportNotStarted: the transport could not start (the port is taken, say).
    """
    try:
        pinned = {**parse_pins(pins_setting(host.settings),
                               source=host.settings.written("TOOLHOST_MCP_PINS")),
                  **parse_pins(pins, source="--pin")}
        roster = served_roster(host.registry, enable, pinned)
        live = _follows_gateway(host, enable, roster)
    except UnknownServedTool as exc:
        raise ServeRefused(f"--enable: no tool {exc.args[0]!r} is registered (toolhost tools "
                           "lists them)") from None
    http_settings = None
    try:
        config = ServeConfig.from_settings(
            host.settings, roster, pins=pinned,
            also_scopes=host.gateway.configured_scopes() if live and host.gateway else (),
            declared=host.declared_settings)
        address = None
        if http is not None:
            bind, port = parse_http_address(http, authenticated=True)
            http_settings = http_config(
                host.settings, bind, port, roster, fetch=host.fetch, post=host.post_form,
                now=lambda: host.clock.now().timestamp(), monotonic=lambda: host.deadline_in(0))
            address = parse_http_address(http, authenticated=http_settings.authenticates)
    except ValueError as exc:  # ConfigError, and the address's own
        raise ServeRefused(str(exc)) from None
    if http_settings is not None and http_settings.authenticates and config.workspace:
        # One directory for every session would be every person's files to every other
        # (D455): with people told apart, each run has a workspace of its own.
        raise ServeRefused(f"{host.settings.written('TOOLHOST_MCP_WORKSPACE')} gives every "
                           "session one directory, so with a token file or an issuer each "
                           "person would read and write the others' files: unset it (each run "
                           "then gets a workspace of its own), or serve that directory to one "
                           "person on stdio")
    level = host.settings.get("TOOLHOST_LOG_LEVEL") or "warning"
    _configure_stdlib_logging(level)
    host.open()  # composed now: a bad database or policy stops the start
    if http_settings is not None and http_settings.advertise_url is None and (
            host.route_table() is not None):
        advertise = host.settings.written_beside("TOOLHOST_HTTP_ADVERTISE_URL",
                                                 "TOOLHOST_DATABASE_URL")
        raise ServeRefused(f"serving on every address with a shared database: set {advertise} "
                           "to the URL the other hosts reach this one's MCP endpoint at "
                           "(http://10.0.0.5:8000/mcp)")
    # Rows left `running` by a dead process are settled once, before the first session can
    # start a call. Idempotent ones are not re-run here: nobody is waiting for them (D85).
    host.recover(rerun=False)
    server, sessions = build_server(host, roster, config, live=live)
    log = get_logger()
    for path, mode, fix in host.readable_by_others():  # said once a start, never changed
        log.warning("data.readable_by_others", path=str(path), mode=f"{mode:o}", fix=fix)
    log.info("mcp.serve.started", transport="http" if address else "stdio",
             tools=[r.spec.name for r in roster], principal=config.principal.id,
             scopes=sorted(config.principal.scopes))
    tools = f"{len(roster)} tool{'' if len(roster) == 1 else 's'}"
    try:
        if address is None:
            asyncio.run(_recovering(
                host, config.recover_interval_s,
                _serve_stdio(server, config.loop_stdio, f"serving {tools} on stdio",
                             config.max_unanswered)))
        else:
            assert http_settings is not None
            try:
                sockets = listen_sockets(*address, any_address=http_settings.authenticates)
            except OSError as exc:
                raise TransportNotStarted(
                    f"cannot listen on {http}: {_why_not_listening(exc)}") from None
            asyncio.run(_recovering(
                host, config.recover_interval_s,
                _serve_http(server, sockets, address[0], level,
                            _serving_at(tools, *address, http_settings.policy.allowed_hosts,
                                        host.settings.written("TOOLHOST_HTTP_ALLOWED_HOSTS")),
                            http_settings, host, sessions)))
    except _Terminated as stop:
        log.info("mcp.serve.terminated", signal=signal.Signals(stop.signum).name)
        if stop.signum == signal.SIGINT:
            raise KeyboardInterrupt from None  # Ctrl-C, however gracefully it stopped
        if stop.signum == signal.SIGHUP:
            # 128 + 1, as the CLI's other commands exit for it: the code is the caller's one
            # way to tell a hang-up from a supervisor's SIGTERM.
            return 128 + signal.SIGHUP
    except SystemExit as exc:  # uvicorn exits 1 when its startup fails
        if exc.code:
            raise TransportNotStarted(f"the HTTP transport did not start on {http}") from None
        _operator(f"the HTTP transport did not start on {http}")
    finally:
        sessions.close()
        log.info("mcp.serve.stopped")
    return 0
