"""The Upstreams port: the MCP servers the gateway puts behind the pipeline.

The adapter (``toolhost._adapters.mcp_upstream``) holds one client session per configured
server; the gateway's tools know only this port. A call is awaitable from any event loop (the
pipeline's, ``toolhost call``'s, a server's), and cancelling it cancels the upstream request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from toolhost._model.upstream import UpstreamResult, UpstreamStatus

__all__ = ["Upstreams"]


class Upstreams(Protocol):
    def start(self, timeout_s: float | None = None) -> None:
        """Connect to every server and list its tools, waiting at most ``timeout_s`` in all
        (None: the longest of the servers' ``connect_timeout_s``). A server that cannot be
        reached by then is left to reconnect in the background; it never stops the start."""
        ...

    def status(self) -> list[UpstreamStatus]:
        """Each server's state now, with its tools as last listed, in configuration order."""
        ...

    def on_tools_changed(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(server)`` each time a server's tools were listed: on each
        connection (the first included) and on ``notifications/tools/list_changed`` (at most
        once a second a server). On a thread of the adapter's, one listing at a time, never
        where its calls are served."""
        ...

    async def call(self, server: str, tool: str, arguments: Mapping[str, Any], *,
                   timeout_s: float,
                   progress: Callable[[float, float | None], None] | None = None,
                   ) -> UpstreamResult:
        """``tools/call`` on ``server``. Cancelling the awaiting task cancels the upstream
        request (``notifications/cancelled``). With ``progress``, the request asks for the
        server's progress, and each update's ``progress`` and ``total`` are handed to it (on
        the adapter's thread); the server's message is not.

        :raises UpstreamError: unreachable, connection lost, timed out, a protocol error, a
            JSON-RPC error answer, or a result too large to accept.
        """
        ...

    def close(self) -> None:
        """End every session and its subprocess, and the adapter's thread. Idempotent."""
        ...
