"""The roster a server serves, kept current when the MCP gateway adds tools while it runs.

When: a server that serves the default roster (no ``--enable``) on a host with a gateway.
A tool an upstream server lists after the start (``notifications/tools/list_changed``, or a
server reached late) is registered by the host (``Host.add_gateway_tools``); this recomputes
the served roster, swaps what ``tools/list`` answers and what ``tools/call`` serves, and tells
each client that listed the tools (``notifications/tools/list_changed``, advertised as the
``tools.listChanged`` capability). Why only then: ``--enable`` names exactly the tools an
operator chose, so nothing is added to it; and a pin fixes a version, not a set of names.

The sessions' runs of such a server name no tools (``enabled_tools`` None: the default
roster, read from the registry at each call), so step 2 of the pipeline and ``tools/list``
agree by construction here too, before and after a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mcp.types as types
from mcp.server import ServerRequestContext

from toolhost._composition import Registered, Registry, get_logger
from toolhost._mcp.definitions import list_tools_result, served_roster
from toolhost._mcp.sessions import session_key

__all__ = ["ServedRoster"]


class ServedRoster:
    """What ``tools/list`` answers, and who to tell when it changes."""

    def __init__(self, roster: Sequence[Registered], *, pins: Mapping[str, str],
                 live: bool, serve: Callable[[Mapping[str, Registered]], None]) -> None:
        #: False: fixed for the life of the process (``--enable``, or no gateway).
        self.live = live
        self._pins = dict(pins)
        #: Told the roster's tools by name whenever it changes (``ToolCalls.serve``).
        self._serve = serve
        self.listing = list_tools_result(roster)
        self.names = [r.spec.name for r in roster]
        self._lock = threading.Lock()
        #: Serializes ``changed`` (the gateway's listing thread, and ``build_server`` once),
        #: and the size of the registry last served: registries only grow, so an older one
        #: arriving late is not served over a newer one.
        self._changing = threading.Lock()
        self._served_size = 0
        #: The serving loop, once a request ran on it; where notifications are sent from.
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Per client connection that listed the tools: its session, to notify.
        self._listening: dict[Any, Any] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def listed(self, ctx: ServerRequestContext[Any, Any]) -> types.ListToolsResult:
        """``tools/list``: the listing now; the client is told when it changes."""
        if self.live:
            self._loop = asyncio.get_running_loop()
            key = session_key(ctx.request, ctx.protocol_version)
            with self._lock:
                self._listening[key] = ctx.session
        return self.listing

    def ended(self, key: Any) -> None:
        """A transport session ended: it is not told of changes any more."""
        with self._lock:
            self._listening.pop(key, None)

    def changed(self, registry: Registry) -> None:
        """The host's registry gained tools (on the gateway's thread): serve the default
        roster as it is now, and tell every client that listed the tools."""
        if not self.live:
            return
        with self._changing:
            if len(registry) < self._served_size:
                return
            self._served_size = len(registry)
            roster = served_roster(registry, None, self._pins)
            names = [r.spec.name for r in roster]
            if names == self.names:
                return
            self._serve({r.spec.name: r for r in roster})
            self.listing, self.names = list_tools_result(roster), names
        get_logger().info("mcp.serve.tools_changed", tools=len(names))
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
                loop.call_soon_threadsafe(self._notify_all)

    def _notify_all(self) -> None:
        with self._lock:
            sessions = list(self._listening.values())
        for session in sessions:
            task = asyncio.get_running_loop().create_task(_notify(session))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)


async def _notify(session: Any) -> None:
    # A client gone meanwhile (its stream closed) is no one to tell.
    with contextlib.suppress(Exception):
        await session.send_tool_list_changed()
