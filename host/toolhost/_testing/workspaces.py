"""``ForwardingWorkspace``: a test's own workspace around the run's real one,
``WatchedChunks``: a read it watches or disturbs that still says whose bytes it read, and
``SwappingWorkspace``: the outsider who swaps a directory in for a read and back.

A test that watches what a tool reads, or breaks the file system under it mid-read, needs a
``Workspace`` that is the real one in every call but the one it is about; this is that base,
so each such double states only its own calls. A double whose ``read_chunks`` were a generator
would hide the real chunks' ``provenance()``, and a tool that asks it (``artifact.export``)
would then lower the trust of every read, disturbed or not: a race test could never fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from toolhost._model.workspace import Listing, Provenance, WriteResult
from toolhost._ports.workspace import ProvenancedChunks, Workspace

__all__ = ["ForwardingWorkspace", "SwappingWorkspace", "WatchedChunks"]


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


class SwappingWorkspace(ForwardingWorkspace):
    """The run's workspace (its directory ``root``), with an outsider, such as a sandboxed
    command of the same run, who swaps the directory ``directory`` for ``theirs`` just as a
    read opens a file, and swaps them back once the read has ended. Renaming a directory
    changes neither the inode nor the ctime of the files in it, so the path's provenance is
    the same before and after the read: only the bytes read differ. ``swapping=False`` is the
    control: the same double with no outsider."""

    def __init__(self, real: Workspace, root: Path, *, directory: str = "d",
                 theirs: str = "theirs", swapping: bool = True) -> None:
        super().__init__(real)
        self.root, self.directory, self.theirs, self.swapping = root, directory, theirs, swapping

    def _swap(self) -> None:
        if not self.swapping:
            return
        os.rename(self.root / self.directory, self.root / "swap")
        os.rename(self.root / self.theirs, self.root / self.directory)
        os.rename(self.root / "swap", self.root / self.theirs)

    def read_chunks(self, path: str, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        self._swap()
        # WatchedChunks, not a generator: the chunks must still say whose bytes they read, or
        # a tool that asks them lowers every read's trust and a race test could not fail.
        return WatchedChunks(self.real.read_chunks(path, chunk_size), done=self._swap)
