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
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import anyio
import mcp.types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = ["MAX_FRAME_BYTES", "FrameTooLarge", "pipes_available", "stdio_streams"]

#: The longest frame read; a longer line is answered as unreadable and skipped.
MAX_FRAME_BYTES = 32 * 1024 * 1024

#: How long the last answers may take to flush once the server has stopped.
_FLUSH_S = 2.0


class FrameTooLarge(ValueError):
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
            os.close(wire)


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
            try:
                line = await self._reader.readline()
            except ValueError:  # over the limit: the line was discarded
                return FrameTooLarge(f"frame over {MAX_FRAME_BYTES} bytes")
            if not line:
                raise anyio.EndOfStream  # the client closed its end
            if not line.strip():
                continue
            text = line.decode("utf-8", errors="replace")  # as the SDK's transport does
            try:
                return SessionMessage(types.jsonrpc_message_adapter.validate_json(text,
                                                                                  by_name=False))
            except ValueError as exc:
                return exc

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


@contextlib.asynccontextmanager
async def stdio_streams(*, on_loop: bool = True) -> AsyncIterator[
        tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """The stdio stream pair ``Server.run`` serves: on the loop when ``on_loop`` and stdin and
    stdout are pipes, else the SDK's thread-backed ``stdio_server``."""
    if on_loop and pipes_available():
        async with _pipe_streams() as streams:
            yield streams
    else:
        async with stdio_server() as streams:
            yield streams
