"""The HTTP/1.1 connection ``serve --http`` speaks: uvicorn's h11 protocol (D326), with the
two bounds on a connection uvicorn leaves out (D328).

- A request's head (its request line and headers) must arrive within
  ``TOOLHOST_HTTP_HEAD_TIMEOUT_S`` (10 s) of the connection opening or of the previous
  answer's end, or the connection is closed. uvicorn's keep-alive timer runs only after an answer, and any byte
  received cancels it: a connection that never finished its head was held for ever, and
  ``TOOLHOST_HTTP_MAX_CONNECTIONS`` of them got every other client a 503, ``/healthz`` too.
- An answer given before the request's body was read to its end (a 401, 403, 408, 413, 421)
  closes the connection once it is sent. Kept alive, h11 reads and discards the rest of the
  body, however long it is: one unauthenticated connection announcing 100 GB kept a core busy.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["BoundedH11Protocol", "bounded_h11"]


def bounded_h11(head_timeout_s: float) -> type[BoundedH11Protocol]:
    """The protocol class for uvicorn's ``http=``, with this deadline for each request's head
    (a browser or an SDK client sends it at once; a client this slow is one a reverse proxy
    in front should buffer)."""
    return type("BoundedH11Protocol", (BoundedH11Protocol,), {"head_timeout_s": head_timeout_s})


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's head, and no body read
    after its answer (see the module's docstring)."""

    head_timeout_s: float = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a request's head was read: its cycle began
            self._head_arrived()

    def on_response_complete(self) -> None:
        if self.conn.their_state is h11.SEND_BODY:
            # Answered before the body was read to its end: the rest is not read.
            self.transport.close()
        else:
            # Before uvicorn's own: a pipelined request's head, handled there, cancels it.
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
