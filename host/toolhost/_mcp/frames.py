"""Answer a frame the transport could not parse, instead of dropping it.

When: between a transport's read stream and the SDK's dispatcher. What: the SDK's stdio
transport hands a line that is not a JSON-RPC message to the dispatcher as an exception, and
the dispatcher drops it with a debug log, so a client that wrote one waits for an answer that
never comes. This stream answers it the way JSON-RPC 2.0 says: ``-32700`` for text that is not
JSON, ``-32600`` for JSON that is not a valid message (with the request's id when it has a
usable one and a ``method``, else ``null``), and a warning on stderr. Why a wrapper: it keeps
the SDK's loop untouched and works for every stream transport.
"""

from __future__ import annotations

import contextlib
import contextvars
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from toolhost._pipeline.log import get_logger

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = ["FrameErrorReplies", "error_for_frame"]


def _request_id(exc: ValidationError) -> types.RequestId | None:
    for error in exc.errors():
        frame = error.get("input")
        if isinstance(frame, dict) and "method" in frame:
            rid = frame.get("id")
            if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
                return rid
    return None


def error_for_frame(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error response for one unreadable frame."""
    if isinstance(exc, ValidationError):
        if any(e.get("type") == "json_invalid" for e in exc.errors()):
            return types.JSONRPCError(
                jsonrpc="2.0", id=None,
                error=types.ErrorData(code=types.PARSE_ERROR, message="Parse error"))
        return types.JSONRPCError(
            jsonrpc="2.0", id=_request_id(exc),
            error=types.ErrorData(code=types.INVALID_REQUEST, message="Invalid Request"))
    return types.JSONRPCError(
        jsonrpc="2.0", id=None,
        error=types.ErrorData(code=types.PARSE_ERROR, message="Parse error"))


class FrameErrorReplies:
    """A read stream that answers the exceptions in ``inner`` on ``write`` and yields the rest.

    ``last_context`` mirrors the inner stream's, so the SDK still restores the sender's
    context variables for each message.
    """

    def __init__(self, inner: ReadStream[SessionMessage | Exception],
                 write: WriteStream[SessionMessage]) -> None:
        self._inner = inner
        self._write = write
        self.last_context: contextvars.Context | None = None

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            self.last_context = getattr(self._inner, "last_context", None)
            if not isinstance(item, Exception):
                return item
            reply = error_for_frame(item)
            get_logger().warning("mcp.frame.rejected", code=reply.error.code,
                                 error=type(item).__name__)
            # A closed write side means the connection is closing: nobody is left to answer.
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._write.send(SessionMessage(reply))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> FrameErrorReplies:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> FrameErrorReplies:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_val: BaseException | None, exc_tb: TracebackType | None) -> Any:
        await self.aclose()
        return None
