"""A round-robin TCP balancer on loopback, as an operator puts in front of several hosts: each
new connection goes to the next backend, and nothing is pinned (no cookie, no session
affinity: it never looks inside the bytes). Run on a thread of its own, so a journey's event
loop and the servers' processes are never held up by it.

With a client that opens a connection per request (``keepalive=False`` in journey_support),
consecutive requests of one MCP session reach different hosts: the worst a balancer that pins
nothing can do.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
from collections.abc import Iterator, Sequence

__all__ = ["Balancer", "round_robin"]


class Balancer:
    """A running balancer: its address, and how many connections went to each backend."""

    def __init__(self, backends: Sequence[tuple[str, int]]) -> None:
        self.backends = list(backends)
        self.connections = [0] * len(self.backends)
        self._next = itertools.cycle(range(len(self.backends)))
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._run, name="balancer", daemon=True)

    def route_next_to(self, index: int) -> None:
        """The next connection goes to backend ``index`` (then round robin again): for a test
        that must know which host a session opens on."""
        n = len(self.backends)
        self._next = itertools.cycle([(index + k) % n for k in range(n)])

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the balancer did not start")

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accepted, sock=listener))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.close()

    async def _accepted(self, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
        # The next backend that accepts the connection (one that is down is passed over,
        # as a balancer's passive health check does).
        first = next(self._next)
        for offset in range(len(self.backends)):
            chosen = (first + offset) % len(self.backends)
            host, port = self.backends[chosen]
            try:
                up_reader, up_writer = await asyncio.open_connection(host, port)
            except OSError:
                continue
            self.connections[chosen] += 1
            break
        else:
            writer.close()  # every backend is down: the client sees the connection drop
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer),
                             return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


@contextlib.contextmanager
def round_robin(backends: Sequence[tuple[str, int]]) -> Iterator[Balancer]:
    balancer = Balancer(backends)
    balancer.start()
    try:
        yield balancer
    finally:
        balancer.stop()
