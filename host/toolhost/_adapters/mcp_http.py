"""The gateway's bound on what an HTTP upstream's answer may bring (D313).

The SDK's Streamable HTTP client reads a JSON answer whole (``response.aread()``), of any
size, a redirect's body whole before it follows it, and an event stream's events up to
``max_sse_event_size``. The gateway sets that size to its own bound (the SDK's 1 MiB default
failed every result over 1 MiB, as a tool error) and puts this transport under the client:

- every body but an event stream's stops being read past the same bound (``ResponseTooLarge``,
  an ``httpx2.StreamError``: for a JSON answer the SDK turns it into a parse error of that
  request alone, which the adapter reads as ``too_large``); an event stream is bounded per
  event, since the one a session keeps open for notifications may carry more than that in all;
- the JSON values a body or an event can hold are counted as it arrives (``mcp_bounds``; of an
  event, its data lines alone, as the SSE parser reads them), and it is held to the budget of
  what its request asked: a call, a listing (all its pages), or anything else (the session's
  stream of notifications included). A body past it is refused as above; an event stream past
  it ends with ``EventTooLarge`` (an ``httpx2.SSEError``: on a request's own stream the SDK
  fails that request, and the adapter reads it as ``too_large``; the session's stream of
  notifications is opened again);
- a redirect's body is not read at all (the SDK follows its ``Location`` only);
- answers are asked for unencoded (``Accept-Encoding: identity``), and a body or an event
  stream that comes encoded anyway is refused (``EncodedAnswer``, ``EncodedEvents``): the
  bounds count what arrives, and 8 KiB of gzip decode to 8 MiB;
- a call's request whose connection could not be made (refused, or not made in time: nothing
  of the request was written) is noted on the call's ``Delivery`` (``CALL_DELIVERY``), so the
  adapter tells "never sent" (retryable) from "lost during the call": the SDK ends the session
  either way, in the same words.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from pydantic import ValidationError

from toolhost._adapters.mcp_bounds import (
    MAX_CALL_VALUES,
    Budget,
    EventValues,
    Spending,
    budget_for,
    encoded_words,
)
from toolhost._adapters.mcp_upstream import CALL_DELIVERY, described
from toolhost._model.errors import ToolhostError

__all__ = ["BoundedTransport", "EncodedAnswer", "EncodedEvents", "EventTooLarge",
           "ResponseTooLarge", "quiet_sdk_logs"]


class ResponseTooLarge(httpx2.StreamError, ToolhostError):
    """A body grew past the bound, or its budget (an ``httpx2.StreamError``: the SDK catches
    those)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)


class EventTooLarge(httpx2.SSEError, ToolhostError):
    """An event of an event stream grew past its budget (an ``httpx2.SSEError``: the SDK fails
    the request whose stream it is, in the words ``SSE stream failed: ...``)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)


class EncodedAnswer(httpx2.StreamError, ToolhostError):
    """A body came with a ``Content-Encoding`` the gateway did not ask for."""

    def __init__(self, encoding: str) -> None:
        super().__init__(encoded_words(encoding))


class EncodedEvents(httpx2.SSEError, ToolhostError):
    """An event stream came with a ``Content-Encoding`` the gateway did not ask for (an
    ``httpx2.SSEError``, as ``EventTooLarge``)."""

    def __init__(self, encoding: str) -> None:
        super().__init__(encoded_words(encoding))


#: No bound of this transport's: the SDK's own applies.
_UNBOUNDED = 1 << 62


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``inner``, with answers' bodies bounded to ``max_bytes`` and to the budget of what their
    request asked (``max_values`` for a call's), as above. One per session: it follows the
    listing under way."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_bytes: int,
                 max_values: int = MAX_CALL_VALUES) -> None:
        self.inner = inner
        self.max_bytes = max_bytes
        self.call = Budget(max_bytes, max_values)
        #: What the pages of the listing under way brought so far.
        self.listed = Spending(budget_for("tools/list", self.call))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        method, first_page = _asked(request)
        if method == "tools/list":
            if first_page:
                self.listed = Spending(self.listed.budget)
            spending = self.listed
        else:
            spending = Spending(budget_for(method, self.call))
        try:
            response = await self.inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            # Raised before a byte of the request is written (a connection reused is one
            # already made: its failures are others). Any other failure may come after.
            delivery = CALL_DELIVERY.get()
            if method == "tools/call" and delivery is not None:
                delivery.unsent = True
            raise
        if response.is_redirect:
            # Its stream closed unread (the connection is not reused), the response left open:
            # the SDK reads the empty body before it follows the Location.
            await response.stream.aclose()  # type: ignore[union-attr]
            response.stream = httpx2.ByteStream(b"")
            return response
        named = response.headers.get("content-encoding", "identity").strip().lower()
        encoding = None if named == "identity" else named
        if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            response.stream = _Bounded(response.stream, spending, encoding)
        else:
            # Read as UTF-8, the one encoding of event streams, whatever charset it names: each
            # byte counted (ASCII) is then the character the SDK's parser reads.
            response.encoding = "utf-8"
            if method == "tools/call":
                # The SDK bounds each event to the call's bytes already (max_sse_event_size).
                spending = Spending(Budget(_UNBOUNDED, self.call.values))
            response.stream = _BoundedEvents(response.stream, spending, encoding,
                                             together=method == "tools/list")
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _asked(request: httpx2.Request) -> tuple[str | None, bool]:
    """The JSON-RPC method a request sends (None for a GET, a notification's or an answer's
    POST, or a body that is none of ours), and whether it asks for a listing's first page."""
    if request.method != "POST":
        return None, False
    try:
        sent = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None, False
    if not isinstance(sent, dict) or "id" not in sent or not isinstance(sent.get("method"), str):
        return None, False
    params = sent.get("params")
    return sent["method"], not (isinstance(params, dict) and params.get("cursor"))


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, spending: Spending, encoding: str | None) -> None:
        self.inner = inner
        self.spending = spending
        self.encoding = encoding

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.encoding is not None:
            raise EncodedAnswer(self.encoding)
        async for chunk in self.inner:
            self.spending.feed(chunk)
            if (why := self.spending.refusal()) is not None:
                raise ResponseTooLarge(why)
            yield chunk
        self.spending.carry()  # the next page of a listing counts with this one

    async def aclose(self) -> None:
        await self.inner.aclose()


class _BoundedEvents(httpx2.AsyncByteStream):
    """An event stream, each event's data held to the budget (``together``: all its events,
    and the next pages', as one listing), counted as the SSE parser reads it (``EventValues``):
    its other lines are dropped before JSON is parsed."""

    def __init__(self, inner: Any, spending: Spending, encoding: str | None, *,
                 together: bool) -> None:
        self.inner = inner
        self.spending = spending
        self.encoding = encoding
        self.together = together

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.encoding is not None:  # what is counted must be what is parsed
            raise EncodedEvents(self.encoding)
        events = EventValues(self.spending, together=self.together)
        async for chunk in self.inner:
            if (why := events.feed(chunk)) is not None:
                raise EventTooLarge(why)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _QuietRefusals(logging.Filter):
    """The SDK logs a JSON answer or an event it could not read with its traceback. A refusal of
    ours, or an answer or event that is not JSON-RPC (pydantic's error, quoting the server's
    bytes), is expected of a broken or hostile server (its call fails ``too_large`` or
    ``protocol``: D313, D494): one line instead, the server's words in it escaped."""

    def filter(self, record: logging.LogRecord) -> bool:
        found = record.exc_info[1] if record.exc_info else None
        if isinstance(found, ResponseTooLarge | EncodedAnswer | EventTooLarge | EncodedEvents):
            record.msg, record.args, record.exc_info = (
                "an MCP server's answer was refused: %s", (found,), None)
        elif isinstance(found, ValidationError):
            record.msg, record.args, record.exc_info = (
                "an MCP server's answer was not JSON-RPC: %s", (described(found),), None)
        return True


def quiet_sdk_logs() -> None:
    """Put ``_QuietRefusals`` on the SDK's HTTP client logger, once."""
    logger = logging.getLogger("mcp.client.streamable_http")
    if not any(isinstance(f, _QuietRefusals) for f in logger.filters):
        logger.addFilter(_QuietRefusals())
