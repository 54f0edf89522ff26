"""The Workspace port: the run's workspace as a tool sees it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

__all__ = [
    "Workspace",
]

if TYPE_CHECKING:

    from toolhost._model.workspace import Listing, Provenance, WriteResult

class Workspace(Protocol):
    """The run's workspace. Containment lives here, never in a tool: hand it the caller's
    path string as given. A rejected path raises ``WorkspaceEscape``, which tools do not
    catch (the pipeline turns it into the host's validation failure)."""

    def read(self, path: str) -> bytes:
        """The whole file. Raises WorkspaceEscape, WorkspaceNotFound, WorkspaceIsDirectory."""
        ...

    def read_chunks(self, path: str, chunk_size: int = ...) -> Iterator[bytes]:
        """The file's bytes in chunks, from one descriptor opened and type-checked once."""
        ...

    def write(self, path: str, data: bytes, *, provenance: Provenance = ...) -> WriteResult:
        """Write atomically, creating parent directories, and record ``provenance``."""
        ...

    def listdir(self, path: str = "", *, recursive: bool = False, limit: int = 1000) -> Listing:
        """Entries in bytewise order of their relative path, at most ``limit``."""
        ...

    def provenance(self, path: str) -> Provenance:
        """TOOL_WRITTEN or SANDBOX_WRITTEN while the file is still the one written; else
        UNKNOWN."""
        ...

