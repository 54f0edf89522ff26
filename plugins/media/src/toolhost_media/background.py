"""Writing a stream's bytes on a thread of its own, so that receiving the next chunks (on the
download's thread) overlaps hashing and writing the last ones: the TLS read, sha256 and file
writes all release the GIL, so on two cores the store's work costs the download little.

The download thread batches the chunks it receives (1 MiB) and hands each batch to the writer
through a queue; at most ``depth`` batches are in flight (4 MiB by default), so a slow disk
slows the download instead of filling memory. The writer only ever calls
``ArtifactStream.write``; the tool body enters, commits and aborts the stream, and commits only
after ``finish`` saw every batch written. Leaving the ``with`` any other way aborts the stream
and joins the writer (after the write it is in) before it returns.
"""

from __future__ import annotations

import queue
import threading
from types import TracebackType

from toolhost import ArtifactStream

__all__ = ["WRITER", "BackgroundWrite"]

#: The writer thread's name.
WRITER = "toolhost-media-writer"
_BATCH = 1024 * 1024
_DEPTH = 4


class BackgroundWrite:
    """``write`` chunks from one thread, ``finish()``, then commit ``out``."""

    def __init__(self, out: ArtifactStream, *, batch: int = _BATCH, depth: int = _DEPTH) -> None:
        self._out = out
        self._batch = batch
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        # A full queue blocks ``write``: the bound on what waits for the disk.
        self._batches: queue.Queue[bytes | None] = queue.Queue(maxsize=depth)
        self._failure: BaseException | None = None
        self._stopping = False
        self._finished = False
        self._thread = threading.Thread(target=self._run, name=WRITER, daemon=True)

    def __enter__(self) -> BackgroundWrite:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._finished:
            self.close()

    def write(self, chunk: bytes) -> None:
        """Queue ``chunk``; waits only when ``depth`` batches are already in flight. Raises
        the writer's failure (ArtifactTooLarge past the stream's bound) once it is known."""
        self._raise_failure()
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        if self._pending_bytes >= self._batch:
            self._hand_over()

    def finish(self) -> None:
        """Wait until every queued byte is written; raises the writer's failure if any."""
        if self._pending:
            self._hand_over()
        self._batches.put(None)
        self._thread.join()
        self._finished = True
        self._raise_failure()

    def close(self) -> None:
        """Abort the stream and join the writer; it stops after its current write. Idempotent."""
        if self._finished:
            return
        self._stopping = True
        # Abort first: nothing written so far can be published, and the writer writes no
        # batch after the one it is writing.
        self._out.abort()
        self._batches.put(None)  # the writer drains what waits without writing it
        self._thread.join()
        self._finished = True

    def _hand_over(self) -> None:
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        # One write of the joined batch: each chunk's own write would take the GIL back
        # twice (file, sha256) from the thread receiving the next ones.
        self._batches.put(pending[0] if len(pending) == 1 else b"".join(pending))

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _run(self) -> None:
        while (batch := self._batches.get()) is not None:
            if self._failure is None and not self._stopping:
                try:
                    self._out.write(batch)
                except BaseException as exc:  # raised on the writing thread by write/finish
                    self._failure = exc
