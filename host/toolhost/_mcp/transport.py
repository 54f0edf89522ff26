"""The stdio transport: newline-delimited JSON-RPC on the process's stdin and stdout.

When: ``toolhost serve`` without ``--http``. What: when stdin and stdout are pipes or sockets
(how every MCP client spawns a server) the frames are read and written by asyncio's own pipe
transports on the event loop; otherwise (a terminal, a file, Windows) this hands over to the
SDK's ``stdio_server``. Why not always the SDK's: it reads each line and writes each frame
through a worker thread (``anyio.wrap_file``) and relays every frame through a task, three
thread round trips per request, measured at about 500 µs of a 1.3 ms ``tools/call`` round trip
(bench/bench_mcp.py); on the loop, read and written by the tasks that need them, they cost
nothing, and that is what pays for the full pipeline behind every call. The wire is the
same either way, and so is the protection: while serving, fd 0 reads the null device and fd 1
writes to stderr, so neither a stray ``print`` nor a child process can touch a frame; both
are restored on exit.

Both read lines the same way: a line is at most MAX_FRAME_BYTES; a longer one is discarded
whole, through its newline, and answered ``-32700`` (nothing of it is ever read as a frame of
its own), as is a line that is not UTF-8 and one of more than ``frames.MAX_FRAME_VALUES`` JSON
values (counted before it is parsed); blank lines are skipped; a request whose id is not a
string or an integer is answered ``-32600`` (``toolhost._mcp.frames.parse_frame``). Either way
at most MAX_IN_FLIGHT of the client's requests (TOOLHOST_MCP_STDIO_MAX_UNANSWERED) are unanswered
at once (``in_flight``). On the SDK's transport stdin is read by
``_ThreadLines``, a daemon thread, so that a read blocked on a terminal or an idle pipe never
holds up the end of serving (Ctrl-C).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import dataclasses
import io
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp.types as types
import pydantic_core
from mcp.os.win32.utilities import rebind_std_handle_to_fd
from mcp.server.stdio import stdio_server
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from toolhost._composition import ToolhostError, get_logger
from toolhost._mcp.config import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_UNANSWERED
from toolhost._mcp.frames import (
    MAX_FRAME_VALUES,
    ScreenedReads,
    has_unusable_id,
    holds_too_many_values,
    parse_frame,
)

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = ["MAX_FRAME_BYTES", "MAX_IN_FLIGHT", "FrameTooLarge", "in_flight", "pipes_available",
           "stdio_streams"]

#: The longest frame read; a longer line is answered as unreadable and discarded whole. HTTP's
#: largest body (D333): 32 MiB let one line cost 4x what a client can send over HTTP, and
#: nothing a client honestly sends comes near either.
MAX_FRAME_BYTES = DEFAULT_MAX_BODY_BYTES

#: How much the SDK transport's reader thread asks of the wire at a time.
_CHUNK_BYTES = 64 * 1024

#: What ``_ThreadLines`` hands the SDK's parser in place of a line it refuses: text its parse
#: rejects with the same answer the loop transport gives (-32700, and -32600 with a null id).
_OVER_LONG_STAND_IN = f"(a line over {MAX_FRAME_BYTES} bytes, discarded)\n"
_UNUSABLE_ID_STAND_IN = '{"jsonrpc": "2.0", "id": null, "method": null}\n'
_NOT_UTF8_STAND_IN = "(a line that is not UTF-8, discarded)\n"
_TOO_MANY_VALUES_STAND_IN = f"(a line of more than {MAX_FRAME_VALUES} JSON values, discarded)\n"

#: A stdio client's requests that may be unanswered at once unless the operator sets another
#: number (TOOLHOST_MCP_STDIO_MAX_UNANSWERED); one more is answered at once with
#: TOO_MANY_REQUESTS (D367).
MAX_IN_FLIGHT = DEFAULT_MAX_UNANSWERED
TOO_MANY_REQUESTS = "Too many requests are waiting for their answers. Retry when one is answered."

#: How long the last answers may take to flush once the server has stopped.
_FLUSH_S = 2.0


class FrameTooLarge(ToolhostError, ValueError):
    """A line longer than MAX_FRAME_BYTES (answered -32700, like any unreadable frame)."""


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def pipes_available() -> bool:
    """Whether stdin and stdout are both pipes or sockets on a POSIX system."""
    return os.name == "posix" and _is_pipe(0) and _is_pipe(1)


@contextlib.contextmanager
def _claimed_std_fds() -> Iterator[tuple[int, int]]:
    """Private duplicates of fd 0 and 1 for the wire; fd 0 -> null device, fd 1 -> stderr."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        _rebind(0, 1)
    finally:
        os.close(devnull)
    try:
        yield wire_in, wire_out
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()  # anything printed while serving went to stderr; keep it there
        for wire, fd in ((wire_in, 0), (wire_out, 1)):
            with contextlib.suppress(OSError):
                os.set_blocking(wire, True)  # the descriptions are shared with the parent's
                os.dup2(wire, fd)
                _rebind(fd)
            os.close(wire)


def _rebind(*fds: int) -> None:
    # Windows: a child process inherits the Win32 standard handles, not the C runtime's
    # descriptors, so those are pointed at them too (a no-op elsewhere).
    for fd in fds:
        with contextlib.suppress(OSError):
            rebind_std_handle_to_fd(fd)


class _PipeReader:
    """The read side, straight off the loop's pipe reader: one frame per ``receive``.

    An unreadable line is returned as its exception (the SDK transports' convention), which
    ``toolhost._mcp.frames`` answers; the end of input ends the stream.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._closed = False
        #: No sender context to restore: the SDK then copies the current one.
        self.last_context: contextvars.Context | None = None

    async def receive(self) -> SessionMessage | Exception:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            line = await self._line()
            if line is None:
                return FrameTooLarge(f"frame over {MAX_FRAME_BYTES} bytes")
            if not line:
                raise anyio.EndOfStream  # the client closed its end
            if not line.strip():
                continue
            try:
                # Strictly: a byte that is not UTF-8 replaced by U+FFFD ran the call with
                # arguments the client never sent (D369); it is a parse error, as over HTTP.
                return SessionMessage(parse_frame(line.decode("utf-8")))
            except ValueError as exc:  # UnicodeDecodeError too: -32700
                return exc

    async def _line(self) -> bytes | None:
        """The next line (empty at the end of input), or None for a line over the limit, which
        is discarded whole: through its newline, however much of it has yet to arrive. (The
        stream's own ``readline`` drops only what it holds when the limit is passed, and the rest
        of the line then reads as a line of its own.)"""
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            return end.partial  # the end of input: the last line, if it has no newline
        except asyncio.LimitOverrunError:
            pass
        while True:
            try:
                await self._reader.readuntil(b"\n")  # the newline that ends the long line
                return None
            except asyncio.LimitOverrunError as over:
                # ``consumed`` bytes are buffered and hold no newline: drop them, read on.
                await self._reader.readexactly(over.consumed)
            except asyncio.IncompleteReadError:
                return None  # the input ended inside the long line

    async def aclose(self) -> None:
        self._closed = True

    def __aiter__(self) -> _PipeReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _PipeReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _PipeWriter:
    """The write side: each frame goes to the loop's pipe transport from the sending task, so a
    response costs no hop through a writer task. ``write`` never interleaves two frames (each
    is one buffer append); ``drain`` applies the client's back-pressure. A client that closed
    its end gets nothing more, and nothing is raised at the server's handlers for it."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = False
        self._broken = False

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            return
        frame = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        try:
            self._writer.write(frame.encode("utf-8") + b"\n")
            await self._writer.drain()
        except (ConnectionError, OSError):
            self._broken = True

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._broken:
            with contextlib.suppress(ConnectionError, OSError), anyio.move_on_after(_FLUSH_S):
                await self._writer.drain()

    async def __aenter__(self) -> _PipeWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _pipe_streams() -> AsyncIterator[tuple[_PipeReader, _PipeWriter]]:
    loop = asyncio.get_running_loop()
    with _claimed_std_fds() as (wire_in, wire_out):
        reader = asyncio.StreamReader(limit=MAX_FRAME_BYTES, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            os.fdopen(wire_in, "rb", buffering=0, closefd=False))
        try:
            write_transport, write_protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin,
                os.fdopen(wire_out, "wb", buffering=0, closefd=False))
        except BaseException:
            read_transport.close()
            raise
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        pipe_writer = _PipeWriter(writer)
        try:
            yield _PipeReader(reader), pipe_writer
            await pipe_writer.aclose()
        finally:
            read_transport.close()
            write_transport.close()


def _screened(line: bytes) -> str | None:
    """A whole line as ``_ThreadLines`` hands it to the SDK: None for a blank line (skipped), a
    stand-in for a request with an unusable id or one of too many values, else the line as
    text."""
    if not line.strip():
        return None
    if holds_too_many_values(line):
        return _TOO_MANY_VALUES_STAND_IN  # before it is parsed: here, and by the SDK
    try:
        text = line.decode("utf-8")  # strictly, as the loop transport reads it (D369)
    except UnicodeDecodeError:
        return _NOT_UTF8_STAND_IN
    try:
        frame = pydantic_core.from_json(text)
    except ValueError:
        return text  # not JSON: the SDK's parse answers it -32700
    return _UNUSABLE_ID_STAND_IN if has_unusable_id(frame) else text


def _wire_lines(fd: int, stopped: threading.Event) -> Iterator[str]:
    """The screened lines read from ``fd`` (blocking), until the end of input or ``stopped``."""
    pending = bytearray()
    scanned = 0  # bytes of ``pending`` already searched for a newline
    discarding = False  # inside a line over the limit: drop everything up to its newline
    while not stopped.is_set():
        try:
            chunk = os.read(fd, _CHUNK_BYTES)
        except OSError:
            chunk = b""  # the wire failed: as good as the end of input
        if not chunk:
            break
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", max(start, scanned))) >= 0:
            line, start, scanned = bytes(pending[start:end + 1]), end + 1, 0
            if discarding:
                discarding = False
            elif len(line) - 1 > MAX_FRAME_BYTES:
                yield _OVER_LONG_STAND_IN
            elif (text := _screened(line)) is not None:
                yield text
        del pending[:start]
        scanned = len(pending)
        if discarding or len(pending) > MAX_FRAME_BYTES:  # no newline yet: nothing to keep
            if not discarding:
                yield _OVER_LONG_STAND_IN
                discarding = True
            pending.clear()
            scanned = 0
    if pending and not discarding and not stopped.is_set():
        text = _screened(bytes(pending))  # the last line, without a newline
        if text is not None:
            yield text


class _ThreadLines:
    """stdin for the SDK's ``stdio_server``: the wire's screened lines, read by a daemon thread.

    The thread owns ``fd`` (a duplicate of the wire) and closes it when it finishes, so the
    descriptor is never closed, or reused, under a read in progress. Each line waits for the
    server to take the one before (back-pressure, as the SDK's own reader has). A read blocked on
    a terminal or an idle pipe when serving ends is left to the thread: a daemon thread is never
    waited for, so Ctrl-C ends the process at once.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        # Back-pressure without a coroutine made on this thread: one made for a loop that has
        # just closed is never awaited, and its warning landed on serve's stderr at exit.
        self._room = threading.Semaphore(1)
        self._stopped = threading.Event()
        threading.Thread(target=self._run, name="toolhost-stdin", daemon=True).start()

    def _run(self) -> None:
        try:
            for line in _wire_lines(self._fd, self._stopped):
                if not self._hand_over(line):
                    return
            self._hand_over(None)
        finally:
            os.close(self._fd)

    def _hand_over(self, line: str | None) -> bool:
        # Wait until the server took the line before (a daemon thread: never waited for).
        while not self._room.acquire(timeout=0.1):
            if self._stopped.is_set():
                return False
        try:
            self._loop.call_soon_threadsafe(self._lines.put_nowait, line)
        except RuntimeError:
            return False  # the loop has closed: nobody is left to read it
        return not self._stopped.is_set()

    def stop(self) -> None:
        self._stopped.set()

    def __aiter__(self) -> _ThreadLines:
        return self

    async def __anext__(self) -> str:
        line = await self._lines.get()
        self._room.release()
        if line is None:
            raise StopAsyncIteration
        return line


@contextlib.asynccontextmanager
async def _sdk_streams() -> AsyncIterator[
        tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """The SDK's ``stdio_server`` (its parse, its thread-backed writer) over the claimed wire,
    reading stdin through ``_ThreadLines``."""
    with _claimed_std_fds() as (wire_in, wire_out):
        lines = _ThreadLines(os.dup(wire_in))
        stdout = anyio.wrap_file(io.TextIOWrapper(
            os.fdopen(wire_out, "wb", closefd=False), encoding="utf-8"))
        try:
            async with stdio_server(stdin=cast(Any, lines), stdout=stdout) as streams:
                yield streams
        finally:
            lines.stop()


class _InFlight:
    """The requests a stdio client has sent and not yet been answered, at most ``limit``
    (``in_flight``). One past it is answered at once with a static error, written before the
    next frame is read, and never reaches the server (D367).

    A request holds its place until the server is done with it, which is one of two things,
    never both: its answer is written (``_AnsweringWrites``), or the SDK settles it with
    nothing written (a request its client cancelled while it ran), which the SDK says by
    calling the ``on_request_unanswered`` of the ``ServerMessageMetadata`` the request was
    handed on with. A ``notifications/cancelled`` gives nothing back by itself: the SDK
    ignores one that comes after the request's handler returned (its answer is still written,
    and waits for the client to read), and it matches ids as ``coerce_request_id`` does
    (``"5"`` cancels request ``5``); only the SDK knows which requests a cancel ended.

    Why: the SDK runs each request in a task of its own and reads the next frame at once,
    however many are unanswered; a client that wrote requests without reading an answer made
    the server hold a task and an answer for each (about 1 GB after 20,000 ``tools/list``).
    Bounded here, what a client can make the server hold is ``limit`` answers, and the
    refusals go through the same writer, whose ``drain`` stops the reading while the client
    reads nothing. Refused rather than waited for: reading on, a client with ``limit`` calls
    running can still answer an approval question or cancel one of them."""

    def __init__(self, write: WriteStream[SessionMessage], limit: int) -> None:
        self._write = write
        self._limit = limit
        #: The ids of the requests read and not yet answered (a client may reuse one).
        self._open: collections.Counter[types.RequestId] = collections.Counter()
        self._said = False

    def __len__(self) -> int:
        return self._open.total()

    async def admitted(self, item: SessionMessage | Exception) -> SessionMessage | Exception | None:
        """What the server gets of ``item``: None for a request past the limit, which is
        refused here; an admitted request with the metadata that tells when it settled
        unanswered; anything else as it is."""
        if isinstance(item, Exception):
            return item  # answered by ``frames.FrameErrorReplies``, counted nowhere
        message = item.message
        if not isinstance(message, types.JSONRPCRequest):
            return item  # a cancel included: see the class's docstring
        if len(self) < self._limit:
            self._open[message.id] += 1
            return self._tagged(item, message.id)
        if not self._said:
            self._said = True
            get_logger().warning("mcp.stdio.too_many_requests", limit=self._limit)
        # A closed write side means the connection is closing: nobody is left to answer.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._write.send(SessionMessage(types.JSONRPCError(
                jsonrpc="2.0", id=message.id, error=types.ErrorData(
                    code=-32000, message=TOO_MANY_REQUESTS))))
        return None

    def _tagged(self, item: SessionMessage, rid: types.RequestId) -> SessionMessage:
        """``item`` with an ``on_request_unanswered`` that gives its place back, once."""
        settled = False

        async def unanswered() -> None:
            nonlocal settled
            if not settled:
                settled = True
                self.answered(rid)

        metadata = item.metadata
        if isinstance(metadata, ServerMessageMetadata):  # none on stdio; kept if there is
            previous = metadata.on_request_unanswered

            async def both() -> None:
                await unanswered()
                if previous is not None:
                    await previous()

            metadata = dataclasses.replace(metadata, on_request_unanswered=both)
        else:
            metadata = ServerMessageMetadata(on_request_unanswered=unanswered)
        return dataclasses.replace(item, metadata=metadata)

    def answered(self, rid: types.RequestId) -> None:
        """Request ``rid`` is over (answered, or settled unanswered): one more may be read."""
        if self._open[rid] > 0:
            self._open[rid] -= 1
        if not self._open[rid]:
            del self._open[rid]


class _AdmittedReads(ScreenedReads):
    """The read stream the server reads: ``inner``'s items that ``_InFlight`` admits."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], counted: _InFlight) -> None:
        super().__init__(inner)
        self._counted = counted

    async def screen(self, item: SessionMessage | Exception) -> SessionMessage | Exception | None:
        return await self._counted.admitted(item)


class _AnsweringWrites:
    """The write stream the server answers on: a response or error written (drained, on the
    loop transport) gives its request's place back. The SDK writes an answer with its
    request's id as the client sent it, so the id counts it under that same key."""

    def __init__(self, inner: WriteStream[SessionMessage], counted: _InFlight) -> None:
        self._inner = inner
        self._counted = counted

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and (
                message.id is not None):
            self._counted.answered(message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _AnsweringWrites:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def in_flight(read: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage],
              limit: int = MAX_IN_FLIGHT) -> tuple[
        ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]:
    """``read`` and ``write`` with at most ``limit`` of the client's requests unanswered at
    once (``_InFlight``). The server answers on the returned write stream; what answers
    unreadable frames writes on ``write`` itself, so that no id a client puts in an unreadable
    frame can give a request's place back."""
    counted = _InFlight(write, limit)
    return _AdmittedReads(read, counted), _AnsweringWrites(write, counted)


@contextlib.asynccontextmanager
async def stdio_streams(*, on_loop: bool = True) -> AsyncIterator[
        tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """The stdio stream pair ``Server.run`` serves: on the loop when ``on_loop`` and stdin and
    stdout are pipes, else the SDK's thread-backed ``stdio_server``."""
    if on_loop and pipes_available():
        async with _pipe_streams() as streams:
            yield streams
    else:
        async with _sdk_streams() as streams:
            yield streams
