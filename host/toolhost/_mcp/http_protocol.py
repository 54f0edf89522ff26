"""The HTTP/1.1 connection ``serve --http`` speaks: uvicorn's h11 protocol (D326), with the
two bounds on a connection uvicorn leaves out (D328).

- A request's head (its request line and headers) must arrive within
  ``TOOLHOST_HTTP_HEAD_TIMEOUT_S`` (10 s) of the connection opening or of the previous
  answer's end, or the connection is closed. uvicorn's keep-alive timer runs only after an
  answer, and any byte received cancels it: a connection that never finished its head was
  held for ever, and ``TOOLHOST_HTTP_MAX_CONNECTIONS`` of them got every other client a 503,
  ``/healthz`` too.
- After an answer given before the request's body was read to its end (a 401, 403, 408,
  413, 421), the rest of a body of known length is read and dropped, at most
  ``DISCARD_BYTES`` of it and within the same deadline, then the connection is closed; a
  chunked body's connection is closed at once. uvicorn read and dropped any body however long
  it was: one unauthenticated connection announcing 100 GB kept a core busy. Closing at once
  is no answer for a body of known length: a client still sending it (httpx sends the whole
  body before it reads) has its connection reset and never reads the 401 or 413, and one
  that finishes within the bound keeps its connection, as before. A chunked body is not read
  on: h11 makes an event of each chunk, and one-byte chunks cost a core 0.85 s a MiB (MCP
  clients and browsers send their bodies with a length).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["DISCARD_BYTES", "BoundedH11Protocol", "bounded_h11"]

#: How much of a body answered before it was read is still read (and dropped) after the
#: answer: twice the default TOOLHOST_HTTP_MAX_BODY_BYTES, the largest body an honest client
#: would be refused for.
DISCARD_BYTES: Final = 16 * 1024 * 1024


def bounded_h11(head_timeout_s: float) -> type[BoundedH11Protocol]:
    """The protocol class for uvicorn's ``http=``, with this deadline for each request's head
    (a browser or an SDK client sends it at once; a client this slow is one a reverse proxy
    in front should buffer)."""
    return type("BoundedH11Protocol", (BoundedH11Protocol,), {"head_timeout_s": head_timeout_s})


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's head, and a bound on what is
    read of a body after its answer (see the module's docstring)."""

    head_timeout_s: float = 10.0
    #: The deadline of the next request's head, or of the rest of a body answered early.
    _head_timer: asyncio.TimerHandle | None = None
    #: Bytes of a body answered early still to be dropped; None: no such body.
    _discarding: int | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._discarding is not None:
            self._discarding -= len(data)
            if self._discarding < 0:
                self.transport.close()
                return
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self._discarding is not None and self.conn.their_state is not h11.SEND_BODY:
            self._discarding = None  # the body answered early ended: the next head's turn
            self._await_head()
        if self.cycle is not cycle:  # a request's head was read: its cycle began
            self._head_arrived()

    def on_response_complete(self) -> None:
        # Before uvicorn's own, which may handle a pipelined request's head (cancelling it).
        if self.conn.their_state is h11.SEND_BODY:
            if any(name == b"transfer-encoding" for name, _ in self.headers):
                self.transport.close()  # chunked, answered early: not read on
            else:
                self._discarding = DISCARD_BYTES  # answered early: the rest, bounded, dropped
        self._await_head()
        super().on_response_complete()

    def _await_head(self) -> None:
        self._head_arrived()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_late)

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()
