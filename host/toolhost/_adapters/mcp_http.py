"""The gateway's bound on what an HTTP upstream's answer may bring (D313).

The SDK's Streamable HTTP client reads a JSON answer whole (``response.aread()``), of any
size, a redirect's body whole before it follows it, and an event stream's events up to
``max_sse_event_size``. The gateway sets that size to its own bound (the SDK's 1 MiB default
failed every result over 1 MiB, as a tool error) and puts this transport under the client:

- every body but an event stream's stops being read past the same bound (``ResponseTooLarge``,
  an ``httpx2.StreamError``: for a JSON answer the SDK turns it into a parse error of that
  request alone, which the adapter reads as ``too_large``); an event stream is bounded per
  event, since the one a session keeps open for notifications may carry more than that in all;
- a redirect's body is not read at all (the SDK follows its ``Location`` only);
- answers are asked for unencoded (``Accept-Encoding: identity``), and a body that comes
  encoded anyway is refused (``EncodedAnswer``): the bound counts what arrives, and 8 KiB of
  gzip decode to 8 MiB.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from toolhost._model.errors import ToolhostError
from toolhost._model.upstream import too_long_words

__all__ = ["BoundedTransport", "EncodedAnswer", "ResponseTooLarge", "quiet_sdk_logs"]


class ResponseTooLarge(httpx2.StreamError, ToolhostError):
    """A body grew past the bound (an ``httpx2.StreamError``: the SDK catches those)."""

    def __init__(self, size: int) -> None:
        super().__init__(too_long_words(size))


class EncodedAnswer(httpx2.StreamError, ToolhostError):
    """A body came with a ``Content-Encoding`` the gateway did not ask for."""

    def __init__(self, encoding: str) -> None:
        super().__init__(f"an answer encoded {encoding!r}, which was not asked for")


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``inner``, with answers' bodies bounded to ``max_bytes`` as above."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_bytes: int) -> None:
        self.inner = inner
        self.max_bytes = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self.inner.handle_async_request(request)
        if response.is_redirect:
            # Its stream closed unread (the connection is not reused), the response left open:
            # the SDK reads the empty body before it follows the Location.
            await response.stream.aclose()  # type: ignore[union-attr]
            response.stream = httpx2.ByteStream(b"")
        elif not response.headers.get("content-type", "").lower().startswith(
                "text/event-stream"):
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            response.stream = _Bounded(response.stream, self.max_bytes,
                                       None if encoding == "identity" else encoding)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, max_bytes: int, encoding: str | None) -> None:
        self.inner = inner
        self.max_bytes = max_bytes
        self.encoding = encoding

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.encoding is not None:
            raise EncodedAnswer(self.encoding)
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.max_bytes:
                raise ResponseTooLarge(self.max_bytes)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _QuietRefusals(logging.Filter):
    """The SDK logs a JSON answer it could not read with its traceback; a refusal of ours is
    expected (its call fails ``too_large`` or ``protocol``): one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], ResponseTooLarge | EncodedAnswer):
            record.msg, record.args, record.exc_info = (
                "an MCP server's answer was refused: %s", (record.exc_info[1],), None)
        return True


def quiet_sdk_logs() -> None:
    """Put ``_QuietRefusals`` on the SDK's HTTP client logger, once."""
    logger = logging.getLogger("mcp.client.streamable_http")
    if not any(isinstance(f, _QuietRefusals) for f in logger.filters):
        logger.addFilter(_QuietRefusals())
