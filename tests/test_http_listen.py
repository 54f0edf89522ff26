"""The sockets ``serve --http`` listens on: what asyncio does with the connections it accepts."""

from __future__ import annotations

import asyncio
import socket

from toolhost._mcp.server import listen_sockets


def test_each_accepted_connection_sends_without_waiting_for_an_ack() -> None:
    # Regression: the listening sockets were made with proto 0, and asyncio sets TCP_NODELAY
    # only on connections accepted from a socket that says IPPROTO_TCP, so Nagle held each
    # SSE event of a kept-alive connection until the client's delayed ACK: ~40 ms a call,
    # and every call a host forwarded to another paid it.
    async def accepted_nodelay() -> int:
        (sock,) = listen_sockets("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            try:
                return await asyncio.wait_for(seen, 10)
            finally:
                writer.close()

    assert asyncio.run(accepted_nodelay()) != 0


def test_every_listening_socket_is_tcp() -> None:
    sockets = listen_sockets("localhost", 0)
    try:
        assert sockets and all(s.proto == socket.IPPROTO_TCP for s in sockets)
    finally:
        for s in sockets:
            s.close()
