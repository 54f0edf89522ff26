"""MCP ``notifications/progress`` for a ``tools/call`` whose client asked for them.

When: the request carries ``params._meta.progressToken``. A client that sent none gets none,
and its call pays for nothing (no sink is set, so the body's ``context.progress`` is the
no-op). What: the call's progress, as the host's reporter lets it through
(``toolhost._pipeline.progress``: checked, at most ten a second, the completing one always),
goes to this request's client through the SDK's request-scoped ``report_progress``: on stdio
into the one stream, on Streamable HTTP onto this request's own response stream (the POST's
SSE), never the session's standalone stream.

Why a pump: a sync body reports from a worker thread, and the SDK's session belongs to the
event loop. The sink only appends to a short queue, from the loop's thread directly or
through ``call_soon_threadsafe`` from any other, and one task per request sends the queue in
order (a task per update could overtake another). Before the handler answers, what is queued
is sent (bounded by ``FLUSH_S``), so every notification precedes the result; an update that
comes after the answer (an abandoned sync body still reporting) is dropped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from toolhost._composition import Progress, get_logger, reporting

__all__ = ["FLUSH_S", "MAX_TOKEN", "request_progress", "usable_token"]

#: How long a finished call's queued notifications have to go out before its answer does.
FLUSH_S = 1.0
#: Updates queued for a client that reads slowly; past it the oldest go (each is superseded
#: by a later one anyway).
_QUEUE = 16

#: The longest progress token (a string's characters, an integer's digits) a client gets
#: progress for; a longer one gets none.
MAX_TOKEN = 256

Send = Callable[[float, float | None, str | None], Awaitable[None]]


def usable_token(token: object) -> bool:
    """Whether ``token`` is a progress token this server echoes: MCP's ``string | integer``,
    at most MAX_TOKEN characters or digits."""
    if isinstance(token, str):
        return len(token) <= MAX_TOKEN
    # Compared, not str()-ed: a Python int of thousands of digits refuses to become text.
    return (isinstance(token, int) and not isinstance(token, bool)
            and abs(token) < 10 ** MAX_TOKEN)


class _Pump:
    """One request's progress: ``__call__`` from any thread, sent in order on the loop."""

    def __init__(self, send: Send, loop: asyncio.AbstractEventLoop) -> None:
        self._send = send
        self._loop = loop
        self._thread = threading.get_ident()
        self._queue: collections.deque[Progress] = collections.deque(maxlen=_QUEUE)
        self._ready = asyncio.Event()
        #: Set while nothing is queued or being sent: what ``flush`` waits for.
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self._task = loop.create_task(self._run())

    def __call__(self, update: Progress) -> None:
        if threading.get_ident() == self._thread:
            self._put(update)
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
            self._loop.call_soon_threadsafe(self._put, update)

    def _put(self, update: Progress) -> None:
        if not self._closed:
            self._queue.append(update)
            self._idle.clear()
            self._ready.set()

    async def _run(self) -> None:
        said = False
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._queue:
                update = self._queue.popleft()
                try:
                    await self._send(update.done, update.total, update.message)
                except Exception as exc:  # a client gone mid-call: the call goes on
                    if not said:
                        said = True
                        get_logger().info("mcp.progress_not_sent", error=type(exc).__name__)
            self._idle.set()

    async def flush(self) -> None:
        """Send what is queued (within ``FLUSH_S``); later updates are dropped."""
        self._closed = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FLUSH_S):
                await self._idle.wait()

    def cancel(self) -> None:
        """Stop now: nothing more goes to this request."""
        self._closed = True
        self._task.cancel()


@contextlib.asynccontextmanager
async def request_progress(ctx: Any) -> AsyncIterator[None]:
    """The calls made inside this block report to this request's client, if it asked.

    ``ctx`` is the SDK's ``ServerRequestContext`` of the ``tools/call``."""
    meta = ctx.meta or {}
    token = meta.get("progress_token")
    if token is None:
        yield
        return
    if not usable_token(token):
        # Echoed in every notification: a token of megabytes cost that much a tick. Progress
        # is the server's to send or not (MCP: "MAY"); the call itself runs (D370).
        get_logger().info("mcp.progress_token_refused", kind=type(token).__name__)
        yield
        return
    pump = _Pump(ctx.session.report_progress, asyncio.get_running_loop())
    try:
        with reporting(pump):
            yield
        await pump.flush()
    finally:
        pump.cancel()  # answered, cancelled or failed: nothing more goes to this request
