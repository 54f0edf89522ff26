"""The gateway's stdio transport to an upstream MCP server: newline-delimited JSON-RPC over a
child's stdin and stdout, read in linear time and bounded.

The SDK's own ``stdio_client`` joins the whole unfinished line to every 64 KiB chunk it reads,
so one 50 MiB result cost ~19 s of copying on this machine (over a minute beside other work),
and it holds a line of any length a server cares to send. Here a line's chunks are kept apart
until its newline (``LineFramer``), and a line past ``max_line_bytes`` ends the connection:
its calls fail ``too_large`` and the supervisor starts the server again. The rest follows the
SDK's transport and the MCP lifecycle's shutdown: the server gets a session of its own
(process group), and leaving closes its stdin, waits, then terminates and kills the group.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import IO, Any

import anyio
import anyio.abc

from toolhost._model.errors import ToolhostError

__all__ = ["LineFramer", "LineTooLong", "stdio_transport"]

#: How long a server has to exit on its own once its stdin closed, and then once its process
#: group was sent SIGTERM, before SIGKILL (the SDK's figures).
_EXIT_GRACE_S = 2.0
#: How long already accepted messages have to reach the server's stdin at the end.
_FLUSH_S = 0.5
_POLL_S = 0.01
#: One read of the server's stdout: large reads keep a big result to few wake-ups.
_READ_BYTES = 1 << 20


class LineTooLong(ToolhostError):
    """A server's line grew past the transport's bound before its newline came."""

    def __init__(self, size: int) -> None:
        super().__init__(f"a message of more than {size} bytes")
        self.size = size


class LineFramer:
    """Cuts a byte stream into lines, each byte copied once: a line's pieces are joined only
    when its newline arrives. Blank lines are skipped (JSON-RPC has none to give)."""

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self._parts: list[bytes] = []
        self._pending = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes; raises ``LineTooLong`` past the bound."""
        lines = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._grow(end - start)
            line = b"".join([*self._parts, chunk[start:end]]) if self._parts \
                else chunk[start:end]
            self._parts.clear()
            self._pending = 0
            if line.strip():
                lines.append(line)
            start = end + 1
        if start < len(chunk):
            self._grow(len(chunk) - start)
            self._parts.append(chunk[start:])
        return lines

    def _grow(self, size: int) -> None:
        self._pending += size
        if self._pending > self.max_line_bytes:
            raise LineTooLong(self.max_line_bytes)


@contextlib.asynccontextmanager
async def stdio_transport(command: str, args: Sequence[str], env: Mapping[str, str], *,
                          errlog: IO[str], max_line_bytes: int,
                          too_long: Callable[[LineTooLong], None]) -> AsyncIterator[Any]:
    """Start ``command`` and yield the SDK's transport streams to it. ``too_long`` is told
    when a line passed ``max_line_bytes``, before the connection ends."""
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    # The SDK's small default environment (PATH, HOME, ...) plus the server's own: never the
    # host's, so no TOOLHOST_* setting or other credential reaches it.
    process = await anyio.open_process([command, *args],
                                       env=get_default_environment() | dict(env),
                                       stderr=errlog, start_new_session=True)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def read_messages() -> None:
        assert process.stdout is not None
        framer = LineFramer(max_line_bytes)
        async with read_writer:
            try:
                while True:
                    for line in framer.feed(await process.stdout.receive(_READ_BYTES)):
                        try:
                            message: SessionMessage | Exception = SessionMessage(
                                jsonrpc_message_adapter.validate_json(line, by_name=False))
                        except ValueError as exc:  # the session surfaces it, as the SDK's
                            message = exc
                        await read_writer.send(message)
            except LineTooLong as exc:
                too_long(exc)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
                    OSError):
                pass  # the server ended, or the session did: the session sees the end
        # A server blocked writing its stdout could not read its stdin's end: keep draining.
        await _drain(process)

    async def write_messages() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for session_message in write_reader:
                    encoded = session_message.message.model_dump_json(by_alias=True,
                                                                      exclude_unset=True)
                    await process.stdin.send(encoded.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the server cannot hear us: the session must know
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_messages)
        tasks.start_soon(write_messages)
        try:
            yield read_stream, write_stream
        finally:
            # Shielded and bounded throughout: a cancelled caller neither leaks a live server
            # nor waits on one.
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(_FLUSH_S):
                    await writer_done.wait()
                await _stop(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


async def _drain(process: anyio.abc.Process) -> None:
    assert process.stdout is not None
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                             anyio.BrokenResourceError, OSError):
        while True:
            await process.stdout.receive(_READ_BYTES)


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, wait; SIGTERM the process group, wait; SIGKILL it, wait."""
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    for sent in (None, signal.SIGTERM, signal.SIGKILL):
        if sent is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sent)
        if await _exited(process, _EXIT_GRACE_S):
            break
    # Not process.wait(): it also waits for the pipes' end, which a child of the server that
    # inherited them may hold. Closing our ends and the transport is what is left.
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    with contextlib.suppress(PermissionError, AttributeError):
        transport.close()  # type: ignore[union-attr]


async def _exited(process: anyio.abc.Process, within_s: float) -> bool:
    deadline = anyio.current_time() + within_s
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL_S)
    return True
