"""What the hosts of one record share to route MCP requests (``toolhost._ports.routes``): a
host's address, the heartbeat's timing, the one failure.

A host not heard from for HOST_TIMEOUT_S is gone: its sessions end with it, its sessionless
runs move to the next live host that asks.
"""

from __future__ import annotations

from typing import Final

import attrs

from toolhost._model.errors import ToolhostError

__all__ = ["HEARTBEAT_S", "HOST_TIMEOUT_S", "HostAddress", "RoutesUnavailable"]

#: How often a serving host says it is alive.
HEARTBEAT_S: Final = 5.0
#: A host not heard from for this long is gone: three heartbeats missed.
HOST_TIMEOUT_S: Final = 15.0


class RoutesUnavailable(ToolhostError):
    """The table did not answer (its database is away); one line, no credential."""


@attrs.frozen
class HostAddress:
    """A serving host: its id (one per process start) and the URL other hosts reach its MCP
    endpoint at."""

    host_id: str
    url: str
