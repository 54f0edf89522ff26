"""What the gateway's tests share (test_gateway.py, test_gateway_http.py, test_gateway_stdio.py): a
``toolhost serve`` to talk to over stdio, a bounded wait, and reading a tool result."""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

import mcp.types as types
from journeys.journey_support import free_port
from mcp import ClientSession, StdioServerParameters, stdio_client

__all__ = ["Served", "free_port", "meta", "port_open", "processes_with", "served", "text_of",
           "wait_for"]


def wait_for(predicate: Callable[[], bool], seconds: float = 20.0) -> bool:
    """Poll ``predicate`` until it holds; a loose safety bound, not a timing assertion."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class Served(Protocol):
    """What ``served`` needs of a test's harness: the server's environment and a directory
    for its stderr."""

    tmp_path: Path

    def env(self) -> dict[str, str]: ...


@contextlib.asynccontextmanager
async def served(gw: Served, **client: Any) -> AsyncIterator[ClientSession]:
    """An initialized SDK ClientSession on a fresh ``toolhost serve`` (stdio), in ``gw``'s
    environment (any harness with ``env()`` and ``tmp_path``: test_gateway_http's too)."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "toolhost._cli", "serve"], env=gw.env())
    with (gw.tmp_path / "serve.err").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, **client) as session:
            await session.initialize()
            yield session


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def meta(result: types.CallToolResult, key: str) -> Any:
    return (result.meta or {})[f"toolhost/{key}"]


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line names ``marker`` (zombies are gone already)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Another process's command line need not be UTF-8.
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                "utf-8", "replace")
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False
