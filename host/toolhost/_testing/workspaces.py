"""``ForwardingWorkspace``: a test's own workspace around the run's real one, and
``WatchedChunks``: a read it watches or disturbs that still says whose bytes it read.

A test that watches what a tool reads, or breaks the file system under it mid-read, needs a
``Workspace`` that is the real one in every call but the one it is about; this is that base,
so each such double states only its own calls. A double whose ``read_chunks`` were a generator
would hide the real chunks' ``provenance()``, and a tool that asks it (``artifact.export``)
would then lower the trust of every read, disturbed or not: a race test could never fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from toolhost._model.workspace import Listing, Provenance, WriteResult
from toolhost._ports.workspace import ProvenancedChunks, Workspace

__all__ = ["ForwardingWorkspace", "WatchedChunks"]


class ForwardingWorkspace:
    """A ``Workspace`` that hands every call to ``real``: subclass it and override the calls
    a test observes or disturbs (``read_chunks`` to count or swap, ``write`` to refuse)."""

    def __init__(self, real: Workspace) -> None:
        self.real = real

    def read(self, path: str) -> bytes:
        return self.real.read(path)

    def read_chunks(self, path: str, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        return self.real.read_chunks(path, chunk_size)

    def write(self, path: str, data: bytes, *,
              provenance: Provenance = Provenance.TOOL_WRITTEN) -> WriteResult:
        return self.real.write(path, data, provenance=provenance)

    def listdir(self, path: str = "", *, recursive: bool = False, limit: int = 1000) -> Listing:
        return self.real.listdir(path, recursive=recursive, limit=limit)

    def provenance(self, path: str) -> Provenance:
        return self.real.provenance(path)


class WatchedChunks:
    """The real read's chunks, handed on one by one, with ``after(i)`` called when the reader
    asks for the next chunk once chunk ``i`` (from 0) was handed over, and ``done()`` once:
    after the last chunk, when the read fails, when the reader closes it early, or when it is
    dropped unclosed (as a generator's ``finally`` would run). Nothing is called once the read
    has ended. ``provenance()`` is the real chunks' own (UNKNOWN where they have none), so a
    disturbed read is judged as the host's handle judges it."""

    def __init__(self, chunks: Iterator[bytes], *, after: Callable[[int], None] | None = None,
                 done: Callable[[], None] | None = None) -> None:
        self._chunks = chunks
        self._after = after
        self._done = done
        self._given = 0
        self._ended = False

    def __iter__(self) -> WatchedChunks:
        return self

    def __next__(self) -> bytes:
        if self._ended:
            raise StopIteration
        if self._given and self._after is not None:
            self._after(self._given - 1)
        try:
            chunk = next(self._chunks)
        except BaseException:  # the last chunk was read, or the read failed
            self._finish()
            raise
        self._given += 1
        return chunk

    def provenance(self) -> Provenance:
        chunks = self._chunks
        return chunks.provenance() if isinstance(chunks, ProvenancedChunks) else (
            Provenance.UNKNOWN)

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        self._finish()

    def __del__(self) -> None:
        self._finish()

    def _finish(self) -> None:
        self._ended = True
        done, self._done = self._done, None
        if done is not None:
            done()
