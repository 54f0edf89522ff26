"""Read one frame strictly, and answer a frame the transport could not read instead of dropping it.

When: between a transport's read stream and the SDK's dispatcher. What: the SDK's stdio
transport hands a line that is not a JSON-RPC message to the dispatcher as an exception, and
the dispatcher drops it with a debug log, so a client that wrote one waits for an answer that
never comes. This stream answers it the way JSON-RPC 2.0 says: ``-32700`` for text that is not
JSON (or a line over the transport's limit), ``-32600`` for JSON that is not a valid message
(with the request's id when it has a usable one and a ``method``, else ``null``), and a warning
on stderr. Why a wrapper: it keeps the SDK's loop untouched and works for every stream
transport.

``parse_frame`` is how toolhost's stdio transports read a line. The SDK's parser reads a
request whose ``id`` is not a string or an integer (an object, a float, ``null``, a boolean, an
array) as a *notification*, since notifications may carry extra members; the dispatcher then
handles it as one and never answers, and the client waits forever. A member named ``id`` makes
a frame a request (JSON-RPC 2.0, section 4.1), and MCP requires it to be a string or an
integer, never null, so such a frame is refused as ``-32600`` with a null id: there is no id
the client could match an answer to. The HTTP front door (``http_front``) does the same for
the streamable HTTP transport, whose SDK parse is out of reach.
"""

from __future__ import annotations

import contextlib
import contextvars
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeGuard

import anyio
import mcp.types as types
import pydantic_core
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from toolhost._composition import ToolhostError, get_logger

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = [
    "FrameErrorReplies",
    "ScreenedReads",
    "UnusableRequestId",
    "error_for_frame",
    "has_unusable_id",
    "parse_frame",
]


class UnusableRequestId(ToolhostError, ValueError):
    """A request (a frame with a ``method`` and an ``id`` member) whose id is not a string or an
    integer: answered ``-32600`` with a null id."""


def _usable_id(rid: object) -> TypeGuard[str | int]:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def has_unusable_id(frame: object) -> bool:
    """Whether a decoded frame is a request whose ``id`` is not a string or an integer."""
    return isinstance(frame, dict) and "method" in frame and "id" in frame and not _usable_id(
        frame["id"])


def parse_frame(line: str | bytes) -> types.JSONRPCMessage:
    """One line of the wire as a JSON-RPC message: the SDK's parse, except that a request with an
    unusable id is refused rather than read as a notification.

    :raises ValueError: the line is not a JSON-RPC message (``error_for_frame`` answers it).
    """
    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    # Only a notification can be a misread request; requests and responses cost nothing more.
    if isinstance(message, types.JSONRPCNotification) and has_unusable_id(
            pydantic_core.from_json(line)):
        raise UnusableRequestId("a request id must be a string or an integer")
    return message


def _request_id(exc: ValidationError) -> types.RequestId | None:
    for error in exc.errors():
        frame = error.get("input")
        if isinstance(frame, dict) and "method" in frame:
            rid = frame.get("id")
            if _usable_id(rid):
                return rid
    return None


def _invalid_request(rid: types.RequestId | None) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=rid,
        error=types.ErrorData(code=types.INVALID_REQUEST, message="Invalid Request"))


def error_for_frame(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error response for one unreadable frame."""
    if isinstance(exc, UnusableRequestId):
        return _invalid_request(None)
    if isinstance(exc, ValidationError) and not any(
            e.get("type") == "json_invalid" for e in exc.errors()):
        return _invalid_request(_request_id(exc))
    return types.JSONRPCError(
        jsonrpc="2.0", id=None,
        error=types.ErrorData(code=types.PARSE_ERROR, message="Parse error"))


class ScreenedReads:
    """A read stream over ``inner`` that hands on what ``screen`` makes of each item, reading
    on past one it drops (None).

    ``last_context`` mirrors the inner stream's, so the SDK still restores the sender's
    context variables for each message.
    """

    def __init__(self, inner: ReadStream[SessionMessage | Exception]) -> None:
        self._inner = inner
        self.last_context: contextvars.Context | None = None

    async def screen(self, item: SessionMessage | Exception) -> SessionMessage | Exception | None:
        return item

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            self.last_context = getattr(self._inner, "last_context", None)
            if (kept := await self.screen(item)) is not None:
                return kept

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_val: BaseException | None, exc_tb: TracebackType | None) -> Any:
        await self.aclose()
        return None


class FrameErrorReplies(ScreenedReads):
    """A read stream that answers the exceptions in ``inner`` on ``write`` and yields the rest."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception],
                 write: WriteStream[SessionMessage]) -> None:
        super().__init__(inner)
        self._write = write

    async def screen(self, item: SessionMessage | Exception) -> SessionMessage | Exception | None:
        if not isinstance(item, Exception):
            return item
        reply = error_for_frame(item)
        get_logger().warning("mcp.frame.rejected", code=reply.error.code,
                             error=type(item).__name__)
        # A closed write side means the connection is closing: nobody is left to answer.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._write.send(SessionMessage(reply))
        return None
