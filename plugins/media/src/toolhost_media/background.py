"""Writing a stream's bytes on a thread of its own, so that receiving the next chunks overlaps
hashing and writing the last ones (sha256 and file writes release the GIL).

The event loop batches the chunks it receives and hands each batch to one writer thread through
a queue; at most ``depth`` batches are in flight (4 MiB by default), so a slow disk slows the
download instead of filling memory. Batches are large and the writer wakes the loop only when
the loop waits for room: each time one thread takes the GIL back from the other costs the
loop that is receiving. The writer only ever calls ``ArtifactStream.write``; the tool body
enters, commits and aborts the stream, and commits only after ``finish`` saw every batch
written. Leaving the ``async with`` any other way aborts the stream and joins the thread
before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from types import TracebackType

from toolhost import ArtifactStream

__all__ = ["BackgroundWrite"]

_BATCH = 1024 * 1024
_DEPTH = 4


class BackgroundWrite:
    """``write`` chunks from the event loop, ``await finish()``, then commit ``out``."""

    def __init__(self, out: ArtifactStream, *, batch: int = _BATCH, depth: int = _DEPTH) -> None:
        self._out = out
        self._batch = batch
        self._depth = depth
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._batches: queue.SimpleQueue[list[bytes] | None] = queue.SimpleQueue()
        # Each counter is written by one thread only (queued by the loop, written by the
        # writer), so no lock is needed to read the other's.
        self._queued = 0
        self._written = 0
        self._room: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None
        self._stopping = False
        self._finished = False

    async def __aenter__(self) -> BackgroundWrite:
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(target=self._run, name="toolhost-media-writer",
                                        daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._finished:
            self.close()

    async def write(self, chunk: bytes) -> None:
        """Queue ``chunk``; waits only when ``depth`` batches are already in flight. Raises
        the writer's failure (ArtifactTooLarge past the stream's bound) once it is known."""
        self._raise_failure()
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        if self._pending_bytes >= self._batch:
            await self._hand_over()

    async def finish(self) -> None:
        """Wait until every queued byte is written; raises the writer's failure if any."""
        if self._pending:
            await self._hand_over()
        self._batches.put(None)
        await self._done
        self._thread.join()
        self._finished = True
        self._raise_failure()

    def close(self) -> None:
        """Abort the stream and join the writer; it stops after its current write. Idempotent."""
        self._stopping = True
        # Abort first: a write in progress on the writer then fails at once instead of
        # finishing its batch, and nothing written so far can be published.
        self._out.abort()
        self._batches.put(None)
        self._thread.join()

    async def _hand_over(self) -> None:
        while self._queued - self._written >= self._depth:
            # Publish the future before looking again: a batch written in between is seen
            # either by that look or by the writer, which then wakes this one.
            self._room = room = self._loop.create_future()
            if self._queued - self._written >= self._depth:
                await room
            self._room = None
        batch, self._pending, self._pending_bytes = self._pending, [], 0
        self._queued += 1
        self._batches.put(batch)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _run(self) -> None:
        try:
            while (batch := self._batches.get()) is not None:
                if self._failure is None and not self._stopping:
                    try:
                        # One write of the joined batch: each chunk's own write would take the
                        # GIL back twice (file, sha256) from the loop receiving the next ones.
                        self._out.write(batch[0] if len(batch) == 1 else b"".join(batch))
                    except BaseException as exc:  # surfaced on the loop by write/finish
                        self._failure = exc
                self._written += 1
                room = self._room
                if room is not None:
                    self._wake(room)
        finally:
            self._wake(self._done)

    def _wake(self, future: asyncio.Future[None]) -> None:
        # A loop torn down without running the ``async with``'s exit has nobody to wake.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
