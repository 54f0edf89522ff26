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

A lone surrogate escape (``"x\\ud83dy"``, what JavaScript's ``JSON.stringify`` writes for a
string cut inside a pair) is valid JSON (RFC 8259) that pydantic-core refuses as ``json_invalid``.
``read_json`` reads such a frame again with the standard library's parser, only when the lone
surrogates were its one fault. ``parse_frame`` hands on a ``tools/call`` whose lone surrogates
are all in its arguments, and the pipeline's step 4 refuses them with a row, as ``toolhost
call`` does (D45, D17). Any other such request, and one a transport cannot hand on (the SDK's
own parse: HTTP, ``TOOLHOST_MCP_STDIO=sdk``), is answered ``-32602`` with the request's id
(``unreadable_reply``), so the client is not left waiting.

What a frame becomes once parsed is bounded, not only its bytes (D383's rule, for what a client
sends): ``[{},`` is 3 bytes of JSON and ~80 bytes parsed (~340 through pydantic's
``validate_json``), so one 30 MiB line of 10M empty objects took ~2.7 GB and 45 s of the
session's loop. ``parse_frame`` counts a line's JSON values before parsing it
(``holds_too_many_values``) and refuses one of more than ``MAX_FRAME_VALUES`` as ``-32700``,
as a line over the transport's bytes is; within them it parses with pydantic-core's
``from_json`` and then validates (a quarter of ``validate_json``'s memory and time).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import json
import re
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeGuard

import anyio
import mcp.types as types
import pydantic_core
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from toolhost._composition import MAX_CALL_VALUES, ToolhostError, ValueCount, get_logger

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = [
    "LONE_SURROGATE",
    "MAX_FRAME_VALUES",
    "FrameErrorReplies",
    "ScreenedReads",
    "TooManyValues",
    "UnusableRequestId",
    "error_for_frame",
    "has_unusable_id",
    "holds_too_many_values",
    "parse_frame",
    "read_json",
    "unreadable_reply",
]

#: A ``\\u`` escape of a UTF-16 surrogate. Wherever it matches (an escape, or the text after an
#: escaped backslash) putting ``\\ufffd`` in its place keeps the JSON's structure as it was.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")

#: What ``unreadable_reply`` says of a request only the standard parser reads.
LONE_SURROGATE = "Invalid params: a string holds a lone surrogate escape, which is not text"


#: The most JSON values one frame may hold: the gateway's budget for a call's answer (D383).
#: Parsed, this many cost ~80 MB and ~0.1 s; the largest first-party arguments (a text of
#: 1 MiB characters) are a few values.
MAX_FRAME_VALUES = MAX_CALL_VALUES
#: How much of a line is counted at once: the count's pieces stay small, whatever the line.
#: Also the length from which its parse pauses the cyclic collector.
_PIECE = 1 << 16


class TooManyValues(ToolhostError, ValueError):
    """A line of more than ``MAX_FRAME_VALUES`` JSON values, refused unparsed (-32700)."""


class UnreadableFrame(ToolhostError, ValueError):
    """A line pydantic-core cannot read as JSON, answered as ``unreadable_reply`` says."""

    def __init__(self, text: str | bytes) -> None:
        super().__init__("a frame that is not JSON")
        self.text = text


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
    unusable id is refused rather than read as a notification, and a line of more than
    ``MAX_FRAME_VALUES`` JSON values is refused before it is parsed.

    :raises ValueError: the line is not a JSON-RPC message (``error_for_frame`` answers it).
    """
    if holds_too_many_values(line):
        raise TooManyValues(f"a frame of more than {MAX_FRAME_VALUES} JSON values")
    # The cyclic collector walked a large parse's objects again and again (D383: 0.6 s instead
    # of 0.16 s for a million empty arrays), and the parse makes no cycles. Not paused for a
    # small frame: a few objects, and pausing cost it more than the collector does.
    paused = len(line) > _PIECE and gc.isenabled()
    if paused:
        gc.disable()
    try:
        frame = pydantic_core.from_json(line)
    except ValueError:
        # The common path never gets here: only a frame pydantic-core refused as not JSON
        # takes a second look.
        frame = _call_with_lone_surrogates(line)
        if frame is None:
            raise UnreadableFrame(line) from None
    finally:
        if paused:
            gc.enable()
    message = types.jsonrpc_message_adapter.validate_python(frame, by_name=False)
    # Only a notification can be a misread request.
    if isinstance(message, types.JSONRPCNotification) and has_unusable_id(frame):
        raise UnusableRequestId("a request id must be a string or an integer")
    return message


def holds_too_many_values(line: str | bytes) -> bool:
    """Whether ``line`` may hold more than ``MAX_FRAME_VALUES`` JSON values, counted without
    parsing it as the gateway counts an upstream's (D383): the openers outside strings, exact
    for JSON, and for any other text an upper bound on what a parser makes before its fault."""
    if len(line) <= MAX_FRAME_VALUES:
        return False  # every value takes a character at least: the common frame costs this
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    count = ValueCount()  # the gateway's own counter: the values less the first
    for start in range(0, len(data), _PIECE):
        count.feed(data, start, min(start + _PIECE, len(data)))
        if count.values + 1 > MAX_FRAME_VALUES:
            return True
    return False


def _call_with_lone_surrogates(line: str | bytes) -> dict[str, Any] | None:
    """A ``tools/call`` request pydantic-core refused only for lone surrogate escapes in its
    arguments, as the standard library reads it; None for any other frame. Everything else
    of it (the id, the tool's name, ``_meta``) is echoed, looked up or logged before step 4,
    so it must be text: a reply the server cannot write would end the session."""
    try:
        frame = read_json(line)
    except ValueError:
        return None
    if not (isinstance(frame, dict) and frame.get("method") == "tools/call"
            and isinstance(params := frame.get("params"), dict)
            and _usable_id(frame.get("id"))):
        return None
    return frame if _is_text({**frame, "params": {**params, "arguments": None}}) else None


def _is_text(value: Any) -> bool:
    """Whether a decoded JSON value holds no lone surrogate (it has a UTF-8 form)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except ValueError:  # UnicodeEncodeError
        return False
    return True


def read_json(text: str | bytes) -> Any:
    """``text`` decoded as JSON: pydantic-core's parse, or for a text it refuses only because
    of lone surrogate escapes, the standard library's (which keeps them as lone surrogates).

    :raises ValueError: ``text`` is not JSON (or not UTF-8), as pydantic-core's error.
    """
    try:
        return pydantic_core.from_json(text)
    except ValueError as exc:
        refused = exc
    # Strictly decoded (D369): json.loads would guess UTF-16 or UTF-32 from bytes.
    line = text.decode("utf-8") if isinstance(text, bytes) else text
    if not _SURROGATE_ESCAPE.search(line):
        raise refused
    # With every surrogate escape made U+FFFD pydantic-core must read it: then the lone
    # surrogates were its only fault (not a depth, a number or anything else it refuses).
    try:
        pydantic_core.from_json(_SURROGATE_ESCAPE.sub(r"\\ufffd", line))
    except ValueError:
        raise refused from None
    return json.loads(line)


def _json_invalid(exc: ValidationError) -> bool:
    return any(e.get("type") == "json_invalid" for e in exc.errors())


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
    if isinstance(exc, UnreadableFrame):
        return unreadable_reply(exc.text)
    if isinstance(exc, ValidationError):
        if not _json_invalid(exc):
            return _invalid_request(_request_id(exc))
        # The SDK's stdio transport parsed the line itself: its error still holds the text.
        text = exc.errors()[0].get("input")
        if isinstance(text, str | bytes):
            return unreadable_reply(text)
    return _parse_error()


def unreadable_reply(text: str | bytes) -> types.JSONRPCError:
    """The answer to a frame pydantic-core cannot read and nothing else will: ``-32602`` with
    the request's id when the standard parser reads it as a request (lone surrogates),
    ``-32600`` with a null id when that id is unusable or not text, else ``-32700``."""
    try:
        frame = read_json(text)
    except ValueError:
        return _parse_error()
    if not (isinstance(frame, dict) and "method" in frame and "id" in frame):
        return _parse_error()  # a notification or a response: nobody waits for an answer
    rid = frame["id"]
    if not (_usable_id(rid) and _is_text(rid)):
        return _invalid_request(None)  # no id the answer could carry
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(
        code=types.INVALID_PARAMS, message=LONE_SURROGATE))


def _parse_error() -> types.JSONRPCError:
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
