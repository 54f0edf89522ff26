"""The roster a server serves, kept current when the MCP gateway adds or disables tools.

When: a server that serves the default roster (no ``--enable``) on a host with a gateway.
A tool an upstream server lists after the start (``notifications/tools/list_changed``, or a
server reached late) is registered by the host (``Host.add_gateway_tools``); this recomputes
the served roster, swaps what ``tools/list`` answers and what ``tools/call`` serves, and tells
each client that listed the tools (``notifications/tools/list_changed``, advertised as the
``tools.listChanged`` capability). A tool the gateway disables (its upstream changed it) is
withheld from ``tools/list`` the same way, and the clients are told; it stays registered, and
its calls are refused at once, before any approval (the pipeline's ``withdrawn``, D452). Why
only then: ``--enable`` names exactly the tools an operator chose, so nothing is added to it
(a tool disabled before it starts is withheld from it too); and a pin fixes a version, not a
set of names.

The sessions' runs of such a server name no tools (``enabled_tools`` None: the default
roster, read from the registry at each call), so step 2 of the pipeline and ``tools/list``
agree by construction here too, before and after a change; a withheld tool is the one
difference, and no call of it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
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
                 live: bool, serve: Callable[[Mapping[str, Registered]], None],
                 withheld: Callable[[], Collection[str]] = frozenset) -> None:
        #: False: fixed for the life of the process (``--enable``, or no gateway).
        self.live = live
        self._pins = dict(pins)
        #: Told the roster's tools by name whenever it changes (``ToolCalls.serve``).
        self._serve = serve
        #: The names not listed now, though served (``Gateway.disabled_tools``).
        self._withheld = withheld
        #: The roster served (what ``tools/call`` gates), withheld tools included.
        self._roster = list(roster)
        listed = self._listed()
        self.listing = list_tools_result(listed)
        self.names = [r.spec.name for r in listed]
        self._lock = threading.Lock()
        #: Serializes ``changed`` and ``withdrawn`` (the gateway's listing thread, and
        #: ``build_server`` once), and the size of the registry last served: registries only
        #: grow, so an older one arriving late is not served over a newer one.
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
            if [r.spec.name for r in roster] != [r.spec.name for r in self._roster]:
                self._serve({r.spec.name: r for r in roster})
                self._roster = roster
            told = self._relisted()
        if told:
            self._tell()

    def withdrawn(self, names: Sequence[str]) -> None:
        """The gateway disabled ``names`` (on its listing thread): list the roster without
        them, and tell every client that listed the tools."""
        if not self.live:
            return
        with self._changing:
            told = self._relisted()
        if told:
            self._tell()

    def _listed(self) -> list[Registered]:
        """The roster served, less the tools withheld now."""
        withheld = self._withheld()
        return [r for r in self._roster if r.spec.name not in withheld]

    def _relisted(self) -> bool:
        """Swap in the listing of the roster as it is now; whether it changed. Under
        ``_changing``."""
        listed = self._listed()
        names = [r.spec.name for r in listed]
        if names == self.names:
            return False
        self.listing, self.names = list_tools_result(listed), names
        return True

    def _tell(self) -> None:
        get_logger().info("mcp.serve.tools_changed", tools=len(self.names))
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
