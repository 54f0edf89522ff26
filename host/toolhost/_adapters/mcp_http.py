"""The gateway's bound on what an HTTP upstream's answer may bring (D313).

The SDK's Streamable HTTP client reads a JSON answer whole (``response.aread()``), of any
size, and an event stream's events up to ``max_sse_event_size``. The gateway sets that size to
its own bound (the SDK's 1 MiB default failed every result over 1 MiB, as a tool error) and
puts this transport under the client, so a JSON answer past the same bound stops being read
as it comes: the SDK answers the request with a parse error naming ``ResponseTooLarge``, which
the adapter reads as ``too_large``. Event streams are left to the per-event bound: the one
a session keeps open for notifications may rightly carry more than that in all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2

from toolhost._model.errors import ToolhostError

__all__ = ["BoundedJsonTransport", "ResponseTooLarge"]


class ResponseTooLarge(httpx2.StreamError, ToolhostError):
    """A JSON answer grew past the bound (an ``httpx2.StreamError``: the SDK catches those)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"a message of more than {size} bytes")


class BoundedJsonTransport(httpx2.AsyncBaseTransport):
    """``inner``, with every ``application/json`` answer's body bounded to ``max_bytes``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_bytes: int) -> None:
        self.inner = inner
        self.max_bytes = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            response.stream = _Bounded(response.stream, self.max_bytes)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, max_bytes: int) -> None:
        self.inner = inner
        self.max_bytes = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.max_bytes:
                raise ResponseTooLarge(self.max_bytes)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()
