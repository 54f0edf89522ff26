"""The RouteTable port: which host an MCP session, or a sessionless run, lives on, when several
hosts serve one record behind a balancer that pins nothing.

A session's state is its host's: the SDK's streams, the run, the run's workspace files. So it
is never moved: a request that reaches another host is forwarded to the one it lives on
(``toolhost._mcp.http_routes``), and only the routes, the hosts' addresses and their
heartbeats are shared, here. A host that stops answering (no heartbeat for ``HOST_TIMEOUT_S``)
loses its sessions (a client starts a new one on the 404 the spec prescribes) and its
sessionless runs go to the first live host that asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

__all__ = ["RouteTable"]

if TYPE_CHECKING:
    from toolhost._model.routes import HostAddress


class RouteTable(Protocol):
    """Routes shared by the hosts of one record. Every method is safe from several hosts at
    once; times are the store's own clock, so the hosts' clocks need not agree."""

    def announce(self, host: HostAddress) -> None:
        """``host`` serves now (and is alive): at start and every HEARTBEAT_S. Routes of hosts
        gone for long are cleared on the way."""
        ...

    def retire(self, host_id: str) -> None:
        """The host stops serving: its address and every route to it go."""
        ...

    def claim(self, key: str, host_id: str) -> HostAddress:
        """The live host ``key`` lives on: the one it was claimed by while that one answers,
        else (never claimed, or its host is gone) ``host_id``, from now on."""
        ...

    def owner(self, key: str) -> HostAddress | None:
        """The live host ``key`` lives on; None when it has none (never claimed, dropped, or its
        host is gone)."""
        ...

    def drop(self, key: str) -> None:
        """``key`` lives nowhere any more (a session that ended)."""
        ...
