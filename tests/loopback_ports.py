"""``free_port``: a port on 127.0.0.1 that nothing listens on, for a server a test starts on a
port it must know first (a token's audience names it; a cluster's settings hold it).

Chosen below the kernel's ephemeral range: a port the kernel hands out for ``bind(0)`` comes
from the range every outgoing connection draws from too, and with hundreds of connections a
second in a test run (clients, PostgreSQL, S3) one took such a port before the server bound it
(CI, host-3.11: "toolhost serve --http found no free port in three tries").
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port"]

#: Where ports are chosen: above the well-known and common service ports, below the
#: ephemeral range (read from the kernel where it says, else Linux's default start).
_LOWEST = 20_000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A port nothing listens on now, outside the ephemeral range when the machine leaves room
    below it; else one the kernel picks."""
    top = _ephemeral_start()
    for _ in range(50 if top > _LOWEST else 0):
        port = random.randrange(_LOWEST, top)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
