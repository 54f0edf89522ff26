"""``ForwardingWorkspace``: a test's own workspace around the run's real one.

A test that watches what a tool reads, or breaks the file system under it mid-read, needs a
``Workspace`` that is the real one in every call but the one it is about; this is that base,
so each such double states only its own calls.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolhost._model.workspace import Listing, Provenance, WriteResult
from toolhost._ports.workspace import Workspace

__all__ = ["ForwardingWorkspace"]


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
