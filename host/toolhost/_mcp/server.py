"""``toolhost serve``: the registry over the Model Context Protocol, on the SDK's low-level server.

When: ``toolhost serve`` (stdio, for a desktop client that spawns it) or ``toolhost serve
--http 127.0.0.1:PORT`` (streamable HTTP). What: ``tools/list`` answers the served roster's
definitions (built once); ``tools/call`` runs the full pipeline under the session's run. Why
the low-level ``Server`` and not ``MCPServer``: our tools are data (ToolSpecs with their own
schemas and validators), not decorated Python functions, and the low-level server lets the
pipeline, not the SDK, validate arguments and render failures.

stdout is the transport: nothing here prints to it. toolhost's structlog events and the SDK's
stdlib logging both go to stderr, and while serving stdio the SDK points fd 1 at stderr, so
even a stray ``print`` in a plugin cannot corrupt a frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import sys
from collections.abc import Iterable
from typing import Any

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from toolhost import __version__
from toolhost._cli.exit_codes import ExitCode
from toolhost._composition import Host
from toolhost._mcp.calls import ToolCalls
from toolhost._mcp.config import ConfigError, ServeConfig
from toolhost._mcp.definitions import UnknownServedTool, list_tools_result, served_roster
from toolhost._mcp.frames import FrameErrorReplies
from toolhost._mcp.results import internal_error_result
from toolhost._mcp.sessions import Sessions, session_key
from toolhost._mcp.transport import stdio_streams
from toolhost._pipeline.log import get_logger
from toolhost._registration.refusals import Registered

__all__ = ["build_server", "parse_http_address", "serve", "tracing_configured"]

SERVER_NAME = "toolhost"

INSTRUCTIONS = (
    "Tools from the toolhost registry; every call runs through its execution pipeline. "
    "A failed call returns isError with a fixed message you can act on. A call that writes to "
    "the outside world may need a person's approval: you may be asked to confirm it, or the "
    "result says it is awaiting an operator's approval; after approval, call the tool again "
    "with the same arguments to get its result."
)

_LOOPBACK_NAMES = frozenset({"localhost"})


def build_server(host: Host, roster: Iterable[Registered], config: ServeConfig) -> (
    tuple[Server[Any], Sessions]
):
    """The low-level SDK server for this roster, and the sessions its calls run under."""
    roster = list(roster)
    listing = list_tools_result(roster)
    sessions = Sessions(host, config.principal, [r.spec.name for r in roster],
                        workspace=config.workspace)
    calls = ToolCalls(host, {r.spec.name: r for r in roster}, config)
    log = get_logger()

    async def on_list_tools(ctx: ServerRequestContext[Any, Any],
                            params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing

    async def on_call_tool(ctx: ServerRequestContext[Any, Any],
                           params: types.CallToolRequestParams) -> (
            types.CallToolResult | types.InputRequiredResult):
        try:
            return await calls.call(ctx, sessions.get(session_key(ctx.request)), params)
        except MCPError:
            raise  # the protocol's error shape, deliberately (a tool not served here)
        except Exception as exc:
            # The SDK would answer str(exc) as a JSON-RPC error; the model reads the static
            # message instead, and the operator the exception, on stderr.
            log.error("mcp.call.failed", tool=params.name, exception=type(exc).__name__,
                      error=str(exc))
            return internal_error_result()

    server: Server[Any] = Server(
        SERVER_NAME, version=__version__, title="toolhost", instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools, on_call_tool=on_call_tool,
    )
    if not tracing_configured():
        # The SDK's OpenTelemetry middleware opens a span per message; with no tracer provider
        # configured every span is a no-op that still costs ~60 µs a request (bench_mcp.py).
        server.middleware = [m for m in server.middleware
                             if type(m).__name__ != "OpenTelemetryMiddleware"]
    return server, sessions


def tracing_configured() -> bool:
    """Whether an OpenTelemetry tracer provider has been installed (by ``opentelemetry-instrument``
    or the operator's own setup) before the server starts; the API's default proxy means none."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def parse_http_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) on a loopback address.

    :raises ValueError: with the one line the operator reads.
    """
    bind, sep, port_text = value.rpartition(":")
    if not sep or not bind or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"--http expects HOST:PORT, e.g. 127.0.0.1:8765, not {value!r}")
    bind = bind[1:-1] if bind.startswith("[") and bind.endswith("]") else bind
    loopback = bind in _LOOPBACK_NAMES
    if not loopback:
        try:
            loopback = ipaddress.ip_address(bind).is_loopback
        except ValueError:
            loopback = False
    if not loopback:
        raise ValueError(
            f"--http binds a loopback address only (127.0.0.1, ::1 or localhost), not {bind!r}: "
            "the server has no authentication")
    return bind, int(port_text)


def _operator(message: str) -> None:
    print(f"toolhost: {message}", file=sys.stderr)


def _configure_stdlib_logging(level: str) -> None:
    # The SDK, uvicorn and starlette log through the standard library; to stderr, never stdout.
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(logging.getLevelNamesMapping().get(level.upper(), logging.WARNING))


class _Terminated(Exception):
    """SIGTERM arrived: the transport has stopped (or is to stop) and ``serve`` returns 0."""


async def _serve_stdio(server: Server[Any], on_loop: bool) -> None:
    # SIGTERM (a client's second step after closing stdin) cancels the serving task on the
    # loop, so in-flight calls record their cancellation and the runs end, instead of the
    # process dying mid-write.
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        if task is not None:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        async with stdio_streams(on_loop=on_loop) as (read_stream, write_stream):
            await server.run(FrameErrorReplies(read_stream, write_stream), write_stream,
                             server.create_initialization_options())
    except asyncio.CancelledError:
        raise _Terminated from None


async def _serve_http(server: Server[Any], bind: str, port: int, level: str) -> None:
    import uvicorn  # deferred: stdio serving never needs the web stack

    # DNS-rebinding protection comes on for a loopback host (the SDK's default).
    app = server.streamable_http_app(host=bind)
    config = uvicorn.Config(app, host=bind, port=port, log_config=None, access_log=False,
                            log_level=level.lower(), lifespan="on")
    # uvicorn shuts down gracefully on SIGTERM, then re-raises it under the handler it found,
    # which is this one: the re-raise ends ``serve`` cleanly instead of killing the process.
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        await uvicorn.Server(config).serve()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated


def serve(host: Host, *, http: str | None = None, enable: Iterable[str] | None = None) -> int:
    """Serve ``host``'s tools until the client goes away (stdio) or the process is stopped.

    :param http: ``HOST:PORT`` for streamable HTTP on a loopback address; None for stdio.
    :param enable: serve exactly these tool names; None for the default roster.
    :return: the exit code: 0 after a clean end, 2 for a bad flag or setting, 1 when the
        transport could not start (the port is taken, say).
    """
    try:
        roster = served_roster(host.registry, enable)
    except UnknownServedTool as exc:
        _operator(f"--enable: no tool {exc.args[0]!r} is registered (toolhost tools lists them)")
        return ExitCode.USAGE
    try:
        config = ServeConfig.from_settings(host.settings, roster)
        address = parse_http_address(http) if http is not None else None
    except (ConfigError, ValueError) as exc:
        _operator(str(exc))
        return ExitCode.USAGE
    level = host.settings.get("TOOLHOST_LOG_LEVEL") or "warning"
    _configure_stdlib_logging(level)
    host.pipeline  # noqa: B018 - composed now: a bad database or policy stops the start
    server, sessions = build_server(host, roster, config)
    log = get_logger()
    log.info("mcp.serve.started", transport="http" if address else "stdio",
             tools=[r.spec.name for r in roster], principal=config.principal.id,
             scopes=sorted(config.principal.scopes))
    try:
        if address is None:
            asyncio.run(_serve_stdio(server, config.loop_stdio))
        else:
            asyncio.run(_serve_http(server, *address, level))
    except _Terminated:
        log.info("mcp.serve.terminated")
    except SystemExit as exc:  # uvicorn exits 1 when it cannot bind
        _operator(f"the HTTP transport did not start on {http}")
        return ExitCode.FAILED if exc.code else ExitCode.OK
    finally:
        sessions.close()
        log.info("mcp.serve.stopped")
    return ExitCode.OK
